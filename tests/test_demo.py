"""`attune demo` end to end on the example recipe: a whole campaign whose first candidate runs
out of the device's memory and is charged, then the gate's refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from gate import budget
from gate.events import TrialFinished
from gate.ledger import Ledger

pytestmark = pytest.mark.slow  # real training runs or whole campaigns


def test_demo_runs_a_campaign_and_shows_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "demo"
    args = ["demo", "--workdir", str(workdir), "--steps", "4", "--warmup", "1"]
    # the extra runs of the judgement are tested by test_campaign's campaign; here they are off
    assert main([*args, "--max-trials", "1", "--max-pairs", "0", "--confirm-pairs", "0"]) == 0
    out = capsys.readouterr().out
    assert "noise model: 5 runs" in out
    assert "verdict: reject" in out and "never launched" in out
    assert f"report: {workdir / 'report.md'}" in out
    assert (workdir / "report.md").exists() and (workdir / "report.png").exists()
    # the lesson-backed first move, recompute off, needs more than the recipe's device memory:
    # a real out-of-memory run, charged and shown as such
    assert "charged failure: c1 ended oom after" in out and "can't allocate memory" in out
    assert "failed (oom)" in (workdir / "report.md").read_text()

    with Ledger(workdir / "ledger.db") as ledger:
        assert ledger.verify().ok
        events = ledger.events()
    kinds = [e.kind for e in events]
    assert kinds.count("noise_calibrated") == 1 and "campaign_stopped" in kinds[-2:]
    assert kinds.count("trial_started") == kinds.count("trial_finished")
    finished = [f for f in (e.event for e in events) if isinstance(f, TrialFinished)]
    c1 = next(f for f in finished if f.trial == "c1")
    assert c1.status == "oom" and not c1.interrupted and c1.device_seconds > 0
    assert budget.spent_device_seconds(events) == pytest.approx(
        sum(f.device_seconds for f in finished)
    )  # the failed run is in the spend with every other
    opened = events[0].payload
    assert (opened["max_pairs"], opened["confirm_pairs"]) == (0, 0)

    # a second demo into the same directory refuses, and loses nothing
    before = (workdir / "ledger.db").read_bytes()
    assert main(args) == 2
    assert "already holds a ledger" in capsys.readouterr().err
    assert (workdir / "ledger.db").read_bytes() == before
