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

The machine probes those checks, and ``validate_args`` before them, make are answered from the
recipe's declared environment, not the resolving machine (which has no GPU and no Transformer
Engine): the worker runs both stages inside ``declared_te``. The TE version
(``megatron.core.utils._te_version``, read by ``is_te_min_version``/``get_te_version``) and the
fused kernels TE provides (``rope_utils.fused_apply_rotary_pos_emb*``, ``moe_utils.fused_*``:
module globals that are None without TE). The device architecture is pinned by the worker's
``_pinned_gpu``. The torch version probes (``is_torch_min_version``) read the installed torch.

Imported only by the resolve worker (it imports Megatron, untyped).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

from runners.megatron.pins import TRANSFORMER_ENGINE

ASSUMED_TE = TRANSFORMER_ENGINE
"""The Transformer Engine version a recipe that declares none is checked against: the highest
version megatron-core 0.19.2's model checks ask for (transformer_config.py:1562), so an
undeclared TE refuses nothing for being too old, and the one ``attune train-env`` installs for
it (``runners.megatron.pins``). ``transformer_engine: none`` declares no TE."""

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


_PRECISION_AWARE_ADAM_TE = "2.1.0"
"""From this declared TE version on, TE's ``FusedAdam`` is taken to take the arguments
``--use-precision-aware-optimizer`` needs (``master_weight_dtype``, ``exp_avg_dtype``,
``exp_avg_sq_dtype``, ``use_decoupled_grad``; megatron/core/optimizer/optimizer_config.py:450
imports it and reads its signature): the version Megatron's own check on the same path asks for
(optimizer_config.py:438). An older declared TE is refused there as Megatron would refuse it."""
_TE_OPTIMIZERS = ("transformer_engine", "transformer_engine.pytorch",
                  "transformer_engine.pytorch.optimizers")  # fmt: skip


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


def _declared_fused_adam(precision_aware: bool) -> type:
    """A stand-in for TE's ``FusedAdam`` whose signature is the declared version's; it is only
    inspected while resolving, never instantiated."""

    class FusedAdam:
        def __init__(self, params: Any, lr: float = 1e-3) -> None:
            raise RuntimeError("a declared Transformer Engine optimizer is not built here")

    if precision_aware:

        def __init__(
            self: Any,
            params: Any,
            lr: float = 1e-3,
            *,
            master_weight_dtype: Any = None,
            exp_avg_dtype: Any = None,
            exp_avg_sq_dtype: Any = None,
            use_decoupled_grad: bool = False,
        ) -> None:
            raise RuntimeError("a declared Transformer Engine optimizer is not built here")

        FusedAdam.__init__ = __init__  # type: ignore[method-assign]
    return FusedAdam


@contextlib.contextmanager
def _declared_te_optimizers() -> Iterator[None]:
    """``transformer_engine.pytorch.optimizers`` importable, as the declared TE (the version
    ``declared_te`` set) provides it, when the resolving machine has no TE (the usual case).

    Only around the optimizer config's construction: no other module's import sees it."""
    from megatron.core import utils  # type: ignore[import-untyped]
    from packaging.version import Version

    te = utils._te_version
    if te == Version("0.0.0") or importlib.util.find_spec("transformer_engine") is not None:
        yield
        return
    modules = {name: types.ModuleType(name) for name in _TE_OPTIMIZERS}
    modules["transformer_engine.pytorch.optimizers"].FusedAdam = _declared_fused_adam(  # type: ignore[attr-defined]
        te >= Version(_PRECISION_AWARE_ADAM_TE)
    )
    modules["transformer_engine"].__path__ = []
    modules["transformer_engine.pytorch"].__path__ = []
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@contextlib.contextmanager
def declared_te(version: str | None) -> Iterator[None]:
    """Megatron's Transformer Engine probes answer ``version`` (None: ``ASSUMED_TE``;
    ``"none"``: no TE, as megatron-core reports it, version 0.0.0 and no fused kernels)."""
    from megatron.core import utils
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


_TE_MESSAGE = re.compile(r"\bTE\b|transformer[ _-]engine", re.IGNORECASE)


def declared_te_note(message: str, version: str | None) -> str:
    """``message`` with the TE version it was checked against, when it is about TE: Megatron's
    own refusals name the minimum (``requires Transformer Engine >= 2.7.0.dev0``), not the
    version the recipe declared."""
    if not _TE_MESSAGE.search(message):
        return message
    if version is None:
        said = f"transformer_engine unset, checked as {ASSUMED_TE}"
    elif version.lower() == "none":
        said = "the recipe declares transformer_engine: none"
    else:
        said = f"the recipe declares transformer_engine {version}"
    return f"{message} ({said})"


def check_model(args: Any) -> None:
    """Build the configuration dataclasses ``pretrain_gpt.py`` builds from ``args``; whatever
    they refuse propagates (AssertionError, ValueError, ...). ``args`` is left as it was.

    Run inside ``declared_te`` (the worker wraps ``validate_args`` and this in it): the TE
    probes answer the recipe's declared version."""
    from megatron.training import training  # type: ignore[import-untyped]
    from megatron.training.argument_utils import (  # type: ignore[import-untyped]
        core_transformer_config_from_args,
        gpt_config_from_args,
        hybrid_config_from_args,
    )

    args = copy.copy(args)  # the builders never write to it; a copy makes sure of that
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
    with _declared_te_optimizers():
        training.get_megatron_optimizer_config(args)
    training.get_megatron_ddp_config(args)
