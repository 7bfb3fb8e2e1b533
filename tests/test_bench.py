"""``attune bench`` end to end: real training subprocesses, the TrialResult JSON it writes, how
failed, OOM and hung runs are classified and cleaned up, profiles, and bad input."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from gate.models import TrialResult
from gate.recipe import load_recipe
from runners.adapters import get_adapter

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

RecipeWriter = Callable[..., Path]


def bench_cli(recipe: Path, *args: str) -> tuple[int, TrialResult | None, Path]:
    """Run ``attune bench`` in-process, working in ``<recipe dir>/<name>-run``; the result is
    read back from the --out JSON."""
    workdir = recipe.parent / f"{recipe.stem}-run"
    out = recipe.parent / f"{recipe.stem}-result.json"
    rc = main(["bench", str(recipe), *args, "--workdir", str(workdir), "--out", str(out)])
    result = TrialResult.model_validate_json(out.read_text()) if out.exists() else None
    return rc, result, workdir


def recompute_score(result: TrialResult) -> float:
    scored = [s for s in result.steps if s.step > result.warmup]
    return sum(s.tokens for s in scored) / sum(s.step_seconds for s in scored) / result.devices


def test_bench_writes_the_trial_result(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write_recipe: RecipeWriter,
    small_config: dict[str, Any],
) -> None:
    monkeypatch.chdir(tmp_path)  # the default workdir is relative: runs/bench/<name>
    recipe = write_recipe(tmp_path, "tiny", **small_config)
    started = time.time()
    rc = main(["bench", str(recipe), "--steps", "5", "--warmup", "2", "--out", "result.json"])
    finished = time.time()
    assert rc == 0

    raw = json.loads((tmp_path / "result.json").read_text())
    result = TrialResult.model_validate(raw)
    assert result.status == "ok" and result.error is None
    assert result.recipe == "tiny"
    expected = get_adapter("embedded").resolve(load_recipe(recipe)).fingerprint()
    assert result.fingerprint == expected
    assert [s.step for s in result.steps] == [1, 2, 3, 4, 5]
    assert all(s.tokens == 8 * 32 for s in result.steps)
    assert all(s.step_seconds > 0 and s.finite() for s in result.steps)
    assert result.warmup == 2
    assert result.step1_loss == result.steps[0].loss
    assert result.has_nonfinite is False
    assert result.devices == 1
    assert result.score is not None
    assert result.score == pytest.approx(recompute_score(result), rel=1e-9)
    # warm-up really is excluded: the first step (allocator, caches) is not in the score
    with_warmup = sum(s.tokens for s in result.steps) / sum(s.step_seconds for s in result.steps)
    assert result.score != pytest.approx(with_warmup, rel=1e-12)
    # the charge window holds the whole run, and nothing outside this call
    assert started <= result.allocated_at < result.released_at <= finished
    assert result.released_at - result.allocated_at >= sum(s.step_seconds for s in result.steps)
    assert result.device_seconds == pytest.approx(result.released_at - result.allocated_at)
    workdir = tmp_path / "runs" / "bench" / "tiny"
    assert len((workdir / "stdout.jsonl").read_text().splitlines()) == 5


def test_crash_is_failed_with_the_traceback(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    write_recipe: RecipeWriter,
    small_config: dict[str, Any],
) -> None:
    monkeypatch.setenv("ATTUNE_FAULT", "crash_at_step=2")
    recipe = write_recipe(tmp_path, "crash", **small_config)
    rc, result, _ = bench_cli(recipe, "--steps", "4", "--warmup", "1")
    assert rc == 4  # a run that did not finish is not bad input
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "crash.yaml: workload failed: RuntimeError: injected crash" in err[0]
    assert result is not None
    assert result.status == "failed"
    assert result.error is not None
    assert "RuntimeError: injected crash (ATTUNE_FAULT)" in result.error
    assert [s.step for s in result.steps] == [1]
    assert result.score is None
    assert result.released_at > result.allocated_at  # failed runs are charged too


def test_oom_is_classified_as_oom(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write_recipe: RecipeWriter,
    small_config: dict[str, Any],
) -> None:
    monkeypatch.setenv("ATTUNE_FAULT", "oom_at_step=2")
    recipe = write_recipe(tmp_path, "oom", **small_config)
    rc, result, _ = bench_cli(recipe, "--steps", "3", "--warmup", "1")
    assert rc == 4
    assert result is not None
    assert result.status == "oom", result.error
    assert result.error is not None and "allocate" in result.error
    assert result.score is None
    assert result.released_at > result.allocated_at


def _processes_with(marker: str) -> dict[int, tuple[int, str]]:
    """pid -> (process group, state) of live processes whose command line mentions ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        if any(marker.encode() in arg for arg in cmdline):
            fields = stat.rsplit(")", 1)[1].split()
            found[int(entry.name)] = (int(fields[2]), fields[0])
    return found


