"""Campaign report: folded from a real ledger, rendered deterministically, tolerant of gaps."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.commands.ledger import ledger_show
from bot.commands.tune_console import summarize
from bot.console import console
from bot.github.service import GitHubCampaigns
from bot.github.settings import Settings
from bot.render import campaign_comment
from bot.report.build import _hypothesis, build_report, render_markdown, write_report
from bot.report.model import Hypothesis
from bot.state.fold import fold
from gate.ledger import EventKind, Ledger, LedgerEvent
from gate.models import ProfileBreakdown
from gate.noise import calibrate
from tests.conftest import ATTUNE
from tests.events_factory import payload

T0 = 1_700_000_000.0
RECIPE_PATH = "examples/ported-gpt.yaml"
BASELINE = """framework: embedded
name: ported-gpt
config:
  n_layer: 4
  d_model: 256
  global_batch_size: 16
  threads: 1
  micro_batch_size: 1
  activation_checkpointing: true
  attention: math
"""
CALIBRATION = [1000.0, 1010.0, 990.0, 1005.0, 995.0]


def _recipe(**changes: str) -> str:
    text = BASELINE
    for key, value in changes.items():
        before = next(line for line in text.splitlines() if line.startswith(f"  {key}:"))
        text = text.replace(before, f"  {key}: {value}")
    return text


class _Campaign:
    """Appends one campaign's events to a real ledger, as the bot would."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger, self.clock, self.finished = ledger, T0, 0.0

    def add(self, kind: EventKind, **over: Any) -> None:
        self.ledger.append("tune-1", kind, payload(kind, **over))

    def run(self, trial: str, role: str, status: str, score: float | None, secs: float) -> None:
        self.add(
            "trial_started",
            trial=trial,
            role=role,
            recipe="ported-gpt",
            devices=1,
            fingerprint=f"fp-{trial}",
            forecast_device_seconds=30.0,
            profile=False,
        )
        self.add("trial_launched", trial=trial, recipe="ported-gpt")
        profile = None
        if role == "profile":
            profile = ProfileBreakdown(
                compute=0.5, communication=0.1, cpu=0.3, idle=0.1, step_seconds=0.2, steps=4
            ).model_dump()
        alloc = self.clock
        self.clock += 100
        self.finished += secs
        self.add(
            "trial_finished",
            trial=trial,
            recipe="ported-gpt",
            fingerprint=f"fp-{trial}",
            status=status,
            score=score,
            step1_loss=10.4,
            error=None,
            allocated_at=alloc,
            released_at=alloc + secs,
            devices=1,
            device_seconds=secs,
            profile=profile,
            reconciled=False,
        )

    def propose(self, n: int, key: str, before: Any, after: Any, recipe: str, pr: int) -> None:
        self.add(
            "candidate_proposed",
            trial=f"c{n}",
            n=n,
            title=f"{key}: {after}",
            lever=[key],
            changes={key: [before, after]},
            coupled=False,
            bottleneck="compute",
            mechanism=f"{key} costs time",
            expected_gain_pct=20,
            sources=[f"src/{key}.py:1"],
            recipe_text=recipe,
        )
        self.add("pr_opened", trial=f"c{n}", pr=pr, branch=f"attune/tune-1/{n}", head_sha="ab")

    def gate(self, n: int, verdict: str, key: str, key_class: str = "layout") -> None:
        finding = {"key": key, "class": key_class, "reason": "r", "source": "-", "derived": False}
        self.add(
            "gate_checked",
            trial=f"c{n}",
            recipe="ported-gpt",
            fingerprint=f"fp-c{n}",
            verdict=verdict,
            findings=[finding],
        )

    def judge(self, n: int, decision: str, score: float | None, gain: float | None) -> None:
        self.add(
            "trial_judged",
            trial=f"c{n}",
            decision=decision,
            reason=f"{decision} it",
            score=score,
            incumbent_score=1000.0,
            gain=gain,
            threshold=0.03,
            post_passed=score is not None,
            post_reasons=[],
        )


