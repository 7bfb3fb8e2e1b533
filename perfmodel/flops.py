"""FLOPs of one token through the model, forward, by kind (a multiply-add is 2 FLOPs).

Linear layers: QKV with grouped-query attention (``kv_heads`` groups), the output projection,
the MLP (SwiGLU's two input projections), a MoE layer's router, top-k routed experts and shared
expert, and the output layer over the vocabulary. The input embedding is a lookup, not FLOPs.
Attention's quadratic term is counted causally (half the s x s scores), as Megatron-Bridge's
"model TFLOP/s" counts it (Llama-3 8B at seq 8192: 6N + 6 s h L per token = 51.5 GFLOP).
Training is forward + backward = 3 x forward; recompute adds forward FLOPs that MFU does not
count (``recompute_forward``).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.workload import Workload


@dataclass(frozen=True)
class TokenFlops:
    """Forward FLOPs per token of the whole model."""

    layer_linear: float
    """Every transformer layer's matmuls (the FP8-capable part)."""
    attention: float
    """The causal attention core (QK^T and AV) of every layer."""
    head: float
    """The output layer (kept in 16 bits by Transformer Engine and torchao)."""

    @property
    def forward(self) -> float:
        return self.layer_linear + self.attention + self.head

    @property
    def model(self) -> float:
        """Model FLOPs per token for one training step (forward and backward): MFU's numerator."""
        return 3 * self.forward


def token_flops(w: Workload) -> TokenFlops:
    h, d = w.hidden, w.head_dim
    gm = 2 if w.swiglu else 1
    attn_proj = 2 * h * (w.heads * d + 2 * w.kv_heads * d) + 2 * w.heads * d * h
    dense_mlp = 2 * h * w.ffn * gm + 2 * w.ffn * h
    moe_mlp = (
        2 * h * w.experts
        + w.topk * (2 * h * w.moe_ffn * gm + 2 * w.moe_ffn * h)
        + (2 * h * w.shared_ffn * gm + 2 * w.shared_ffn * h)
    )
    dense_layers = w.layers - w.moe_layers
    linear = w.layers * attn_proj + dense_layers * dense_mlp + w.moe_layers * moe_mlp
    attention = w.layers * 2 * w.seq * w.heads * d
    return TokenFlops(layer_linear=linear, attention=attention, head=2 * h * w.vocab)


def recompute_forward(w: Workload, f: TokenFlops, selective_op_share: float) -> TokenFlops:
    """Forward FLOPs per token that recompute runs again: full recompute re-runs each
    recomputed layer (``recompute_share`` of them), Megatron's selective recompute the
    attention core, torchtitan's per-op selective AC a share of the layers' matmuls."""
    if w.recompute == "full":
        s = w.recompute_share
        return TokenFlops(layer_linear=s * f.layer_linear, attention=s * f.attention, head=0)
    if w.recompute == "selective":
        return TokenFlops(layer_linear=0, attention=f.attention, head=0)
    if w.recompute == "selective_op":
        return TokenFlops(layer_linear=selective_op_share * f.layer_linear, attention=0, head=0)
    return TokenFlops(layer_linear=0, attention=0, head=0)
