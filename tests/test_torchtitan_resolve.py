"""torchtitan recipes resolve through torchtitan's own ConfigManager, plus the Trainer's
derivations, in one worker process."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from gate.coverage import coverage
from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe
from gate.recipe import load_recipe
from gate.registry import load_registry
from runners.resolve_process import worker_env
from runners.torchtitan.adapter import TORCHTITAN_PATH_VAR, TorchtitanAdapter

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

pytest.importorskip("torchtitan")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "torchtitan"


def variant(recipe: Recipe, name: str, overrides: list[str] | None = None, **body: Any) -> Recipe:
    """``recipe`` named ``name`` with ``overrides`` replacing its own, and body keys replaced."""
    new = dict(recipe.body, **body)
    if overrides is not None:
        new["overrides"] = overrides
    return recipe.model_copy(update={"name": name, "path": f"{name}.yaml", "body": new})


@pytest.fixture(scope="module")
def llama8b() -> Recipe:
    return load_recipe(EXAMPLES / "llama3-8b.yaml")


@pytest.fixture(scope="module")
def resolved(llama8b: Recipe) -> dict[str, EffectiveConfig | AttuneError]:
    """Every recipe of this module, good and bad, resolved in one worker call."""
    pinned = list(llama8b.body["overrides"])
    recipes = [
        llama8b,
        variant(llama8b, "unpinned", []),
        variant(llama8b, "tp2", [*pinned, "--parallelism.tensor_parallel_degree", "2"]),
        variant(
            llama8b,
            "pp2",
            [
                *pinned,
                "--parallelism.pipeline_parallel_degree",
                "2",
                "--training.disable_cuda_graphs",
            ],
        ),
        variant(
            llama8b, "hyphens", ["--training.local-batch-size=2", "--training.global-batch-size=16"]
        ),
        variant(llama8b, "steps", [*pinned, "--training.steps", "100"]),
        load_recipe(EXAMPLES / "llama3-70b.yaml"),
        # refused by torchtitan or by the trainer's rules
        variant(llama8b, "no-module", module="llama9"),
        variant(llama8b, "no-config", config="llama3_9b"),
        variant(llama8b, "bad-value", [*pinned, "--training.seq_len", "abc"]),
        variant(llama8b, "bad-flag", [*pinned, "--training.foo", "1"]),
        variant(llama8b, "batch", [*pinned, "--training.global_batch_size", "20"]),
        variant(llama8b, "tp3", [*pinned, "--parallelism.tensor_parallel_degree", "3"]),
        variant(llama8b, "tp16", ["--parallelism.tensor_parallel_degree", "16"], world_size=16),
        variant(llama8b, "pp-graphs", [*pinned, "--parallelism.pipeline_parallel_degree", "2"]),
        variant(llama8b, "rope", [*pinned, "--training.seq_len", "262144"]),
    ]
    outcomes = TorchtitanAdapter().resolve_each(recipes)
    return {r.name: o for r, o in zip(recipes, outcomes, strict=True)}


def config(resolved: dict[str, EffectiveConfig | AttuneError], name: str) -> EffectiveConfig:
    outcome = resolved[name]
    assert isinstance(outcome, EffectiveConfig), outcome
    return outcome


def test_llama3_8b_resolves_with_torchtitans_config_manager(
    resolved: dict[str, EffectiveConfig | AttuneError],
) -> None:
    base = config(resolved, "llama3-8b")
    v = base.values
    assert (base.framework, base.framework_version, base.devices) == ("torchtitan", "0.3.0", 8)
    # from the config function llama3_8b
    assert (v["module"], v["config"]) == ("llama3", "llama3_8b")
    assert (v["model_spec.name"], v["model_spec.flavor"]) == ("llama3", "8B")
    assert v["model_spec.model"].startswith("sha256:")
    assert v["training.seq_len"] == 8192
    assert v["optimizer.param_groups.0.optimizer_kwargs.lr"] == 3e-4
    assert v["optimizer.param_groups.0.optimizer_kwargs.betas"] == [0.9, 0.95]  # JSON-safe
    assert v["activation_checkpoint"] == "selective"
    # the trainer's derivations for 8 ranks: -1 becomes the ranks left over
    assert v["parallelism.data_parallel_shard_degree"] == 8 // (1 * 1 * 1 * 1) == 8
    assert v["batch_degree"] == 1 * 8
    assert v["training.global_batch_size"] == 16
    assert v["gradient_accumulation_steps"] == 16 // (2 * 8) == 1
    assert v["num_pipeline_parallel_microbatches"] == 1
    assert v["lr_scheduler.total_steps"] == v["training.steps"] == 1000
    assert v["world_size"] == 8
    # explicit: the overrides, what the config function moved off the defaults, the selectors
    assert {"training.local_batch_size", "training.global_batch_size"} <= set(base.explicit)
    assert {"module", "config", "training.seq_len", "training.steps"} <= set(base.explicit)
    assert "optimizer.param_groups.0.optimizer_kwargs.lr" in base.explicit
    assert "parallelism.data_parallel_shard_degree" not in base.explicit
    assert "compile.enable" not in base.explicit


def test_unpinned_global_batch_is_derived(
    resolved: dict[str, EffectiveConfig | AttuneError],
) -> None:
    derived = config(resolved, "unpinned")
    # trainer.py:419: local batch (llama3_8b sets 1) x data-parallel degree (8)
    assert derived.values["training.global_batch_size"] == 1 * 8
    assert derived.values["gradient_accumulation_steps"] == 1
    assert "training.global_batch_size" not in derived.explicit
    assert "training.local_batch_size" in derived.explicit  # llama3_8b sets it off the default 8


def test_layout_changes_move_the_derived_values(
    resolved: dict[str, EffectiveConfig | AttuneError],
) -> None:
    tp2 = config(resolved, "tp2").values
    assert tp2["parallelism.data_parallel_shard_degree"] == 8 // 2 == 4
    assert tp2["training.global_batch_size"] == 16  # pinned
    assert tp2["gradient_accumulation_steps"] == 16 // (2 * 4) == 2
    pp2 = config(resolved, "pp2").values
    assert pp2["parallelism.data_parallel_shard_degree"] == 4
    assert pp2["num_pipeline_parallel_microbatches"] == 2 // 1 == 2
    assert config(resolved, "steps").values["lr_scheduler.total_steps"] == 100


def test_flag_spellings_resolve_alike(resolved: dict[str, EffectiveConfig | AttuneError]) -> None:
    base, hyphens = config(resolved, "llama3-8b"), config(resolved, "hyphens")
    assert hyphens.fingerprint() == base.fingerprint()
    assert set(hyphens.explicit) == set(base.explicit)


def test_llama3_70b_on_64_ranks(resolved: dict[str, EffectiveConfig | AttuneError]) -> None:
    big = config(resolved, "llama3-70b")
    v = big.values
    assert big.devices == 64 == v["world_size"]
    assert v["parallelism.tensor_parallel_degree"] == 8
    assert v["parallelism.data_parallel_shard_degree"] == 64 // 8 == 8
    assert v["training.global_batch_size"] == 8 * 8 == 64
    assert v["activation_checkpoint"] == "full"
    assert v["model_spec.flavor"] == "70B"
    assert {"activation_checkpoint", "parallelism.tensor_parallel_degree"} <= set(big.explicit)
    assert "training.global_batch_size" not in big.explicit


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no-module", r"^no-module\.yaml: module: .*llama9"),
        ("no-config", r"^no-config\.yaml: config: Config function 'llama3_9b' not found"),
        ("bad-value", r"^bad-value\.yaml: overrides: Error parsing --training\.seq-len: .*'abc'$"),
        ("bad-flag", r"^bad-flag\.yaml: overrides: Unrecognized options: --training\.foo, 1$"),
        (
            "batch",
            r"^batch\.yaml: overrides: training\.global_batch_size: .*\(20 % \(2 \* 8\) != 0\)",
        ),
        ("tp3", r"^tp3\.yaml: overrides: parallelism: Invalid parallel dims: .*tp\(3\)"),
        ("tp16", r"^tp16\.yaml: overrides: model_spec: tensor_parallel_degree \(16\) must divide"),
        ("pp-graphs", r"^pp-graphs\.yaml: overrides: .*CUDA graphs do not support pipeline"),
        ("rope", r"^rope\.yaml: overrides: model_spec: Training sequence length 262144 exceeds"),
    ],
)
def test_refused_recipes_name_file_and_key(
    resolved: dict[str, EffectiveConfig | AttuneError], name: str, message: str
) -> None:
    outcome = resolved[name]
    assert isinstance(outcome, AttuneError), outcome
    assert len(str(outcome).splitlines()) == 1
    assert re.search(message, str(outcome)), str(outcome)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"overrides": ["--config", "llama3_70b"]},
            r"overrides: .*belongs in the recipe's 'config'",
        ),
        ({"world_size": 8, "nodes": 1}, r"give either world_size or nodes x gpus_per_node"),
        ({"flavor": "8B"}, r"flavor: extra inputs are not permitted"),
        ({"module": ""}, r"module: string should have at least 1 character"),
    ],
)
def test_recipe_body_errors_name_the_key(
    llama8b: Recipe, body: dict[str, Any], message: str
) -> None:
    with pytest.raises(AttuneError, match=rf"llama3-8b\.yaml: {message}"):
        TorchtitanAdapter().resolve(llama8b.model_copy(update={"body": dict(llama8b.body, **body)}))


def test_worker_env_carries_no_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("WANDB_API_KEY", "secret")
    monkeypatch.setenv(TORCHTITAN_PATH_VAR, str(tmp_path))
    env = worker_env((TORCHTITAN_PATH_VAR,))
    assert set(env) <= {"PATH", "HOME", "LANG", "LC_ALL", "PYTHONPATH"}
    assert "secret" not in "".join(env.values())
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)


def _parser_keys() -> set[str]:
    """Independently of the worker: the keys tyro's parser defines for every config function
    of the models shipped with torchtitan that builds here, plus --module and --config."""
    tyro = importlib.import_module("tyro")
    manager = importlib.import_module("torchtitan.config.manager")
    manager.ConfigManager()  # registers torchtitan's tyro rules (config/manager.py:31-32)
    models = importlib.import_module("torchtitan.models")
    keys = {"module", "config"}

    def visit(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                keys.add(action.dest.replace("-", "_"))
            elif isinstance(action.choices, dict):
                for name, sub in action.choices.items():
                    keys.add(name.split(":")[0].replace("-", "_"))
                    visit(sub)

    for module in sorted(models._supported_models):
        try:
            registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
        except Exception:
            continue
        for name, fn in inspect.getmembers(registry, inspect.isfunction):
            if fn.__module__ != registry.__name__ or name.startswith("_"):
                continue
            if any(p.default is p.empty for p in inspect.signature(fn).parameters.values()):
                continue
            try:
                loaded = fn()
            except Exception:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                visit(
                    tyro.extras.get_parser(
                        type(loaded), default=loaded, registry=manager.custom_registry
                    )
                )
    return keys


def test_keys_are_the_parsers_fields_and_all_classified() -> None:
    keys = TorchtitanAdapter().keys()
    assert keys.version == "0.3.0"
    parser_keys = _parser_keys()
    assert len(keys.keys) == len(parser_keys)
    assert set(keys.keys) == parser_keys
    assert keys.keys["training.seq_len"] == "torchtitan/config/configs.py:52"
    assert keys.keys["validator.freq"] == "torchtitan/components/validate.py:36"
    assert keys.keys["module"] == "torchtitan/config/manager.py:65"
    report = coverage(load_registry("torchtitan", keys.version), keys.keys)
    assert (report.missing, report.not_in_parser, report.derived_in_parser) == ([], [], [])


def test_device_probes_answer_the_declared_gpu_and_are_restored() -> None:
    """While a recipe resolves, torch reports the GPU the recipe declares, never this host's."""
    import torch

    from runners.torchtitan.machine import capability, declared_gpu, undeclared_hint

    probes = (torch.cuda.is_available, torch.cuda.get_device_capability, torch.version.hip)
    with declared_gpu(torch, "sm100"):
        assert torch.cuda.is_available() and torch.cuda.get_device_capability() == (10, 0)
    with declared_gpu(torch, "sm89"):
        assert torch.cuda.get_device_capability(0) == (8, 9)
    with declared_gpu(torch, None):
        assert not torch.cuda.is_available()
        with pytest.raises(RuntimeError, match="declares no gpu_arch"):
            torch.cuda.get_device_capability()
    assert (torch.cuda.is_available, torch.cuda.get_device_capability, torch.version.hip) == probes
    assert capability("sm90") == (9, 0) and capability(None) is None
    assert "declares no gpu_arch" in undeclared_hint("torchtitan/components/quantization/mx.py:71")
    assert undeclared_hint("torchtitan/trainer.py:421") == ""
