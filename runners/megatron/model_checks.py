"""The rest of Megatron-LM's validation: the checks it makes when it builds the model.

``validate_args`` is not all Megatron refuses. ``pretrain_gpt.py`` builds its configuration
dataclasses before any weight exists, and their ``__post_init__`` / ``finalize`` refuse more:
layers per pipeline stage and uneven first/last stages, heads and query groups against TP, MoE
and CP constraints, fusions that need Transformer Engine. megatron-core 0.19.2 builds them as:

- ``core_transformer_config_from_args`` (megatron/training/argument_utils.py:277): the
  TransformerConfig (MLA/heterogeneous variants), ``ModelParallelConfig.__post_init__``
  (megatron/core/model_parallel_config.py:497) then ``TransformerConfig.__post_init__``
  (megatron/core/transformer/transformer_config.py:1294);
- ``gpt_config_from_args`` (megatron/training/argument_utils.py:433) and
  ``GPTModelConfig.finalize`` (megatron/training/models/gpt.py:210), which the GPT builder runs
  before building (virtual pipeline chunks, cudagraphs need the TE RNG tracker);
- ``get_megatron_optimizer_config`` (megatron/training/training.py:1962, OptimizerConfig's
  ``__post_init__``) and ``get_megatron_ddp_config`` (megatron/training/training.py:1977,
  DistributedDataParallelConfig's ``__post_init__``).

The machine probes those checks make are answered from the recipe's declared environment, not
the resolving machine (which has no GPU and no Transformer Engine): the TE version
(``megatron.core.utils._te_version``, read by ``is_te_min_version``/``get_te_version``) and the
fused kernels TE provides (``rope_utils.fused_apply_rotary_pos_emb*``, ``moe_utils.fused_*``:
module globals that are None without TE). The device architecture is pinned by the worker's
``_pinned_gpu``. The torch version probes (``is_torch_min_version``) read the installed torch.

Imported only by the resolve worker (it imports Megatron, untyped).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

ASSUMED_TE = "2.14.0"
"""The Transformer Engine version a recipe that declares none is checked against: the highest
version megatron-core 0.19.2's model checks ask for (transformer_config.py:1562), so an
undeclared TE refuses nothing for being too old. ``transformer_engine: none`` declares no TE."""

_FUSED_ROPE = ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd")
"""rope_utils globals set from TE at import (megatron/core/models/common/embeddings/
rope_utils.py:21-29); TransformerConfig refuses ``apply_rope_fusion`` when both are None
(transformer_config.py:2185, "Please install TE >= 1.4")."""
_FUSED_ROPE_TE = "1.4.0"
_FUSED_PERMUTE = (
    "fused_permute",
    "fused_permute_with_probs",
    "fused_sort_chunks_by_index",
    "fused_sort_chunks_by_index_with_probs",
    "fused_unpermute",
)
"""moe_utils globals set from TE >= 2.1 (transformer_config.py:2667 refuses
``moe_permute_fusion`` without them)."""
_FUSED_PERMUTE_TE = "2.1.0"


def _declared_kernel(*_: Any, **__: Any) -> Any:
    """Stands for a TE kernel the declared environment provides; never called here."""
    raise RuntimeError("a declared Transformer Engine kernel is not callable while resolving")


@contextlib.contextmanager
def _patched(module: Any, values: dict[str, Any]) -> Iterator[None]:
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


@contextlib.contextmanager
def declared_te(version: str | None) -> Iterator[None]:
    """Megatron's Transformer Engine probes answer ``version`` (None: ``ASSUMED_TE``;
    ``"none"``: no TE, as megatron-core reports it, version 0.0.0 and no fused kernels)."""
    from megatron.core import utils  # type: ignore[import-untyped]
    from megatron.core.models.common.embeddings import rope_utils  # type: ignore[import-untyped]
    from megatron.core.transformer.moe import moe_utils  # type: ignore[import-untyped]
    from packaging.version import Version

    present = (version or ASSUMED_TE).lower() != "none"
    te = Version(version or ASSUMED_TE) if present else Version("0.0.0")
    rope = _declared_kernel if present and te >= Version(_FUSED_ROPE_TE) else None
    permute = _declared_kernel if present and te >= Version(_FUSED_PERMUTE_TE) else None
    with (
        _patched(utils, {"_te_version": te}),
        _patched(rope_utils, dict.fromkeys(_FUSED_ROPE, rope)),
        _patched(moe_utils, dict.fromkeys(_FUSED_PERMUTE, permute)),
    ):
        yield


def check_model(args: Any, *, transformer_engine: str | None) -> None:
    """Build the configuration dataclasses ``pretrain_gpt.py`` builds from ``args``; whatever
    they refuse propagates (AssertionError, ValueError, ...). ``args`` is left as it was."""
    from megatron.training import training  # type: ignore[import-untyped]
    from megatron.training.argument_utils import (  # type: ignore[import-untyped]
        core_transformer_config_from_args,
        gpt_config_from_args,
        hybrid_config_from_args,
    )

    args = copy.copy(args)  # the builders never write to it; a copy makes sure of that
    with declared_te(transformer_engine):
        transformer = core_transformer_config_from_args(args)
        if args.padded_vocab_size is None and args.vocab_size is None:
            # The vocabulary comes from the tokenizer file at run time; finalize never reads
            # it, gpt_config_from_args only insists it is known (argument_utils.py:477).
            args.padded_vocab_size = 0
        if args.hybrid_layer_pattern is not None:
            model = hybrid_config_from_args(args, config=transformer)
        else:
            model = gpt_config_from_args(args, config=transformer)
        model.finalize()
        training.get_megatron_optimizer_config(args)
        training.get_megatron_ddp_config(args)
