"""Resources and budget bound what launches: a run the machine cannot hold is refused before
launch, the forecast scales with a candidate's devices, and a run cannot spend more than the
budget has left."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.campaign.candidates import REFUSED_IN_A_ROW, propose
from bot.campaign.executor import LocalExecutor
from bot.campaign.setup import build_campaign
from bot.cli import main
from bot.commands.tune import open_new
from bot.forges.local import LocalForge
from bot.interfaces import Proposal
from gate.budget import forecast_device_seconds
from gate.ledger import Ledger
from gate.models import EffectiveConfig, Recipe
from gate.prelaunch import Machine, resource_problem
from gate.registry import Registry
from runners.bench import resource_refusal, this_machine
from tests.conftest import SMALL_CONFIG
from tests.events_factory import payload
from tests.executors import local_executor

MakeRecipe = Callable[..., Recipe]
Resolve = Callable[[Recipe], EffectiveConfig]
CORES = len(os.sched_getaffinity(0))


def _recipe(directory: Path, **config: Any) -> Path:
    path = directory / "big.yaml"
    body = {"framework": "embedded", "name": "big", "config": {**SMALL_CONFIG, **config}}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def _bench(tmp_path: Path, capsys: pytest.CaptureFixture[str], **config: Any) -> str:
    workdir = tmp_path / "w"
    code = main(["bench", str(_recipe(tmp_path, **config)), "--workdir", str(workdir)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert not (workdir / "launch.log").exists()  # nothing was launched
    return err[-1]


def test_absurd_threads_refused_by_validation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _bench(tmp_path, capsys, threads=10**9)
    assert "config.threads: input should be less than or equal to 1024" in line


def test_absurd_threads_rejected_by_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _recipe(tmp_path)
    (tmp_path / "c").mkdir()
    candidate = _recipe(tmp_path / "c", threads=10**9)
    assert main(["gate", "check", str(base), str(candidate)]) == 1
    assert "reject" in capsys.readouterr().out


def test_threads_times_ranks_beyond_the_cores_refused_before_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _bench(tmp_path, capsys, threads=CORES, data_parallel_size=2)
    assert f"needs 2 ranks x {CORES} thread{'s' if CORES > 1 else ''} = {2 * CORES} cores" in line
    assert f"this machine has {CORES}; refused before launch" in line


def test_batch_beyond_memory_refused_before_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _bench(tmp_path, capsys, micro_batch_size=2**24, global_batch_size=2**24)
    assert "too big for this machine: needs about" in line
    assert "GiB of memory" in line


def test_the_example_fits() -> None:
    """The bound is generous: what the demo runs is far inside it."""
    from gate.recipe import load_recipe
    from runners.adapters import get_adapter

    recipe = load_recipe(Path(__file__).resolve().parent.parent / "examples" / "ported-gpt.yaml")
    effective = get_adapter("embedded").resolve(recipe)
    assert resource_refusal(effective, None, Machine(cores=2, memory_bytes=2**30)) is None


def test_resource_problem_is_pure_arithmetic() -> None:
    machine = Machine(cores=2, memory_bytes=8 * 2**30)
    assert (
        resource_problem(ranks=2, cores_per_rank=1, bytes_per_rank=2**30, machine=machine) is None
    )
    assert "= 8 cores" in str(
        resource_problem(ranks=8, cores_per_rank=1, bytes_per_rank=None, machine=machine)
    )
    assert "GiB of memory" in str(
        resource_problem(ranks=2, cores_per_rank=1, bytes_per_rank=5 * 2**30, machine=machine)
    )
    assert this_machine().cores == CORES


def _executor(ledger: Ledger, root: Path, registry: Registry, **kw: Any) -> LocalExecutor:
    options: dict[str, Any] = {"budget_device_seconds": 3600.0, "timeout_s": 120.0, **kw}
    return local_executor(ledger, root, registry, steps=3, warmup=1, **options)


def test_a_candidate_beyond_the_machine_is_refused_and_charged_nothing(
    tmp_path: Path, small_recipe: MakeRecipe, resolve: Resolve, registry: Registry
) -> None:
    """8 data-parallel ranks on a machine with fewer cores: refused before launch, with the
    refusal in the ledger and nothing started or charged."""
    ranks = max(8, CORES + 1)
    effective = resolve(small_recipe(tmp_path, "wide", data_parallel_size=ranks, threads=1))
    with Ledger(tmp_path / "ledger.db") as ledger:
        executor = _executor(ledger, tmp_path, registry)
        refusal = executor.admit("c1", effective)
        assert refusal is not None and refusal.reason == "resources"
        assert f"needs {ranks} ranks x 1 thread =" in refusal.message
        kinds = [e.kind for e in ledger.events("run")]
        assert kinds == ["launch_refused"]
        assert ledger.events("run")[0].payload["reason"] == "resources"


def test_forecast_scales_with_the_candidates_devices(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        for trial in ("baseline-1", "baseline-2", "baseline-3"):
            ledger.append(
                "run",
                "trial_finished",
                payload(
                    "trial_finished",
                    trial=trial,
                    allocated_at=100.0,
                    released_at=110.0,
                    devices=1,
                    device_seconds=10.0,
                ),
            )
        events = ledger.events("run")
    assert forecast_device_seconds(events, default=60.0, devices=1) == 10.0
    assert forecast_device_seconds(events, default=60.0, devices=8) == 80.0


def test_a_run_cannot_spend_more_than_the_budget_left(
    tmp_path: Path, small_recipe: MakeRecipe, resolve: Resolve, registry: Registry
) -> None:
    """With 4 device-seconds left, a run that would take minutes is stopped at the limit,
    charged about the budget (never far beyond it), and not counted as a failed recipe."""
    recipe = small_recipe(tmp_path, "long")
    effective = resolve(recipe)
    with Ledger(tmp_path / "ledger.db") as ledger:
        executor = _executor(ledger, tmp_path, registry, budget_device_seconds=4.0)
        executor.steps = 100_000
        assert executor.limit_s("t1", effective.devices) == 4.0
        launch = executor.launch("t1", "calibration", recipe, effective)
        result = executor.finish("t1", launch)
        assert result.status == "timeout" and result.interrupted
        assert "stopped at the budget's limit (4 s)" in (result.error or "")
        assert result.device_seconds <= 4.0 + 3.0  # the limit, plus tearing the run down
        finished = [e for e in ledger.events("run") if e.kind == "trial_finished"]
        assert finished[0].payload["interrupted"] is True


def _proposal(ranks: int) -> Proposal:
    return Proposal(
        lever=["data_parallel_size"],
        changes={"data_parallel_size": (1, ranks)},
        bottleneck="compute",
        mechanism="more ranks share the step's work",
        expected_gain_pct=50.0,
        sources=["runners/embedded/config.py:1"],
    )


def test_a_refused_proposal_takes_no_candidate_id(tmp_path: Path) -> None:
    """8 (or more than the cores) data-parallel ranks: recorded as ``proposal_refused``, no
    candidate id, no pull request; the next proposal that fits is c1. Refused proposals in a
    row stop the campaign instead of looping."""
    recipe = _recipe(tmp_path, threads=1)
    workdir = tmp_path / "run"
    open_new(
        workdir,
        recipe_path=recipe,
        budget_hours=1.0,
        agent="rules",
        steps=4,
        warmup=1,
        max_trials=3,
        calibration_runs=5,
    )
    ranks = max(8, CORES + 1)
    with Ledger(workdir / "ledger.db") as ledger, LocalForge(workdir / "forge") as forge:
        name = ledger.campaigns()[0]

        def executor(registry: Registry, params: Any) -> LocalExecutor:
            return _executor(ledger, workdir, registry)

        campaign = build_campaign(ledger, name, forge=forge, executor=executor)
        assert propose(campaign.ctx, campaign.state(), _proposal(ranks)) is False
        state = campaign.state()
        assert state.candidates == [] and len(state.refused_proposals) == 1
        refused = state.refused_proposals[0]
        assert refused.reason == "resources"
        assert f"needs {ranks} ranks x 1 thread =" in refused.message
        assert refused.fingerprint in state.tried  # the agent does not propose it again
        assert forge.pulls() == []

        assert propose(campaign.ctx, campaign.state(), _proposal(2 if CORES >= 2 else 1)) is True
        assert [t.trial for t in campaign.state().candidates] == ["c1"]

        for _ in range(REFUSED_IN_A_ROW):
            propose(campaign.ctx, campaign.state(), _proposal(ranks))
        state = campaign.state()
        assert [t.trial for t in state.candidates] == ["c1"]
        assert state.stopped is not None and state.stopped.reason == "exhausted"
        kinds = [e.kind for e in ledger.events(name)]
        assert "launch_refused" not in kinds and "trial_started" not in kinds
