"""The sharper judgement inside a campaign: a gain in the zone re-measured A/B then decided, a
clear gain merged once one interleaved pair confirms it, the pair cap, the noise recalibrated
after a merge that moved threads, the final confirmation with its interval, and a campaign
killed in the middle of a re-measurement resumed without losing or repeating a run.

The campaign, the executor, the ledger, the forge, the launch checks and the metric parsing are
the real ones; two TEST DOUBLES stand in for what would make the scores random: a backend whose
runs print step lines at scripted speeds (no process), and an agent that proposes a fixed list.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import campaign_executor
from bot.campaign.loop import Campaign
from bot.campaign.setup import build_campaign
from bot.cli import main
from bot.commands.tune import open_new
from bot.forges.local import LocalForge
from bot.interfaces import AgentView, ProbeOf, ProfileRequest, Proposal, Stop
from bot.report.build import build_report, render_markdown
from bot.state.fold import fold
from bot.state.model import CampaignState
from gate import sequential
from gate.ledger import Ledger, LedgerEvent
from runners.adapter import LaunchSpec
from runners.local import RunHandle, RunOutcome
from tests.conftest import SMALL_CONFIG

Speed = Callable[[str], float]
"""trial id -> tokens/s of its run."""


class Killed(BaseException):
    """The bot dies here (a BaseException: nothing in the campaign catches it)."""


class ScriptedBackend:
    """TEST DOUBLE of a backend: a run 'takes' 2 s and logs 4 steps at the speed the test
    scripts for its trial id; ``kill_at`` names a trial whose start kills the bot."""

    name = "local"

    def __init__(self, speed: Speed, kill_at: str | None = None, fail: str = "") -> None:
        self.speed, self.kill_at, self.fail = speed, kill_at, fail

    def start(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunHandle:
        trial = workdir.name
        if trial == self.kill_at:
            raise Killed(trial)
        workdir.mkdir(parents=True, exist_ok=True)
        tokens, speed = 256, self.speed(trial)
        lines = [
            json.dumps(
                {
                    "step": step,
                    "loss": 5.0 - 0.1 * step,
                    "grad_norm": 1.0,
                    "tokens": tokens,
                    "step_seconds": tokens / speed,
                    "peak_memory_bytes": 1 << 20,
                }
            )
            for step in range(1, 5)
        ]
        if trial == self.fail:  # it crashes before its first step
            lines = []
        (workdir / "stdout.log").write_text("\n".join(lines) + "\n")
        (workdir / "stderr.log").write_text("")
        return RunHandle(backend=self.name, pid=0, workdir=str(workdir), allocated_at=time.time())

    def wait(self, handle: RunHandle) -> RunOutcome:
        return RunOutcome(
            returncode=1 if Path(handle.workdir).name == self.fail else 0,
            timed_out=False,
            allocated_at=handle.allocated_at,
            released_at=handle.allocated_at + 2.0,
            stdout_path=str(Path(handle.workdir) / "stdout.log"),
            log_path=str(Path(handle.workdir) / "stderr.log"),
        )


class ListAgentDouble:
    """TEST DOUBLE of an agent: proposes ``moves`` in order, then stops."""

    name = "list"

    def __init__(self, moves: list[dict[str, tuple[Any, Any]]]) -> None:
        self.moves = moves

    def decide(
        self, view: AgentView, probe_of: ProbeOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        done = len(view.history)
        if done >= len(self.moves):
            return Stop(reason="exhausted", evidence=["the list is done"])
        changes = self.moves[done]
        return Proposal(
            lever=list(changes),
            changes=changes,
            bottleneck="compute",
            mechanism="scripted",
            expected_gain_pct=5.0,
            sources=["runners/embedded/config.py:1"],
        )


JITTER = [0.0, 0.004, -0.004, 0.002, -0.002, 0.001, -0.001]


def jitter(trial: str) -> float:
    """A small deterministic spread per run (0.4% at most), so standard errors are not 0."""
    return 1.0 + JITTER[sum(map(ord, trial)) % len(JITTER)]


class KillingProgressDouble:
    """TEST DOUBLE of the progress display: kills the bot right after ``run_requested`` of
    ``run`` reached the ledger, before the run starts."""

    def __init__(self, run: str) -> None:
        self.run = run

    def update(self, state: CampaignState, phase: str, detail: str = "") -> None:
        if detail.startswith(f"{self.run}:"):
            raise Killed(self.run)


def campaign(
    workdir: Path,
    moves: list[dict[str, tuple[Any, Any]]],
    speed: Speed,
    *,
    kill_at: str = "",
    progress: KillingProgressDouble | None = None,
    fail: str = "",
) -> Campaign:
    ledger = Ledger(workdir / "ledger.db")
    forge = LocalForge(workdir / "forge")
    name = ledger.campaigns()[0]

    executor = campaign_executor(
        ledger, name, workdir, backend=ScriptedBackend(speed, kill_at or None, fail)
    )

    return build_campaign(
        ledger,
        name,
        forge=forge,
        executor=executor,
        agent=ListAgentDouble(moves),
        progress=progress,
    )


def open_small(tmp: Path, write_recipe: Any, *, budget_hours: float = 1.0) -> Path:
    levers = {"attention": "math", "optimizer_impl": "for_loop", "activation_checkpointing": True}
    recipe = write_recipe(tmp, "small", **{**SMALL_CONFIG, **levers})
    workdir = tmp / "campaign"
    open_new(
        workdir,
        recipe_path=recipe,
        budget_hours=budget_hours,
        agent="rules",
        steps=4,
        warmup=1,
        max_trials=5,
        calibration_runs=5,
        lessons=False,
    )
    return workdir


def speeds(table: dict[str, float]) -> Speed:
    """Speed by trial-id prefix (longest first), times the run's jitter."""

    def speed(trial: str) -> float:
        prefix = max((p for p in table if trial.startswith(p)), key=len, default="")
        return table.get(prefix, 1000.0) * jitter(trial)

    return speed