@pytest.fixture
def events(tmp_path: Path) -> list[LedgerEvent]:
    """A finished campaign: calibration, a profile and five candidates of every fate."""
    with Ledger(tmp_path / "ledger.db") as ledger:
        c = _Campaign(ledger)
        c.add(
            "campaign_opened",
            baseline="ported-gpt",
            recipe_path=RECIPE_PATH,
            recipe_text=BASELINE,
            framework="embedded",
            budget_device_hours=0.075,
            steps=8,
            warmup=2,
            agent="rules",
            calibration_runs=5,
            max_trials=8,
        )
        c.add("forge_ready", tuned_pr=1, tuned_branch="attune/tune-1", base_sha="00")
        for i, score in enumerate(CALIBRATION, 1):
            c.run(f"baseline-{i}", "calibration", "ok", score, 30.0)
        noise = calibrate(CALIBRATION)
        c.add("noise_calibrated", **noise.model_dump(), scores=CALIBRATION)
        c.add("profile_requested", trial="profile-1", reason="first look", incumbent="baseline")
        c.run("profile-1", "profile", "ok", 980.0, 35.0)
        tuned = _recipe(activation_checkpointing="false")
        c.propose(1, "activation_checkpointing", True, False, tuned, 11)
        c.gate(1, "allow", "activation_checkpointing")
        c.run("c1", "candidate", "ok", 1250.0, 25.0)
        c.judge(1, "merge", 1250.0, 0.25)
        c.add("pr_merged", trial="c1", pr=11, sha="cd")
        c.propose(
            2,
            "attention",
            "math",
            "sdpa",
            _recipe(activation_checkpointing="false", attention="sdpa"),
            12,
        )
        c.gate(2, "allow", "attention")
        c.run("c2", "candidate", "ok", 1260.0, 28.0)
        c.judge(2, "close", 1260.0, 0.008)
        c.add("pr_closed", trial="c2", pr=12)
        c.propose(3, "global_batch_size", 16, 32, tuned.replace("16", "32"), 13)
        c.gate(3, "reject", "global_batch_size", "semantic")
        c.add("pr_closed", trial="c3", pr=13)
        c.propose(4, "micro_batch_size", 1, 16, tuned.replace("size: 1\n", "size: 16\n"), 14)
        c.gate(4, "allow", "micro_batch_size")
        c.run("c4", "candidate", "oom", None, 6.0)
        c.judge(4, "close", None, None)
        c.add("pr_closed", trial="c4", pr=14)
        c.propose(5, "threads", 1, 2, _recipe(activation_checkpointing="false", threads="2"), 15)
        c.gate(5, "allow", "threads")
        c.add(
            "launch_refused",
            trial="c5",
            fingerprint="fp-c5",
            reason="budget",
            message="forecast 0.008 device-hours exceeds the 0.007 left of 0.075",
        )
        c.add("pr_closed", trial="c5", pr=15)
        c.add("campaign_stopped", reason="budget", evidence=["spent 244 s of 270 s", "c5 refused"])
        assert c.finished == 244.0
        return ledger.events("tune-1")


def _row(md: str, trial: str) -> str:
    return next(line for line in md.splitlines() if line.startswith(f"| {trial} |"))


def test_report_folds_every_fate(events: list[LedgerEvent]) -> None:
    report = build_report(events)
    finished = [e.payload["device_seconds"] for e in events if e.kind == "trial_finished"]
    assert report.device_seconds == sum(finished) == 244.0
    assert report.device_hours == pytest.approx(244.0 / 3600)
    assert report.budget_device_hours == 0.075
    assert report.noise is not None and report.noise.runs == 5
    assert report.speedup == pytest.approx(1.25)
    assert [(s.trial, s.score) for s in report.incumbent] == [("baseline", 1000.0), ("c1", 1250.0)]
    assert [c.outcome for c in report.candidates] == [
        "merged",
        "closed",
        "rejected",
        "failed",
        "refused",
    ]
    assert [c.device_seconds for c in report.candidates] == [25.0, 28.0, 0.0, 6.0, 0.0]
    assert [r.role for r in report.runs] == ["calibration"] * 5 + ["profile"]
    assert report.runs[-1].profile is not None and report.runs[-1].profile["compute"] == 0.5
    assert report.order[:6] == [f"baseline-{i}" for i in range(1, 6)] + ["profile-1"]
    assert report.final_trial == "c1"
    assert report.stop_reason == "budget" and len(report.evidence) == 2


