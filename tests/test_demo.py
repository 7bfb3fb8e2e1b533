"""`attune demo` end to end on the example recipe: calibrate, gate, bench, ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from gate.ledger import Ledger


def test_demo_calibrates_gates_and_charges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--steps", "4", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "noise model: 5 runs" in out
    assert "verdict: allow" in out and "post-launch gate: passed" in out
    assert "verdict: reject" in out and "not launched" in out
    assert "GPU-hours" in out and "hash chain: intact" in out

    with Ledger(workdir / "ledger.db") as ledger:
        assert ledger.verify().ok
        events = ledger.events()
    kinds = [e.kind for e in events]
    assert kinds.count("trial_finished") == 6
    assert kinds.count("noise_calibrated") == 1
    assert all(e.payload["status"] == "ok" for e in events if e.kind == "trial_finished")
    # the semantic candidate was judged and never launched: the ledger proves it
    rejected = {
        e.payload["trial"]
        for e in events
        if e.kind == "gate_checked" and e.payload["verdict"] == "reject"
    }
    assert rejected == {"ported-gpt-grad-reduce-bf16"}
    launched = {e.payload["trial"] for e in events if e.kind == "trial_started"}
    assert not rejected & launched

    # a second demo into the same directory refuses, and loses nothing
    before = (workdir / "ledger.db").read_bytes()
    assert main(["demo", "--workdir", str(workdir)]) == 2
    assert "already holds a ledger" in capsys.readouterr().err
    assert (workdir / "ledger.db").read_bytes() == before