def _alive_in_group(pgid: int) -> list[int]:
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(entry.name))
    return alive


def test_hang_is_killed_at_the_timeout_with_every_rank(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    write_recipe: RecipeWriter,
    small_config: dict[str, Any],
) -> None:
    monkeypatch.setenv("ATTUNE_FAULT", "hang_at_step=2")
    recipe = write_recipe(tmp_path, "hang", **{**small_config, "data_parallel_size": 2})
    workdir = tmp_path / "hang-run"  # where bench_cli runs it
    args = ["--steps", "4", "--warmup", "1", "--timeout", "8"]
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(ret=bench_cli(recipe, *args)))
    started = time.time()
    thread.start()

    # while it hangs: the launcher and both ranks are running (torchrun gives each rank a
    # session of its own, so killing the launcher's process group alone would orphan them)
    seen: dict[int, tuple[int, str]] = {}
    deadline = time.time() + 7
    while time.time() < deadline and len(seen) < 3:
        seen.update(_processes_with(str(workdir)))
        time.sleep(0.2)
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len(seen) >= 3, seen  # torchrun + 2 ranks
    groups = {pgid for pgid, _ in seen.values()}
    assert os.getpgrp() not in groups  # the launch is in a session of its own, not ours

    rc, result, _ = box["ret"]
    assert rc == 4
    assert result is not None
    assert result.status == "timeout"
    assert result.devices == 2
    assert result.score is None
    # the charge covers the whole wait, and release is after the kill, not much later
    assert result.allocated_at >= started
    assert 8.0 <= result.released_at - result.allocated_at < 30.0
    assert result.device_seconds >= 16.0
    # nothing of the run survives it
    assert _processes_with(str(workdir)) == {}
    assert [pid for pgid in groups for pid in _alive_in_group(pgid)] == []


def test_profile_splits_the_step(
    tmp_path: Path, write_recipe: RecipeWriter, small_config: dict[str, Any]
) -> None:
    single = write_recipe(tmp_path, "single", **small_config)
    rc, result, _ = bench_cli(single, "--steps", "3", "--warmup", "1", "--profile")
    assert rc == 0
    assert result is not None and result.profile is not None
    p = result.profile
    assert p.compute + p.communication + p.cpu + p.idle == pytest.approx(1.0, abs=1e-9)
    assert p.compute > 0
    assert p.communication == 0.0  # one process: nothing to all-reduce
    assert p.steps >= 1 and p.step_seconds > 0
    assert p.trace_path is not None and Path(p.trace_path).exists()
    assert [s.step for s in result.steps] == [1, 2, 3]  # profiled steps are not scored

    dp = write_recipe(tmp_path, "dp2", **{**small_config, "data_parallel_size": 2})
    rc, result, _ = bench_cli(dp, "--steps", "3", "--warmup", "1", "--profile")
    assert rc == 0
    assert result is not None and result.profile is not None
    p = result.profile
    assert p.compute + p.communication + p.cpu + p.idle == pytest.approx(1.0, abs=1e-9)
    assert p.compute > 0
    assert p.communication > 0
    assert result.devices == 2
    assert result.score == pytest.approx(recompute_score(result), rel=1e-9)


BAD_INPUTS = [
    pytest.param("framework: embedded\nconfig: [1, 2\n", "malformed YAML", id="malformed-yaml"),
    pytest.param("framework: megatron-xl\nconfig: {}\n", "framework", id="unknown-framework"),
    pytest.param("framework: embedded\nconfig:\n  microbatch: 2\n", "config.microbatch", id="key"),
    pytest.param(
        "framework: embedded\nconfig:\n  global_batch_size: 8\n  micro_batch_size: 3\n",
        "config.micro_batch_size",
        id="micro-batch-not-dividing",
    ),
    pytest.param("framework: embedded\nconfig:\n  threads: 0\n", "config.threads", id="threads-0"),
    pytest.param(
        "framework: embedded\nenv:\n  OMP_NUM_THREADS: many\n",
        "env.OMP_NUM_THREADS",
        id="bad-env",
    ),
    pytest.param(None, "cannot read recipe", id="missing-file"),
]


@pytest.mark.parametrize(("text", "names"), BAD_INPUTS)
def test_bad_input_is_one_line_naming_file_and_key(
    text: str | None,
    names: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "recipes" / "bad-recipe.yaml"
    if text is not None:
        recipe.parent.mkdir()
        recipe.write_text(text)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    rc = main(["bench", str(recipe), "--steps", "3", "--warmup", "1", "--out", "out.json"])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("attune: error: ")
    assert str(recipe) in lines[0]
    assert names in lines[0]
    assert "Traceback" not in err
    # nothing was launched or written: no result, no run directory, no ledger
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
