"""The embedded workload's device memory (``device_memory_mib``): each rank may allocate that
many MiB beyond its start-up, the operating system refuses the rest, and a layout that needs
more runs out of memory for real: classified ``oom``, its result written, its time charged."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.cli import main
from gate.models import TrialResult
from gate.recipe import load_recipe
from runners.adapters import get_adapter
from tests.conftest import ROOT

SMALL_DEVICE = ROOT / "examples/ported-gpt-small-device.yaml"


def _recipe(tmp_path: Path, memory: object, **config: object) -> Path:
    body = yaml.safe_load(SMALL_DEVICE.read_text())
    body["config"].update(config)
    if memory is None:
        del body["device_memory_mib"]
    else:
        body["device_memory_mib"] = memory
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


def test_the_launch_holds_each_rank_to_the_recipe_device_memory(tmp_path: Path) -> None:
    adapter = get_adapter("embedded")
    recipe = load_recipe(_recipe(tmp_path, 360))
    effective = adapter.resolve(recipe)
    spec = adapter.launch(recipe, effective, steps=2, workdir=tmp_path / "w", profile=False)
    assert spec.argv[1:4] == ["-m", "runners.embedded.device", "360"]
    # a profile run goes without it: the profiler's buffers are host memory on a GPU
    profiled = adapter.launch(recipe, effective, steps=2, workdir=tmp_path / "p", profile=True)
    assert profiled.argv[1:3] == ["-m", "runners.embedded.train"]
    two = load_recipe(_recipe(tmp_path / "two", 360, data_parallel_size=2, micro_batch_size=8))
    ranks = adapter.launch(two, adapter.resolve(two), steps=2, workdir=tmp_path, profile=False)
    assert ranks.argv[-7:-4] == ["-m", "runners.embedded.device", "360"]  # every rank
    # it describes the device, not the training: the effective configuration is the same
    bare = load_recipe(_recipe(tmp_path, None))
    assert adapter.resolve(bare).fingerprint() == effective.fingerprint()
    spec = adapter.launch(bare, effective, steps=2, workdir=tmp_path / "w", profile=False)
    assert spec.argv[1:3] == ["-m", "runners.embedded.train"]


@pytest.mark.parametrize("memory", [0, -5, "lots", True, 360.5])
def test_a_device_memory_that_is_no_size_is_bad_input(
    memory: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gate", "check", str(_recipe(tmp_path, memory)), str(SMALL_DEVICE)]) == 2
    assert "device_memory_mib" in capsys.readouterr().err


@pytest.mark.slow  # two real training runs
def test_a_layout_beyond_the_device_memory_runs_out_of_it_and_is_charged(
    tmp_path: Path,
) -> None:
    """The short demo's first candidate: recompute off at micro-batch 16 needs about 390 MiB
    beyond start-up, more than the recipe's 360 (recompute on needs about 300: it fits)."""
    results = {}
    for recompute in (True, False):
        recipe = _recipe(tmp_path / str(recompute), 360, activation_checkpointing=recompute)
        out = recipe.parent / "result.json"
        argv = ["bench", str(recipe), "--steps", "3", "--warmup", "1", "--out", str(out)]
        rc = main([*argv, "--workdir", str(recipe.parent / "run")])
        results[recompute] = (rc, TrialResult.model_validate_json(out.read_text()))
    rc, fits = results[True]
    assert rc == 0 and fits.status == "ok" and fits.score is not None
    rc, oom = results[False]
    assert rc == 4 and oom.status == "oom", oom.error
    assert oom.error is not None and "can't allocate memory" in oom.error
    assert oom.score is None and oom.device_seconds > 0  # charged for the time it held
