"""Whole campaigns on the Megatron-LM and torchtitan examples through the simulated cluster
(``--backend sim``): no framework checkout, no launcher, no sleeping; the real resolve, gate,
parsers, memory calibration, judgement, forge, ledger and report, labelled SIMULATED."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.forges.local import LocalForge
from bot.state.fold import fold
from gate.ledger import Ledger, LedgerEvent

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

ROOT = Path(__file__).resolve().parent.parent
SLOW = {"examples/megatron/mixtral-8x7b.yaml", "examples/torchtitan/llama3-8b.yaml"}
"""Campaigns that promote and re-measure candidates: about 20 s each on 2 cores."""
EXAMPLES = [
    pytest.param(name, marks=[pytest.mark.slow] if name in SLOW else [])
    for name in sorted(
        str(p.relative_to(ROOT))
        for folder in ("megatron", "torchtitan")
        for p in (ROOT / "examples" / folder).glob("*.yaml")
    )
]


def _campaign(work: Path) -> tuple[list[LedgerEvent], object]:
    with Ledger(work / "ledger.db") as ledger:
        events = ledger.events()
    return events, fold(events[0].campaign, events)


def _check_simulated(work: Path, seed: int) -> None:
    events, state = _campaign(work)
    opened = events[0].payload
    assert opened["backend"] == "sim" and opened["simulation"]["seed"] == seed
    launched = [e.payload for e in events if e.kind == "trial_launched"]
    assert launched and all(p["handle"]["backend"] == "sim" for p in launched)
    for e in events:
        if e.kind == "trial_finished":
            p = e.payload
            run = json.loads((work / "trials" / p["trial"] / "sim-run.json").read_text())
            # charged like a real run: simulated wall time x devices
            assert p["device_seconds"] == pytest.approx(run["simulated_wall_s"] * run["devices"])
    assert state.spent_device_seconds > 0  # type: ignore[attr-defined]
    # the step-time model predicted every run before it started, and the report scores it
    kinds = [(e.kind, e.payload.get("trial")) for e in events]
    for i, (kind, trial) in enumerate(kinds):
        if kind == "trial_started":
            assert kinds[i - 1] == ("prediction_made", trial)
    assert "## Predicted vs measured" in (work / "report.md").read_text()
    assert "**SIMULATED**" in (work / "report.md").read_text().split("**Outcome:**")[0]


def test_the_llama3_8b_megatron_example_is_tuned_in_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's command: ``attune tune examples/megatron/llama3-8b.yaml --backend sim``."""
    monkeypatch.setenv("ATTUNE_SIM_SEED", "4")
    monkeypatch.delenv("ATTUNE_MEGATRON_PATH", raising=False)
    monkeypatch.delenv("ATTUNE_LAUNCHER", raising=False)
    work = tmp_path / "run"
    began = time.monotonic()
    args = ["tune", str(ROOT / "examples/megatron/llama3-8b.yaml"), "--backend", "sim"]
    assert main([*args, "--budget", "4", "--workdir", str(work)]) == 0
    # nothing sleeps for simulated time: hours of simulated device time take seconds (the
    # under-a-minute figure is measured in docs/sim.md; a wall-clock bound here would be load-bound)
    assert time.monotonic() - began < 600
    assert "SIMULATED" in capsys.readouterr().out
    _check_simulated(work, seed=4)
    _, state = _campaign(work)
    calibration = state.role_trials("calibration")  # type: ignore[attr-defined]
    assert [t.finished.status for t in calibration] == ["ok"] * 5
    # simulated hours: far more device-time than the seconds the test took
    assert state.spent_device_seconds > 3600  # type: ignore[attr-defined]


@pytest.mark.parametrize("recipe", EXAMPLES)
def test_every_gpu_example_runs_a_whole_simulated_campaign(
    recipe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTUNE_SIM_SEED", "2")
    work = tmp_path / "run"
    args = ["tune", str(ROOT / recipe), "--backend", "sim", "--budget", "500"]
    args += ["--steps", "6", "--warmup", "3", "--max-pairs", "3", "--confirm-pairs", "1"]
    assert main([*args, "--max-trials", "4", "--workdir", str(work)]) == 0
    _check_simulated(work, seed=2)
    _, state = _campaign(work)
    assert state.stopped is not None  # type: ignore[attr-defined]
    with LocalForge(work / "forge", create=False) as forge:
        for c in state.candidates:  # type: ignore[attr-defined]
            if c.pr:
                assert "**SIMULATED**" in forge.get(c.pr).body


def test_a_resumed_simulated_campaign_keeps_its_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed is the campaign's, from its ledger: a resume with other ATTUNE_SIM_* runs on
    the same simulated cluster."""
    monkeypatch.setenv("ATTUNE_SIM_SEED", "9")
    work = tmp_path / "run"
    recipe = str(ROOT / "examples/torchtitan/llama3-70b.yaml")
    args = ["tune", recipe, "--backend", "sim", "--budget", "500", "--steps", "6"]
    assert main([*args, "--warmup", "3", "--max-trials", "1", "--workdir", str(work)]) == 0
    monkeypatch.setenv("ATTUNE_SIM_SEED", "1")
    assert main(["tune", "--resume", str(work)]) == 0
    for run in (work / "trials").glob("*/sim-run.json"):
        assert json.loads(run.read_text())["params"]["seed"] == 9