def of(events: list[LedgerEvent], kind: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e.payload
        for e in events
        if e.kind == kind and all(e.payload.get(k) == v for k, v in match.items())
    ]


# c1 (threads 1 -> 2) lands at +2% on its first run, then its A/B pairs show +6%: merged after
# 3 pairs; threads changed the variance, so c1's noise is recalibrated from its 4 runs and one
# more; c2 (micro-batch 2) is +30% on its one run, beyond the bar, and one interleaved pair
# confirms it: merged; c3 (attention sdpa) lands in the zone
# and its pairs wander between +1% and +6%: closed at the cap. The campaign ends: c2 confirmed
# against the baseline.
MOVES: list[dict[str, tuple[Any, Any]]] = [
    {"threads": (1, 2)},
    {"micro_batch_size": (1, 2)},
    {"attention": ("math", "sdpa")},
]
C3_PAIRS = [0.06, 0.01, 0.05, 0.02, 0.06, 0.01]
"""c3's B runs over its A runs: +3.5% on average, too unsteady to beat k x se, too high to be
ruled out early: the cap closes it."""
SPEEDS = {
    "baseline": 1000.0,
    "c1": 1020.0,
    "c1-a": 1000.0,
    "c1-b": 1060.0,
    "recal-c1": 1060.0,
    "c2": 1060.0 * 1.3,
    "c2-a": 1060.0,
    "c2-b": 1060.0 * 1.3,
    "c3": 1060.0 * 1.3 * 1.02,
    "c3-a": 1060.0 * 1.3,
    **{f"c3-b{k}": 1060.0 * 1.3 * (1 + d) for k, d in enumerate(C3_PAIRS, 1)},
    "confirm-c2-a": 1000.0,
    "confirm-c2-b": 1060.0 * 1.3,
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, write_recipe: Any) -> list[LedgerEvent]:
    workdir = open_small(tmp_path_factory.mktemp("seq"), write_recipe)
    state = campaign(workdir, MOVES, speeds(SPEEDS)).run()
    assert state.stopped is not None and state.stopped.reason == "exhausted"
    with Ledger(workdir / "ledger.db") as ledger:
        return ledger.events()


def test_a_gain_in_the_zone_is_re_measured_a_b_then_merged(finished: list[LedgerEvent]) -> None:
    [judged] = of(finished, "trial_judged", trial="c1")
    assert judged["decision"] == "merge" and judged["pairs"] == sequential.MIN_PAIRS
    assert judged["gain"] == pytest.approx(0.02, abs=0.006) and judged["gain"] < judged["bar"]
    assert judged["paired_mean"] == pytest.approx(0.06, abs=0.01)
    requested = of(finished, "run_requested", of="c1", phase="remeasure")
    assert [r["trial"] for r in requested] == ["c1-a1", "c1-b1", "c1-a2", "c1-b2", "c1-a3", "c1-b3"]
    assert [r["recipe_of"] for r in requested] == ["baseline", "c1"] * 3
    # each extra run is a real, charged launch with the phase as its role
    for r in requested:
        [started] = of(finished, "trial_started", trial=r["trial"])
        [done] = of(finished, "trial_finished", trial=r["trial"])
        assert started["role"] == "remeasure" and done["device_seconds"] == pytest.approx(2.0)
    kinds = [(e.kind, e.payload.get("trial")) for e in finished]
    assert kinds.index(("run_requested", "c1-a1")) < kinds.index(("trial_started", "c1-a1"))


