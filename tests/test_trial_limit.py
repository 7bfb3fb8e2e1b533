"""A run's wall-clock limit comes from what the run should take (the budget's forecast, else the
step-time model), never below the executor's floor, and never beyond the budget left: a large
recipe's runs (the Llama-3 70B port: about 41 s a step on the simulated cluster) are not
stopped at a fixed 600 s as if they had hung."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import LIMIT_MARGIN, LocalExecutor
from bot.cli import main
from bot.state.fold import fold
from gate.ledger import Ledger
from gate.models import EffectiveConfig, Recipe
from gate.registry import Registry
from runners.harness import PROFILE_EXTRA_STEPS
from tests.events_factory import payload
from tests.executors import local_executor

ROOT = Path(__file__).resolve().parent.parent


def _executor(ledger: Ledger, root: Path, registry: Registry, **kw: Any) -> LocalExecutor:
    options: dict[str, Any] = {"budget_device_seconds": 36_000.0, "timeout_s": 600.0, **kw}
    return local_executor(ledger, root, registry, steps=8, warmup=3, **options)


def _finished(ledger: Ledger, trial: str, wall_s: float, devices: int = 1) -> None:
    ledger.append(
        "run",
        "trial_finished",
        payload(
            "trial_finished",
            trial=trial,
            allocated_at=100.0,
            released_at=100.0 + wall_s,
            devices=devices,
            device_seconds=wall_s * devices,
        ),
    )


def test_the_limit_follows_the_forecast_of_the_run(
    tmp_path: Path,
    small_recipe: Any,
    resolve: Any,
    registry: Registry,
) -> None:
    recipe: Recipe = small_recipe(tmp_path, "r")
    effective: EffectiveConfig = resolve(recipe)
    with Ledger(tmp_path / "ledger.db") as ledger:
        executor = _executor(ledger, tmp_path, registry)
        # nothing finished, no model for a campaign never opened: the floor
        assert executor.predictor.run_seconds(effective) == 0.0
        assert executor.limit_s("t0", 1, expected_s=0.0) == 600.0
        for i, wall in enumerate((440.0, 450.0, 460.0)):
            _finished(ledger, f"baseline-{i + 1}", wall)
        assert executor.predictor.run_seconds(effective) == pytest.approx(450.0)
        # a profiled run takes its extra steps too: 8 steps became 12
        profiled = executor.predictor.run_seconds(effective, profile=True)
        assert profiled == pytest.approx(450.0 * (8 + PROFILE_EXTRA_STEPS) / 8)
        assert executor.limit_s("t1", 1, expected_s=profiled) == pytest.approx(
            LIMIT_MARGIN * profiled
        )
        assert "t1" not in executor.budget_limited  # the forecast set it, not the budget
        # a short run keeps the floor
        assert executor.limit_s("t2", 1, expected_s=10.0) == 600.0


def test_the_budget_left_still_cuts_the_limit(
    tmp_path: Path, small_recipe: Any, resolve: Any, registry: Registry
) -> None:
    effective: EffectiveConfig = resolve(small_recipe(tmp_path, "r"))
    with Ledger(tmp_path / "ledger.db") as ledger:
        executor = _executor(ledger, tmp_path, registry, budget_device_seconds=8 * 1000.0)
        for i in range(3):
            _finished(ledger, f"baseline-{i + 1}", 450.0, devices=8)
        # 8 x 1350 device-seconds spent: 8 x 1000 was the budget, nothing is left
        expected = executor.predictor.run_seconds(effective)
        assert expected == pytest.approx(450.0)
        assert executor.limit_s("c1", 8, expected_s=expected) == 1.0
        assert executor.budget_limited["c1"] == 1.0


@pytest.mark.slow  # a whole simulated campaign on the 70B port: 70 s of CPU
def test_a_70b_recipe_s_runs_past_600_s_run_to_their_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before any run finished, the model's step time sets the limit (a 12-step baseline of
    the 70B port takes about 11 simulated minutes); then the forecast does, and the candidate
    runs to its end too (faster: about 9 simulated minutes). The rules agent needs no profile
    here (the calibrated model names the bottleneck); a profiled run's extra steps are in the
    limit (the first test above)."""
    monkeypatch.setenv("ATTUNE_SIM_SEED", "2026")
    work = tmp_path / "run"
    recipe = ROOT / "benchmarks" / "recipes" / "sim" / "llama3-70b-ported.yaml"
    args = ["tune", str(recipe), "--backend", "sim", "--agent", "rules", "--budget", "200"]
    args += ["--max-trials", "1", "--max-pairs", "0", "--confirm-pairs", "0"]
    assert main([*args, "--workdir", str(work)]) == 0
    with Ledger(work / "ledger.db") as ledger:
        events = ledger.events()
    state = fold(events[0].campaign, events)
    runs = [e.payload for e in events if e.kind == "trial_finished"]
    assert [r["status"] for r in runs] == ["ok"] * len(runs)
    wall = {r["trial"]: r["released_at"] - r["allocated_at"] for r in runs}
    assert all(wall[f"baseline-{i}"] > 600 for i in range(1, 6))  # 12 steps of about 41 s
    assert len(state.candidates) == 1 and "c1" in wall  # the candidate ran, and finished ok
