"""A small GPT decoder, optionally with a mixture-of-experts MLP, for the embedded workload."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from runners.embedded.config import WorkloadConfig, expert_capacity


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout
        self.kernel = cfg.attention
        mask = torch.tril(torch.ones(cfg.seq_len, cfg.seq_len, dtype=torch.bool))
        self.causal: torch.Tensor
        self.register_buffer("causal", mask.view(1, 1, cfg.seq_len, cfg.seq_len), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        p = self.dropout if self.training else 0.0
        if self.kernel == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # explicit matmul-softmax: materialises the [b, h, t, t] score matrix
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            att = att.masked_fill(~self.causal[:, :, :t, :t], float("-inf"))
            att = F.dropout(F.softmax(att, dim=-1), p=p, training=self.training)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return F.dropout(self.proj(y), p=p, training=self.training)


class MLP(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(F.gelu(self.fc(x)))
        return F.dropout(y, p=self.dropout, training=self.training)


class MoE(nn.Module):
    """Top-k routed experts. With a capacity factor, assignments past an expert's capacity are
    dropped in token order (the token keeps only its residual path for that expert)."""

    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.cfg = cfg
        e, d = cfg.moe_num_experts, cfg.d_model
        self.router = nn.Linear(d, e, bias=False)
        self.w_in = nn.Parameter(torch.randn(e, d, 4 * d) * 0.02)
        self.w_out = nn.Parameter(torch.randn(e, 4 * d, d) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        flat = x.reshape(b * t, d)
        gates = F.softmax(self.router(flat), dim=-1)
        weight, expert = gates.topk(self.cfg.moe_top_k, dim=-1)  # [tokens, k]
        weight = weight / weight.sum(-1, keepdim=True)
        expert_ids, slot_weight = expert.reshape(-1), weight.reshape(-1)
        token_ids = torch.arange(b * t, device=x.device).repeat_interleave(self.cfg.moe_top_k)
        # position of each assignment within its expert's queue, in token order
        onehot = F.one_hot(expert_ids, self.cfg.moe_num_experts)
        position = ((onehot.cumsum(0) - 1) * onehot).sum(-1)
        capacity = expert_capacity(b * t, self.cfg)
        keep = (
            position < capacity
            if capacity is not None
            else torch.ones_like(position, dtype=torch.bool)
        )
        out = torch.zeros_like(flat)
        if self.cfg.moe_fast_dispatch and capacity is not None:
            # static shapes: every expert gets exactly `capacity` rows, padding included
            buf = flat.new_zeros(self.cfg.moe_num_experts, capacity, d)
            buf[expert_ids[keep], position[keep]] = flat[token_ids[keep]]
            h = torch.bmm(F.gelu(torch.bmm(buf, self.w_in)), self.w_out)
            y = h[expert_ids[keep], position[keep]] * slot_weight[keep, None]
            out.index_add_(0, token_ids[keep], y)
        else:
            for e in range(self.cfg.moe_num_experts):
                sel = keep & (expert_ids == e)
                if not bool(sel.any()):
                    continue
                h = F.gelu(flat[token_ids[sel]] @ self.w_in[e]) @ self.w_out[e]
                out.index_add_(0, token_ids[sel], h * slot_weight[sel, None])
        return out.view(b, t, d)


class Block(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp: MoE | MLP = MoE(cfg) if cfg.moe_num_experts else MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        y: torch.Tensor = x + self.mlp(self.ln2(x))
        return y


class GPT(nn.Module):
    def __init__(self, cfg: WorkloadConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # weight tying, as in GPT-2
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        # GPT-2 init: N(0, 0.02) weights, zero biases; keeps step-1 loss near ln(vocab)
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Mean cross-entropy over all tokens of the micro-batch."""
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            if self.cfg.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