def test_a_gain_well_beyond_the_bar_merges_once_one_interleaved_pair_confirms_it(
    finished: list[LedgerEvent],
) -> None:
    [judged] = of(finished, "trial_judged", trial="c2")
    assert judged["decision"] == "merge" and judged["pairs"] == 1
    assert judged["gain"] > judged["bar"] and judged["paired_mean"] > judged["bar"]
    assert "beats the one-run bar" in judged["reason"] and "again" in judged["reason"]
    runs = of(finished, "run_requested", of="c2", phase="remeasure")
    assert [r["recipe_of"] for r in runs] == ["c1", "c2"]


def test_an_unclear_candidate_stops_at_the_pair_cap(finished: list[LedgerEvent]) -> None:
    [judged] = of(finished, "trial_judged", trial="c3")
    assert judged["decision"] == "close"
    assert f"within the {sequential.MAX_PAIRS}-pair cap" in judged["reason"]
    assert judged["pairs"] == sequential.MAX_PAIRS
    assert judged["paired_mean"] == pytest.approx(0.035, abs=0.005)
    assert judged["paired_mean"] < judged["bar"]
    runs = of(finished, "run_requested", of="c3", phase="remeasure")
    assert len(runs) == 2 * sequential.MAX_PAIRS
    assert [r["recipe_of"] for r in runs[:2]] == ["c2", "c3"]  # A is the incumbent: c2 now


def test_the_noise_is_recalibrated_after_a_merge_that_moved_threads(
    finished: list[LedgerEvent],
) -> None:
    [recal] = of(finished, "noise_recalibrated")
    assert recal["incumbent"] == "c1" and recal["keys"] == ["threads"]
    # its own runs are reused: the first run and its three B runs, plus one extra
    assert recal["trials"] == ["c1", "c1-b1", "c1-b2", "c1-b3", "recal-c1-1"]
    assert [r["trial"] for r in of(finished, "run_requested", phase="recalibration")] == [
        "recal-c1-1"
    ]
    assert recal["runs"] == 5 and recal["mean"] == pytest.approx(sum(recal["scores"]) / 5)
    # micro-batch does not change the variance: no recalibration after c2
    assert not [r for r in of(finished, "noise_recalibrated") if r["incumbent"] == "c2"]


def test_the_winner_is_confirmed_against_the_baseline_with_an_interval(
    finished: list[LedgerEvent],
) -> None:
    [asked] = of(finished, "confirmation_requested")
    assert asked["winner"] == "c2" and asked["reason"] == "exhausted"
    [confirmed] = of(finished, "confirmation_finished")
    assert confirmed["pairs"] == sequential.CONFIRM_PAIRS
    assert confirmed["trials"] == [
        f"confirm-c2-{arm}{k}" for k in range(1, 4) for arm in ("a", "b")
    ]
    low, high = confirmed["low"], confirmed["high"]
    assert low < confirmed["speedup"] < high and low < 1.378 < high
    kinds = [e.kind for e in finished]
    assert kinds.index("confirmation_finished") + 1 == kinds.index("campaign_stopped")
    roles = Counter(p["role"] for p in of(finished, "trial_started"))
    assert roles["confirmation"] == 6 and roles["remeasure"] == 6 + 2 + len(
        of(finished, "run_requested", of="c3")
    )


