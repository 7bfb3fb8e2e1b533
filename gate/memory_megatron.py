"""Peak device memory of a Megatron-LM configuration, term by term (see ``gate.memory``).

Model states: mixed-precision Adam holds 2 (param) + 2 (grad) + 12 (fp32 master, two moments)
bytes per parameter, the 12 sharded over data parallelism by ZeRO-1 / Megatron's distributed
optimizer, all of it by FSDP (Rajbhandari et al. 2020, "ZeRO", arXiv:1910.02054, sections 3.1
and 5.1); gradients are fp32 when ``accumulate_allreduce_grads_in_fp32`` (Megatron's default for
bf16), else in the parameters' dtype. Parameters are counted per layer from the dimensions (QKV
with ``num_query_groups``, SwiGLU's two input projections, routed experts split over EP x ETP,
the untied output layer on the last stage, a tied one copied there when PP > 1).

Activations: the bytes each transformer layer saves for backward, per token, after Korthikanti
et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv:2205.05198,
section 4.1 and table 2): sbh(34 + 5as/h) per layer, of which 24sbh (the linear layers' inputs
and outputs) is split by TP and the rest (norms, dropout masks) only with sequence parallelism;
selective recompute drops the 5as/h score term, full recompute keeps only each recomputed
group's input (plus one group rematerialised at a time). Generalised term by term: Q, K, V of
``num_query_groups``, SwiGLU's 2f-wide fc1 output, top-k copies of every token through the
routed experts, no score matrix with Transformer Engine's flash/fused attention (which keeps
the fp32 log-sum-exp), dropout masks only when dropout > 0, fp32 logits of the cross entropy on
the last stage. Pipeline stage r holds min(p - r, m) micro-batches under 1F1B; the interleaved
schedule holds (2(p - r - 1) + (v - 1)p + 1) / v stage-passes, p(1 + (p-1)/(pv)) on the first
(Narayanan et al. 2021, arXiv:2104.04473, section 2.2; Korthikanti et al. section 4.2.3). The
first and the last stage are both counted and the larger is the prediction.
"""

from __future__ import annotations

import math
from typing import Any

KNOWN_VOCABULARIES = {"GPT2BPETokenizer": 50257, "Llama2Tokenizer": 32000}
"""Sizes of fixed published tokenizers (GPT-2 BPE, Llama 2 SentencePiece) whose size Megatron's
validation cannot see (it lives in the tokenizer file)."""
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}
_FLASH = ("flash", "fused", "auto")
"""Attention backends (Transformer Engine's) that recompute scores instead of saving them."""


def supported(v: dict[str, Any]) -> bool:
    """Whether the values carry what the formula needs (no MLA, no hybrid Mamba layers)."""
    needed = all(v.get(k) for k in ("num_layers", "hidden_size", "num_attention_heads"))
    return needed and not v.get("multi_latent_attention") and not v.get("hybrid_layer_pattern")


def _int(v: dict[str, Any], key: str, default: int = 1) -> int:
    return default if v.get(key) is None else int(v[key])


def _dtype(value: Any) -> int:
    return _DTYPE_BYTES.get(str(value).removeprefix("torch."), 4)


def padded_vocabulary(v: dict[str, Any], notes: list[str]) -> int:
    """Padded vocabulary: Megatron pads to a multiple of make_vocab_size_divisible_by x TP."""
    if v.get("padded_vocab_size"):
        return int(v["padded_vocab_size"])
    size = v.get("vocab_size") or KNOWN_VOCABULARIES.get(str(v.get("tokenizer_type")))
    if not size:
        notes.append("vocabulary unknown (tokenizer file): embedding and output layer left out")
        return 0
    notes.append(f"vocabulary {size} from the tokenizer type, padded as Megatron pads it")
    multiple = _int(v, "make_vocab_size_divisible_by", 128) * _int(v, "tensor_model_parallel_size")
    return math.ceil(int(size) / multiple) * multiple


