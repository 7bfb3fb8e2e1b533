"""The budget forecast of a run scales with its devices AND its predicted step time: the
measured runs' device-seconds per device, times the run's devices, times its predicted step
time over the measured runs' (the step-time model under the campaign's calibration); by
devices alone where there is no prediction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import LocalExecutor
from bot.campaign.recipe_edit import apply_changes
from bot.campaign.setup import open_campaign
from gate.budget import forecast_device_seconds
from gate.ledger import Ledger, LedgerEvent
from gate.models import EffectiveConfig
from gate.recipe import parse_recipe
from gate.registry import load_registry
from runners.adapters import get_adapter
from tests.conftest import ROOT
from tests.events_factory import payload

T0 = 1_700_000_000.0
MEASURED_S = 120.0
"""The measured baseline run's wall-clock seconds (one device)."""


def _finished(seq: int, trial: str, seconds: float, devices: int = 1) -> LedgerEvent:
    return LedgerEvent(
        seq=seq,
        time=T0 + seq,
        campaign="c",
        kind="trial_finished",
        payload=payload(
            "trial_finished",
            trial=trial,
            allocated_at=T0,
            released_at=T0 + seconds,
            devices=devices,
            device_seconds=seconds * devices,
        ),
        prev_hash="0" * 64,
        hash="0" * 64,
    )


def test_the_forecast_scales_by_the_predicted_step_time() -> None:
    runs = [_finished(1, "baseline-1", 100.0, devices=2), _finished(2, "baseline-2", 120.0, 2)]
    step_s = {"baseline-1": 1.0, "baseline-2": 1.2}  # 100 s per device per predicted s
    three_times = forecast_device_seconds(
        runs, default=1.0, devices=4, step_s=step_s, next_step_s=3.3
    )
    assert three_times == pytest.approx(100.0 * 3.3 * 4)
    faster = forecast_device_seconds(runs, default=1.0, devices=4, step_s=step_s, next_step_s=0.5)
    assert faster == pytest.approx(100.0 * 0.5 * 4)


def test_without_a_prediction_the_forecast_scales_by_devices_only() -> None:
    runs = [_finished(1, "baseline-1", 100.0, devices=2), _finished(2, "baseline-2", 120.0, 2)]
    device_only = forecast_device_seconds(runs, default=1.0, devices=4)
    assert device_only == pytest.approx(110.0 * 4)
    # no prediction for the next run, or none for any measured run: devices only
    unknown = forecast_device_seconds(runs, default=1.0, devices=4, step_s={"baseline-1": 1.0})
    assert unknown == device_only
    unmeasured = forecast_device_seconds(
        runs, default=1.0, devices=4, step_s={"other": 1.0}, next_step_s=2.0
    )
    assert unmeasured == device_only
    # only the runs with a prediction set the scale
    one = forecast_device_seconds(
        runs, default=1.0, devices=4, step_s={"baseline-2": 2.0}, next_step_s=1.0
    )
    assert one == pytest.approx(120.0 / 2.0 * 4)
    assert forecast_device_seconds([], default=7.0, devices=4, next_step_s=2.0) == 7.0


def _effective(text: str, **changes: Any) -> EffectiveConfig:
    recipe = parse_recipe(apply_changes(text, changes), path="recipe.yaml")
    return get_adapter("embedded").resolve(recipe)


TUNED = {
    "threads": 2,
    "activation_checkpointing": False,
    "micro_batch_size": 4,
    "attention": "sdpa",
    "optimizer_impl": "fused",
    "compile": True,
}
"""The example's layout, tuned: the incumbent measured here."""
PORTED = {
    "threads": 1,
    "activation_checkpointing": True,
    "micro_batch_size": 1,
    "attention": "math",
    "optimizer_impl": "for_loop",
    "compile": False,
}
"""The example's layout as ported (``examples/ported-gpt.yaml``)."""


def test_a_run_predicted_three_times_slower_is_forecast_three_times_and_refused(
    tmp_path: Path,
) -> None:
    """Through the executor: the tuned incumbent ran (its prediction recorded before launch, as
    every run's is, and its charge measured); the recipe as ported, which the model predicts
    about 3.2x slower, is forecast 3.2x the measured run and refused by a budget that covers
    the measured run's cost but not its own; a run predicted faster is forecast below it."""
    text = apply_changes((ROOT / "examples" / "ported-gpt.yaml").read_text(), TUNED)
    with Ledger(tmp_path / "ledger.db") as ledger:
        open_campaign(ledger, "c", recipe_text=text, recipe_path="recipes/r.yaml", budget_hours=1.0)
        executor = LocalExecutor(
            ledger=ledger,
            campaign="c",
            registry=load_registry("embedded", "1"),
            workdir=tmp_path,
            budget_device_seconds=MEASURED_S + 250.0,
            steps=6,
            warmup=2,
        )
        incumbent = _effective(text)
        executor.predictor.record("baseline-1", incumbent)  # what launch() writes first
        ledger.append(
            "c",
            "trial_finished",
            payload(
                "trial_finished",
                trial="baseline-1",
                fingerprint=incumbent.fingerprint(),
                score=900.0,
                allocated_at=T0,
                released_at=T0 + MEASURED_S,
            ),
        )
        slow, fast = _effective(text, **PORTED), _effective(text, threads=8)
        runs, slow_step = executor.predictor.step_seconds(slow)
        _, fast_step = executor.predictor.step_seconds(fast)
        assert slow_step is not None and fast_step is not None
        ratio = slow_step / runs["baseline-1"]
        assert 2.8 < ratio < 3.6  # the model's, under the campaign's calibration

        assert executor.forecast(incumbent) == pytest.approx(MEASURED_S)
        assert executor.forecast(slow) == pytest.approx(MEASURED_S * ratio)
        # the run's wall-clock limit expects the same: 3 x its forecast per device
        assert executor.predictor.run_seconds(slow) == pytest.approx(
            executor.forecast(slow) / max(slow.devices, 1)
        )
        assert executor.forecast(fast) == pytest.approx(MEASURED_S * fast_step / runs["baseline-1"])
        assert executor.forecast(fast) < MEASURED_S

        # 250 device-s left: enough for another run like the measured one, not for 3.2 of them
        assert executor.admit("c1", incumbent) is None
        refusal = executor.admit("c2", slow)
        assert refusal is not None and refusal.reason == "budget"
        assert f"forecast {MEASURED_S * ratio / 3600:.3f} device-hours" in refusal.message
        refused = [e.payload for e in ledger.events("c") if e.kind == "launch_refused"]
    assert [r["trial"] for r in refused] == ["c2"]