def test_the_report_and_the_ledger_show_the_confirmation(
    finished: list[LedgerEvent], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = build_report(finished)
    assert report.confirmation is not None and report.confirmation.pairs == 3
    text = render_markdown(report)
    interval = report.confirmation
    assert f"winner c2 confirmed against the baseline: {interval.speedup:.3f}x" in text
    assert f"(95% CI {interval.low:.3f}x to {interval.high:.3f}x) over 3 interleaved" in text
    assert "- c1: re-measured over 3 pairs, +5." in text and "- c3: re-measured over 6" in text
    assert "- noise recalibrated for c1 (threads changed)" in text
    assert "re-measured A/B, at most 6 pairs" in text  # the campaign's cap
    with Ledger(tmp_path / "copy.db") as copy:  # `attune ledger show` on the same events
        for e in finished:
            copy.append(e.campaign, e.kind, e.payload)
    assert main(["ledger", "show", "--ledger", str(tmp_path / "copy.db")]) == 0
    assert "over 3 interleaved pairs" in capsys.readouterr().out


def test_a_campaign_killed_mid_re_measurement_resumes_it(
    tmp_path: Path, write_recipe: Any, finished: list[LedgerEvent]
) -> None:
    """Killed once after ``trial_started`` of a B run (never launched), once right after
    ``run_requested`` of an A run; each resume picks the re-measurement up where it was."""
    workdir = open_small(tmp_path, write_recipe)
    for kill in (
        {"kill_at": "c1-b2"},
        {"progress": KillingProgressDouble("c1-a3")},
        {"kill_at": "confirm-c2-b2"},
    ):
        bot = campaign(workdir, MOVES, speeds(SPEEDS), **kill)
        with pytest.raises(Killed):
            bot.run()
        bot.ctx.ledger.close()
    state = campaign(workdir, MOVES, speeds(SPEEDS)).run()
    assert state.stopped is not None and state.stopped.reason == "exhausted"
    with Ledger(workdir / "ledger.db") as ledger:
        events = ledger.events()
        assert ledger.verify().ok
    # the same decisions, runs and recalibration as the campaign that was never killed
    for kind in ("trial_judged", "noise_recalibrated"):
        strip = ("score", "incumbent_score", "gain", "paired_mean", "paired_se", "bar", "reason")
        got = [{k: v for k, v in p.items() if k not in strip} for p in of(events, kind)]
        want = [{k: v for k, v in p.items() if k not in strip} for p in of(finished, kind)]
        assert [(g.get("trial"), g.get("decision"), g.get("pairs")) for g in got] == [
            (w.get("trial"), w.get("decision"), w.get("pairs")) for w in want
        ]
    requested = [p["trial"] for p in of(events, "run_requested")]
    assert requested == [p["trial"] for p in of(finished, "run_requested")]
    assert len(requested) == len(set(requested)), "a run was requested twice"
    # the run killed before its launch was abandoned, charged nothing and started again
    assert [p["trial"] for p in of(events, "trial_abandoned")] == ["c1-b2", "confirm-c2-b2"]
    charged = Counter(p["trial"] for p in of(events, "trial_finished"))
    assert set(charged.values()) == {1} and set(requested) <= set(charged)
    [confirmed] = of(events, "confirmation_finished")
    assert confirmed["pairs"] == sequential.CONFIRM_PAIRS


def test_a_ledger_written_before_the_judgement_still_folds(tmp_path: Path) -> None:
    """attune 0.1's ledger: no extra runs, no recalibration, no confirmation; its verdicts
    (one run each, no bar) read back and report as they were."""
    legacy = Path(__file__).parent / "fixtures" / "ledgers" / "attune-0.1.db"
    copy = tmp_path / "ledger.db"
    copy.write_bytes(legacy.read_bytes())
    with Ledger(copy) as ledger:
        events = ledger.events("v01run")
    state = fold("v01run", events)
    assert state.judgement.runs == {} and state.judgement.confirmed is None
    assert state.judgement.noise is None and state.incumbent == "c2"
    judged = {t.trial: t.judged for t in state.candidates}
    assert judged["c2"] is not None
    assert judged["c2"].decision == "merge" and judged["c2"].pairs is None
    text = render_markdown(build_report(events))
    assert "- no candidate needed re-measuring" in text and "confirmed" not in text


def test_on_github_each_judgement_run_benchmarks_its_recipe_s_commit(
    finished: list[LedgerEvent],
) -> None:
    """GitHub mode benchmarks commits: a B run is its candidate's commit, an A run or a
    recalibration run the tuned head, a confirmation's baseline run the commit the campaign
    started from."""
    from bot.github.pins import pins_of

    state = fold(finished[0].campaign, finished)
    c3 = state.trials["c3"]
    assert pins_of(state, "c3-b1").commit == c3.head_sha == pins_of(state, "c3").commit
    assert pins_of(state, "c3-a1").commit == state.pinned_sha  # the incumbent c2: tuned head
    assert pins_of(state, "confirm-c2-b1").commit == state.pinned_sha
    [opened] = of(finished, "forge_ready")
    assert pins_of(state, "confirm-c2-a1").commit == opened["base_sha"] != state.pinned_sha


def test_a_confirmation_cut_short_keeps_the_pairs_it_measured(
    tmp_path: Path, write_recipe: Any
) -> None:
    """The third baseline run of the confirmation fails: the two pairs before it stand, with
    their interval and a note saying why there are not three."""
    workdir = open_small(tmp_path, write_recipe)
    table = {"baseline": 1000.0, "c1": 1300.0, "c1-a": 1000.0, "c1-b": 1300.0}
    table.update({"confirm-c1-a": 1000.0, "confirm-c1-b": 1300.0})
    state = campaign(workdir, [{"micro_batch_size": (1, 2)}], speeds(table), fail="confirm-c1-a3")
    state_after = state.run()
    confirmed = state_after.judgement.confirmed
    assert confirmed is not None and confirmed.pairs == 2
    assert "its run confirm-c1-a3 (baseline) ended failed" in confirmed.note
    low, speedup, high = confirmed.low, confirmed.speedup, confirmed.high
    assert low is not None and speedup is not None and high is not None
    assert low < speedup < high
    assert state_after.stopped is not None and state_after.stopped.reason == "exhausted"
