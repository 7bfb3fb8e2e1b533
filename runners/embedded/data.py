"""Deterministic synthetic token data: the same samples in the same order whatever the layout.

The corpus is a first-order Markov chain over the vocabulary with a few likely successors per
token, so a small model has something real to learn (loss falls from ln(vocab) towards the
chain's entropy). Sample ``i`` depends only on ``(data_seed, i)``: samples are generated in
fixed blocks, each from its own seeded generator, so changing the number of steps, the micro
batch or the number of ranks never changes which tokens a sample holds.
"""

from __future__ import annotations

from functools import lru_cache

import torch

BLOCK = 64
"""Samples generated together from one seeded generator."""
SUCCESSORS = 6
"""Likely next tokens per token in the chain."""


@lru_cache(maxsize=4)
def transition_table(vocab_size: int, data_seed: int) -> torch.Tensor:
    """Row-stochastic [vocab, vocab] matrix with mass on a few successors per token."""
    g = torch.Generator().manual_seed(data_seed * 7919 + 17)
    probs = torch.full((vocab_size, vocab_size), 0.02 / vocab_size)
    succ = torch.randint(0, vocab_size, (vocab_size, SUCCESSORS), generator=g)
    weight = torch.rand(vocab_size, SUCCESSORS, generator=g) + 0.1
    probs.scatter_add_(1, succ, weight / weight.sum(1, keepdim=True) * 0.98)
    return probs / probs.sum(1, keepdim=True)


@lru_cache(maxsize=64)
def _block(vocab_size: int, seq_len: int, data_seed: int, block: int) -> torch.Tensor:
    """BLOCK samples of seq_len + 1 tokens (inputs and shifted targets)."""
    table = transition_table(vocab_size, data_seed)
    g = torch.Generator().manual_seed(data_seed * 1_000_003 + block)
    out = torch.empty(BLOCK, seq_len + 1, dtype=torch.long)
    out[:, 0] = torch.randint(0, vocab_size, (BLOCK,), generator=g)
    for t in range(1, seq_len + 1):
        out[:, t] = torch.multinomial(table[out[:, t - 1]], 1, generator=g).squeeze(1)
    return out


def samples(
    first: int, count: int, *, vocab_size: int, seq_len: int, data_seed: int
) -> torch.Tensor:
    """Samples ``first .. first + count - 1`` as a [count, seq_len + 1] tensor."""
    rows = []
    for i in range(first, first + count):
        rows.append(_block(vocab_size, seq_len, data_seed, i // BLOCK)[i % BLOCK])
    return torch.stack(rows)


def micro_batch(
    step: int,
    rank: int,
    micro: int,
    *,
    global_batch: int,
    micro_batch: int,
    world: int,
    vocab_size: int,
    seq_len: int,
    data_seed: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of one micro-batch of ``step`` (1-based) on ``rank``.

    The global batch of a step is a contiguous run of samples; rank r owns the r-th equal
    slice of it, cut into micro-batches in order.
    """
    per_rank = global_batch // world
    first = (step - 1) * global_batch + rank * per_rank + micro * micro_batch
    data = samples(first, micro_batch, vocab_size=vocab_size, seq_len=seq_len, data_seed=data_seed)
    return data[:, :-1], data[:, 1:]