def test_markdown_rows_decisions_and_diff(events: list[LedgerEvent]) -> None:
    md = render_markdown(build_report(events))
    assert md.startswith("# attune campaign report: tune-1\n")
    assert "1.25x over baseline" in md and "threshold 3.00%" in md
    assert "threshold = max(3%, 3 x cv) = 3.00%" in md
    c1 = _row(md, "c1")
    assert "| #11 | activation_checkpointing: true -> false |" in c1
    assert "compute: activation_checkpointing costs time, expected +20%" in c1
    # a lesson backing the move is named by id, its whole claim left to the pull request
    backed = Hypothesis(
        bottleneck="compute",
        mechanism="recompute runs every forward twice. Backed by lesson l1 (2 trials): a claim",
        expected_gain_pct=20,
        lessons=["l1"],
    )
    assert _hypothesis(backed) == (
        "compute: recompute runs every forward twice, expected +20% (lessons: l1)"
    )
    assert "1,250" in c1 and "+25.00%" in c1 and "merged: merge it" in c1 and "25.0" in c1
    assert "closed: close it" in _row(md, "c2") and "+0.80%" in _row(md, "c2")
    c3 = _row(md, "c3")
    assert "| reject: global_batch_size (semantic) |" in c3 and "rejected by gate, not run" in c3
    assert c3.endswith("| 0.0 |")
    c4 = _row(md, "c4")
    assert "| allow | oom |" in c4 and "failed (oom): close it" in c4 and c4.endswith("| 6.0 |")
    assert "refused (budget): forecast 0.008 device-hours" in _row(md, "c5")
    assert "| profile-1 | profile | ok | 980 | compute 50%, communication 10%, cpu 30%" in md
    assert "Calibration and profile runs cost 185.0 device-seconds." in md
    assert "--- baseline/examples/ported-gpt.yaml\n+++ tuned/examples/ported-gpt.yaml" in md
    assert "\n-  activation_checkpointing: true\n+  activation_checkpointing: false\n" in md
    assert "attention: sdpa" not in md.split("## Final recipe")[1]
    assert "- total: 244.0 device-seconds = 0.0678 GPU-hours" in md
    assert "- budget: 0.0750 GPU-hours" in md and "- left: 0.0072 GPU-hours" in md
    assert "Reason: budget" in md and "- spent 244 s of 270 s" in md
    assert "- c1: src/activation_checkpointing.py:1" in md
    assert "(report.png)" in md and "/tmp" not in md