def predict(v: dict[str, Any]) -> dict[str, Any]:
    """The fields of a ``MemoryPrediction`` for the resolved Megatron arguments ``v``."""
    notes: list[str] = []
    L, h, a = int(v["num_layers"]), int(v["hidden_size"]), int(v["num_attention_heads"])
    f, d = _int(v, "ffn_hidden_size", 4 * h), _int(v, "kv_channels", h // a)
    g = _int(v, "num_query_groups", a) if v.get("group_query_attention") else a
    t, p = _int(v, "tensor_model_parallel_size"), _int(v, "pipeline_model_parallel_size")
    cp, ep = _int(v, "context_parallel_size"), _int(v, "expert_model_parallel_size")
    etp, vpp = (
        _int(v, "expert_tensor_parallel_size", t),
        _int(v, "virtual_pipeline_model_parallel_size"),
    )
    gm = 2 if v.get("swiglu") else 1
    nf = 2 if v.get("normalization", "LayerNorm") == "LayerNorm" else 1
    bias = 1 if v.get("add_bias_linear", True) else 0
    experts, topk = _int(v, "num_experts", 0), _int(v, "moe_router_topk", 2)
    fm, fs = _int(v, "moe_ffn_hidden_size", f), _int(v, "moe_shared_expert_intermediate_size", 0)
    vocab = padded_vocabulary(v, notes)
    freq = v.get("moe_layer_freq", 1)
    pattern = (
        [0] * L
        if not experts
        else list(freq)
        if isinstance(freq, list)
        else [int(i % int(freq) == 0) for i in range(L)]
    )

    # Parameters of one layer: (split over TP, replicated over TP, routed experts over EP x ETP).
    q, kv = a * d, 2 * g * d
    attn = h * (q + kv) + q * h + bias * (q + kv)
    rep_common = bias * h + 2 * nf * h

    def layer_params(moe: int) -> tuple[int, int, int]:
        if moe:
            routed = experts * (h * fm * gm + fm * h + bias * (fm * gm + h))
            return attn + h * fs * gm + fs * h, rep_common + h * experts, routed
        return attn + h * f * gm + f * h + bias * f * gm, rep_common + bias * h, 0

    pos = (
        _int(v, "max_position_embeddings", 0) * h
        if v.get("position_embedding_type") == "learned_absolute"
        else 0
    )
    untied = bool(v.get("untie_embeddings_and_output_weights"))
    parameters = (
        sum(sum(layer_params(moe)) for moe in pattern) + vocab * h * (1 + untied) + pos + nf * h
    )

    def stage_params(layers: list[int], first: bool, last: bool) -> tuple[float, float]:
        """(non-expert, expert) parameters per device of one stage."""
        per_layer = [layer_params(moe) for moe in layers]
        dense = sum(split / t + rep for split, rep, _ in per_layer) + (
            vocab * h / t + pos if first else 0
        )
        dense += (nf * h + (vocab * h / t if p > 1 or untied else 0)) if last else 0
        return dense, sum(e for _, _, e in per_layer) / (ep * etp)

    # Bytes per parameter and what each is sharded over.
    half = bool(v.get("fp16") or v.get("bf16"))
    aware = bool(v.get("use_precision_aware_optimizer"))
    per_param = {
        "params": 2 if half else 4,
        "grads": 4 if v.get("accumulate_allreduce_grads_in_fp32") or not half else 2,
        "optim": ((_dtype(v.get("main_params_dtype")) if aware else 4) if half else 0)
        + (_dtype(v.get("exp_avg_dtype")) if aware else 4)
        * (2 if v.get("optimizer", "adam") == "adam" else 1),
    }
    instances = _int(v, "num_distributed_optimizer_instances")
    dp = _int(v, "data_parallel_size") * cp // instances
    edp = max(1, _int(v, "world_size") // (etp * ep * p) // instances)
    if v.get("use_torch_fsdp2"):
        sharded = {"params", "grads", "optim"}
    elif v.get("use_megatron_fsdp"):
        sharded = set(str(v.get("data_parallel_sharding_strategy", "")).split("_"))
    else:
        sharded = {"optim"} if v.get("use_distributed_optimizer") else set()

    def states(dense: float, expert: float) -> list[float]:
        return [
            n * (dense / (dp if k in sharded else 1) + expert / (edp if k in sharded else 1))
            for k, n in per_param.items()
        ]

    # Saved activations: terms per token split over TP, or replicated over TP unless SP.
    sp = bool(v.get("sequence_parallel")) and t > 1
    rep_div = t if sp else 1
    s, b = int(v["seq_length"]), _int(v, "micro_batch_size")
    tokens = s * b / cp
    drop = h if float(v.get("hidden_dropout") or 0) > 0 else 0
    granularity = v.get("recompute_granularity")
    modules = (
        set(v.get("recompute_modules") or ["core_attn"]) if granularity == "selective" else set()
    )
    flash = str(v.get("attention_backend", "auto")).rsplit(".", 1)[-1] in _FLASH
    scores = (
        0
        if flash or "core_attn" in modules
        else (5 if float(v.get("attention_dropout") or 0) > 0 else 2)
    )

    def layer_bytes(moe: int) -> float:
        """One layer, one micro-batch (Korthikanti et al. section 4.1, term by term)."""
        rep = 4 * h + (0 if "layernorm" in modules else 4 * h) + 2 * drop  # norm in/out, masks
        split = 2 * (q + kv) + 2 * q + (4 * a if flash else 0) + scores * a * s / cp
        routed = 0.0
        if not moe:
            split += 0 if "mlp" in modules else 2 * f * gm + 2 * f  # fc1 output, activation
        else:
            rep += 8 * experts  # router logits and probabilities (fp32)
            split += 0 if "shared_experts" in modules else 2 * fs * gm + 2 * fs
            act = 0 if "moe_act" in modules else 2 * fm
            # top-k copies per token gathered over ETP: expert input whole, hidden split by ETP
            # (the routing probabilities scale the activation, so no expert output is saved)
            routed = 0 if "moe" in modules else topk * (etp * 2 * h + 2 * fm * gm + act) / t
        return tokens * (rep / rep_div + split / t + routed)

    full = granularity == "full"
    method, group_n = v.get("recompute_method") or "uniform", _int(v, "recompute_num_layers")
    m = _int(v, "num_microbatches")

    def stage_activations(layers: list[int], rank: int, first: bool, last: bool) -> float:
        stored = working = 0.0
        for c in range(vpp):
            chunk = layers[c * len(layers) // vpp : (c + 1) * len(layers) // vpp]
            for i, moe in enumerate(chunk):
                recomputed = full and (method == "uniform" or i < group_n)
                keeps_input = method == "block" or i % group_n == 0
                stored += (
                    (tokens * 2 * h / rep_div * keeps_input) if recomputed else layer_bytes(moe)
                )
            if full and chunk and (method == "uniform" or group_n > 0):
                # one group is rematerialised at a time during backward
                group = chunk[:group_n] if method == "uniform" else chunk[:1]
                working = max(working, sum(layer_bytes(moe) for moe in group))
        in_flight = float(min(p - rank, m))
        if vpp > 1:  # chunk-micro-batches of the interleaved warm-up, over the chunks
            in_flight = min(2 * (p - rank - 1) + (vpp - 1) * p + 1, m * vpp) / vpp
        extra = tokens * (8 + drop / rep_div) * in_flight if first else 0.0  # token ids, mask
        extra += tokens * (4 * h / rep_div + 4 * vocab / t) if last else 0.0  # final norm, logits
        return stored * in_flight + working + extra

    # Uneven stages: the first and/or last may be given; the others split the rest evenly.
    given = {k: v.get(f"decoder_{k}_pipeline_num_layers") for k in ("first", "last")}
    others = p - sum(n is not None for n in given.values())
    even = (L - sum(int(n or 0) for n in given.values())) // max(1, others)
    candidates = []
    for name, rank in ({"first": 0, "last": p - 1} if p > 1 else {"only": 0}).items():
        first, last = rank == 0, rank == p - 1
        fixed = given.get(name)
        n = L if p == 1 else even if fixed is None else int(fixed)
        layers = pattern[:n] if first else pattern[L - n :]
        w, gr, o = states(*stage_params(layers, first, last))
        act = stage_activations(layers, rank, first, last)
        candidates.append((w + gr + o + act, name, w, gr, o, act))
    _, stage, w, gr, o, act = max(candidates)
    if experts:
        notes.append(f"routed tokens: each token to {topk} of {experts} experts, balanced over EP")
    if v.get("fp8"):
        notes.append("fp8 weights and activations not modelled: counted as 16-bit")
    if v.get("pipeline_model_parallel_layout"):
        notes.append("pipeline layout string not read: layers split evenly")
    return {
        "weights_bytes": round(w),
        "gradients_bytes": round(gr),
        "optimizer_bytes": round(o),
        "activations_bytes": round(act),
        "layer_activation_bytes": round(layer_bytes(pattern[0])),
        "parameters": parameters,
        "stage": stage,
        "notes": notes,
    }
