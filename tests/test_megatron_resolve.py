"""Megatron recipes resolve through Megatron's own parse_args + validate_args, in one worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe
from gate.recipe import load_recipe
from runners.adapters import get_adapter
from runners.megatron.adapter import MEGATRON_PATH_VAR, MegatronAdapter
from runners.resolve_process import worker_env

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

pytest.importorskip("megatron.core")

LLAMA = Path(__file__).resolve().parents[1] / "examples" / "megatron" / "llama3-8b.yaml"


def _with_args(recipe: Recipe, name: str, args: list[str]) -> Recipe:
    body = dict(recipe.body, args=args)
    return recipe.model_copy(update={"name": name, "path": f"{name}.yaml", "body": body})


def _set(args: list[str], flag: str, value: str) -> list[str]:
    out = list(args)
    out[out.index(flag) + 1] = value
    return out


def _drop(args: list[str], flag: str) -> list[str]:
    i = args.index(flag)
    return args[:i] + args[i + 2 :]


@pytest.fixture(scope="module")
def llama() -> Recipe:
    return load_recipe(LLAMA)


@pytest.fixture(scope="module")
def resolved(llama: Recipe) -> list[EffectiveConfig]:
    """Baseline, a micro-batch change, and a derived global batch: one worker call."""
    args = list(llama.body["args"])
    candidates = [
        llama,
        _with_args(llama, "mbs2", _set(args, "--micro-batch-size", "2")),
        _with_args(llama, "no-gbs", _drop(args, "--global-batch-size")),
    ]
    return MegatronAdapter().resolve_many(candidates)


def test_llama3_8b_resolves_with_megatron_validation(resolved: list[EffectiveConfig]) -> None:
    base = resolved[0]
    v = base.values
    assert base.framework == "megatron"
    assert base.framework_version.startswith("0.19.2")
    assert base.devices == 8 == v["world_size"]
    model_size = (
        v["tensor_model_parallel_size"]
        * v["pipeline_model_parallel_size"]
        * v["context_parallel_size"]
    )
    assert v["data_parallel_size"] == 8 // model_size == 8
    assert v["global_batch_size"] == 128
    assert v["num_microbatches"] == 128 // (1 * 8) == 16
    assert v["params_dtype"] == "torch.bfloat16"  # derived from --bf16, made JSON-safe
    assert base.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    # explicit keys are argparse dests from Megatron's own parser
    assert {"num_layers", "fp8", "mmap_bin_files", "env.CUDA_DEVICE_MAX_CONNECTIONS"} <= set(
        base.explicit
    )
    assert "data_parallel_size" not in base.explicit


def test_micro_batch_change_keeps_pinned_global_batch(resolved: list[EffectiveConfig]) -> None:
    base, mbs2 = resolved[0].values, resolved[1].values
    assert mbs2["micro_batch_size"] == 2
    assert mbs2["global_batch_size"] == base["global_batch_size"] == 128
    assert (base["num_microbatches"], mbs2["num_microbatches"]) == (16, 8)


def test_unset_global_batch_is_derived(resolved: list[EffectiveConfig]) -> None:
    derived = resolved[2]
    # validate_args: global_batch_size = micro_batch_size x data_parallel_size = 1 x 8
    assert derived.values["global_batch_size"] == 8
    assert derived.values["num_microbatches"] == 1
    assert "global_batch_size" not in derived.explicit
    assert derived.fingerprint() != resolved[0].fingerprint()


def test_unknown_flag_names_the_file(llama: Recipe) -> None:
    bad = _with_args(llama, "llama", [*llama.body["args"], "--foo"])
    with pytest.raises(AttuneError) as err:
        get_adapter("megatron").resolve(bad)
    assert str(err.value) == "llama.yaml: args: unrecognized arguments: --foo"


def test_validation_error_names_the_file(llama: Recipe) -> None:
    # 8 ranks cannot hold tensor-parallel 3
    bad = _with_args(llama, "tp3", _set(llama.body["args"], "--tensor-model-parallel-size", "3"))
    with pytest.raises(AttuneError, match=r"^tp3\.yaml: args: AssertionError: .*divisible"):
        MegatronAdapter().resolve(bad)


def test_recipe_body_errors_name_the_key(llama: Recipe) -> None:
    body = dict(llama.body, gpu_arch="hopper")
    with pytest.raises(AttuneError, match=r"llama3-8b\.yaml: gpu_arch: "):
        MegatronAdapter().resolve(llama.model_copy(update={"body": body}))


def test_worker_env_carries_no_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("ATTUNE_MEGATRON_PATH", str(tmp_path))
    env = worker_env((MEGATRON_PATH_VAR,))
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH"}
    assert "ghp_secret" not in "".join(env.values())
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)