def test_write_report_is_byte_identical(events: list[LedgerEvent], tmp_path: Path) -> None:
    first = write_report(events, tmp_path / "a")
    again = write_report(events, tmp_path / "b")
    assert first == tmp_path / "a" / "report.md"
    assert first.read_bytes() == again.read_bytes()
    png = (tmp_path / "a" / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG") and png == (tmp_path / "b" / "report.png").read_bytes()
    assert b"matplotlib" not in png  # no Software metadata


def test_restarted_bot_rebuilds_the_same_report(events: list[LedgerEvent], tmp_path: Path) -> None:
    """``attune report`` in a fresh process, from the ledger file alone, gives the same bytes
    as the report built in this one."""
    write_report(events, tmp_path / "a")
    proc = subprocess.run(
        [*ATTUNE, "report", str(tmp_path)],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("report.md", "report.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / name).read_bytes()


def test_in_progress_campaign_renders(events: list[LedgerEvent], tmp_path: Path) -> None:
    before_noise = next(i for i, e in enumerate(events) if e.kind == "noise_calibrated")
    md = write_report(events[:before_noise], tmp_path / "early").read_text()
    assert "Not calibrated yet." in md and "speedup unknown" in md and "in progress" in md
    assert "No change merged" in md and "Not stopped" in md
    assert "| baseline-5 | calibration | ok | 995 |" in md
    mid = next(
        i for i, e in enumerate(events) if e.kind == "trial_launched" and e.payload["trial"] == "c2"
    )
    md = write_report(events[: mid + 1], tmp_path / "mid").read_text()
    assert "| c2 | #12 |" in md and "pending" in _row(md, "c2")
    assert "1.25x over baseline" in md and "+  activation_checkpointing: false" in md
    assert (tmp_path / "mid" / "report.png").stat().st_size > 0


def test_empty_and_unmerged_campaigns(tmp_path: Path) -> None:
    md = write_report([], tmp_path / "empty").read_text()
    assert md.startswith("# attune campaign report: -") and "No change merged" in md
    assert (tmp_path / "empty" / "report.png").read_bytes().startswith(b"\x89PNG")


def test_nothing_merged_has_speedup_one(events: list[LedgerEvent]) -> None:
    unmerged = [e for e in events if e.kind != "pr_merged"]
    report = build_report(unmerged)
    assert report.speedup == 1.0 and report.final_trial is None and report.recipe_diff == ""
    assert report.candidates[0].outcome == "merge_pending"
    assert "No change merged" in render_markdown(report)


def test_every_surface_prints_the_same_speedup(tmp_path: Path) -> None:
    """The winner was re-measured by a profile run: its score is the mean of its runs, and the
    console, report.md, the plot's line, the campaign comment and /attune status all say so."""
    with Ledger(tmp_path / "ledger.db") as ledger:
        c = _Campaign(ledger)
        c.add("campaign_opened", baseline="ported-gpt", recipe_text=BASELINE)
        c.add("forge_ready", tuned_pr=1, tuned_branch="attune/tune-1", base_sha="00")
        for i, score in enumerate(CALIBRATION, 1):
            c.run(f"baseline-{i}", "calibration", "ok", score, 30.0)
        noise = calibrate(CALIBRATION)
        c.add("noise_calibrated", **noise.model_dump(), scores=CALIBRATION)
        tuned = _recipe(activation_checkpointing="false")
        c.propose(1, "activation_checkpointing", True, False, tuned, 11)
        c.gate(1, "allow", "activation_checkpointing")
        c.run("c1", "candidate", "ok", 1250.0, 25.0)
        c.judge(1, "merge", 1250.0, 0.25)
        c.add("pr_merged", trial="c1", pr=11, sha="cd")
        c.add("profile_requested", trial="profile-1", reason="look again", incumbent="c1")
        c.run("profile-1", "profile", "ok", 1150.0, 30.0)
        c.add("campaign_stopped", reason="exhausted", evidence=["nothing left"])
        events = ledger.events("tune-1")
    state = fold("tune-1", events)
    expected = ((1250.0 + 1150.0) / 2) / noise.mean
    assert state.speedup == pytest.approx(expected)
    shown = f"{expected:.2f}x"
    report = build_report(events)
    assert report.speedup == state.speedup
    assert report.incumbent[-1].score == pytest.approx(1200.0)  # the plot's incumbent line
    assert report.device_seconds == state.spent_device_seconds
    assert shown in render_markdown(report)
    assert shown in campaign_comment(state, budget_h=0.05)
    settings = Settings(
        app_id=1,
        private_key_path=tmp_path / "unused.pem",
        webhook_secret="s",
        ledger_path=tmp_path / "ledger.db",
        state_dir=tmp_path / "state",
    )
    service = GitHubCampaigns(settings, clients=lambda _installation, _repo: None)  # type: ignore[arg-type,return-value]
    assert shown in service.status_text("tune-1", running=False)
    with console.capture() as captured:
        summarize(state, tmp_path / "report.md")
    assert shown in captured.get()
    with console.capture() as captured:
        assert ledger_show(tmp_path / "ledger.db", campaign="tune-1") == 0
    assert shown in captured.get()
    assert f"{state.spent_device_seconds:.1f} device-seconds" in captured.get()
