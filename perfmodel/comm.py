"""Communication time of one step per device, before overlap, by kind (seconds).

Volumes are what a ring collective moves per rank: an all-reduce 2(n-1)/n of the buffer, an
all-gather or reduce-scatter (n-1)/n (Thakur et al. 2005; NCCL's bus-bandwidth convention),
over a link's one-direction bandwidth times ``comm_efficiency``. A group runs over the scale-up
fabric while its ranks fit in one domain, else over the network (``Part.link_bytes_per_s``);
Megatron's rank order is TP innermost, then CP, EP, DP, PP.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.hardware import Part
from perfmodel.workload import Workload


@dataclass(frozen=True)
class Comm:
    tp: float
    cp: float
    ep: float
    pp_p2p: float
    dp_grad: float
    """Gradient reduce (all-reduce, or reduce-scatter with a sharded optimizer/FSDP), per step."""
    dp_param: float
    """Parameter all-gather (distributed optimizer once per step; FSDP per micro-batch, twice)."""


def _ring(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


def local_parameters(w: Workload) -> float:
    """Parameters one device holds before data-parallel sharding: layers split by PP, matmuls
    by TP, routed experts by EP x TP; embedding and output layer split by TP (on the first and
    last stage: counted once per device as an average over stages)."""
    h, d, gm = w.hidden, w.head_dim, (2 if w.swiglu else 1)
    attn = h * (w.heads * d + 2 * w.kv_heads * d) + w.heads * d * h
    dense = attn + (gm + 1) * h * w.ffn
    routed = w.experts * (gm + 1) * h * w.moe_ffn
    shared = (gm + 1) * h * w.shared_ffn + h * w.experts
    layers = (w.layers - w.moe_layers) * dense + w.moe_layers * (attn + shared)
    per_device = layers / (w.tp * w.pp) + w.moe_layers * routed / (w.ep * w.tp * w.pp)
    return per_device + 2 * w.vocab * h / (w.tp * w.pp)


def communication(w: Workload, hw: Part, efficiency: float) -> Comm:
    def bw(span: int, stride: int = 1) -> float:
        return hw.link_bytes_per_s(span, stride) * efficiency

    tokens = w.micro_batch * w.seq / w.cp  # per micro-batch on one device
    act = tokens * w.hidden * 2  # one bf16 activation tensor of the layer's input
    local_layers = w.layers / w.pp
    full = w.recompute == "full"
    m = w.microbatches

    # TP: forward 2 all-reduces (or 2 all-gathers + 2 reduce-scatters with SP) per layer,
    # backward the same, a recomputed forward again.
    tp_ops = 4 * (2 + (w.recompute_share if full else 0))
    tp = m * local_layers * tp_ops * _ring(w.tp) * act / bw(w.tp) if w.tp > 1 else 0.0

    # CP: the ring passes each chunk's K and V (cp - 1) times forward; backward passes K, V and
    # their gradients.
    kv = 2 * tokens * w.kv_heads * w.head_dim * 2 / w.tp
    passes = 3 + (1 if full else 0)
    cp = m * local_layers * passes * (w.cp - 1) * kv / bw(w.tp * w.cp, w.tp) if w.cp > 1 else 0.0

    # EP: dispatch and combine all-to-all forward and backward, top-k copies of each token.
    ep = 0.0
    if w.ep > 1 and w.moe_layers:
        routed = tokens / (w.tp if w.sequence_parallel else 1) * w.topk * w.hidden * 2
        ep = m * (w.moe_layers / w.pp) * 4 * _ring(w.ep) * routed / bw(w.tp * w.ep, w.tp)

    # PP: one activation forward and one gradient backward per micro-batch per virtual stage.
    pp = 0.0
    if w.pp > 1:
        boundary = act / (w.tp if w.sequence_parallel else 1)
        pp = m * 2 * w.vpp * boundary / bw(w.world, w.world // w.pp)

    # DP over dp x cp ranks (Megatron reduces gradients over both).
    group, span, stride = w.dp * w.cp, w.tp * w.cp * w.dp, w.tp
    params = local_parameters(w)
    grad = param = 0.0
    if group > 1:
        sharded = w.distributed_optimizer or w.fsdp
        grad = (1 if sharded else 2) * _ring(group) * params * w.grad_bytes / bw(span, stride)
        pbytes = 1 if w.fp8_param_gather else w.param_bytes
        gather = _ring(group) * params * pbytes / bw(span, stride)
        if w.fsdp:
            grad, param = grad * m, 2 * gather * m  # per micro-batch; forward and backward
        elif w.distributed_optimizer:
            param = gather
    return Comm(tp=tp, cp=cp, ep=ep, pp_p2p=pp, dp_grad=grad, dp_param=param)
