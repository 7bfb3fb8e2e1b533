"""LocalExecutor with a real ledger: gate, launch checks, real benchmark runs, charges.

One campaign is played once per module (three real training runs), each trial through the
executor's phases in the order a campaign's steps call them, and each test checks one property
of what it left in the ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import LocalExecutor
from bot.state.fold import campaign_state, fold
from gate import postlaunch
from gate.budget import LaunchRefusal, forecast_device_seconds, spent_device_seconds
from gate.ledger import Ledger, LedgerEvent
from gate.models import EffectiveConfig, GateReport, Recipe, TrialResult
from gate.postlaunch import PostLaunchReport
from gate.postlaunch_reference import PostLaunchReference
from gate.registry import Registry

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

CAMPAIGN = "c1"
MakeRecipe = Callable[..., Recipe]
Resolve = Callable[[Recipe], EffectiveConfig]


@dataclass
class Played:
    """What became of one trial."""

    effective: EffectiveConfig | None
    gate: GateReport
    refusal: LaunchRefusal | None = None
    result: TrialResult | None = None
    post: PostLaunchReport | None = None

    def fingerprint(self) -> str:
        """Its effective config's fingerprint (every trial here resolves)."""
        assert self.effective is not None, "the framework refused the recipe"
        return self.effective.fingerprint()


def play(
    ex: LocalExecutor,
    trial: str,
    recipe: Recipe,
    *,
    baseline: EffectiveConfig,
    baseline_step1_loss: float | None,
) -> Played:
    """One candidate through the phases a campaign steps it through: gate, launch checks,
    launch, finish; then the post-launch check against the baseline's step-1 loss."""
    effective, report = ex.gate(trial, recipe, baseline=baseline)
    played = Played(effective=effective, gate=report)
    if report.verdict == "reject" or effective is None:
        return played
    played.refusal = ex.admit(trial, effective)
    if played.refusal is not None:
        return played
    played.result = ex.finish(trial, ex.launch(trial, "candidate", recipe, effective))
    if baseline_step1_loss is not None:
        reference = PostLaunchReference.step1_only(baseline_step1_loss)
        played.post = postlaunch.check(played.result, reference)
    return played


class TrialsPlayed:
    """What the module's campaign did: outcomes by trial id, and the ledger it wrote."""

    def __init__(self, root: Path, ledger: Ledger, registry: Registry) -> None:
        self.root = root
        self.ledger = ledger
        self.registry = registry
        self.outcomes: dict[str, Played] = {}

    def executor(self, campaign: str = CAMPAIGN, **kw: Any) -> LocalExecutor:
        options: dict[str, Any] = {"budget_device_seconds": 3600.0, **kw}
        return LocalExecutor(
            ledger=self.ledger,
            campaign=campaign,
            registry=self.registry,
            workdir=self.root / "work",
            steps=3,
            warmup=1,
            timeout_s=120,
            **options,
        )

    def trial_dir(self, trial: str) -> Path:
        return self.root / "work" / "trials" / trial

    def events(self, trial: str, campaign: str = CAMPAIGN) -> list[LedgerEvent]:
        return [e for e in self.ledger.events(campaign) if e.payload.get("trial") == trial]

    def kinds(self, trial: str, campaign: str = CAMPAIGN) -> list[str]:
        return [e.kind for e in self.events(trial, campaign)]


@pytest.fixture(scope="module")
def campaign(
    tmp_path_factory: pytest.TempPathFactory,
    small_recipe: MakeRecipe,
    resolve: Resolve,
    registry: Registry,
) -> Iterator[TrialsPlayed]:
    root = tmp_path_factory.mktemp("campaign")
    recipes = root / "recipes"
    with Ledger(root / "ledger.db") as ledger:
        c = TrialsPlayed(root, ledger, registry)
        base_recipe = small_recipe(recipes, "baseline")
        baseline = resolve(base_recipe)
        ex = c.executor()

        # t0: the baseline itself (no change: allowed), for its step-1 loss
        c.outcomes["t0"] = play(ex, "t0", base_recipe, baseline=baseline, baseline_step1_loss=None)
        base_result = c.outcomes["t0"].result
        assert base_result is not None and base_result.status == "ok", base_result
        loss = base_result.step1_loss

        # t1: a semantic change in disguise: rejected before launch
        bf16 = small_recipe(recipes, "bf16", grad_reduce_in_bf16=True)
        c.outcomes["t1"] = play(ex, "t1", bf16, baseline=baseline, baseline_step1_loss=loss)

        # t2: a layout-identical recipe that crashes (a framework bug the gate cannot see)
        crashing = small_recipe(recipes, "crashing", activation_checkpointing=True)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ATTUNE_FAULT", "crash_at_step=2")
            c.outcomes["t2"] = play(ex, "t2", crashing, baseline=baseline, baseline_step1_loss=loss)
            # t3: the exact same effective config again: refused, never launched
            c.outcomes["t3"] = play(ex, "t3", crashing, baseline=baseline, baseline_step1_loss=loss)

        # t4: something differs (threads): launchable again
        changed = small_recipe(recipes, "changed", activation_checkpointing=True, threads=2)
        c.outcomes["t4"] = play(ex, "t4", changed, baseline=baseline, baseline_step1_loss=loss)

        # t5: a new config, but the budget left is half the forecast from the ledger
        events = ledger.events(CAMPAIGN)
        spent, forecast = spent_device_seconds(events), forecast_device_seconds(events, 60.0)
        tight = c.executor(budget_device_seconds=spent + forecast / 2)
        other = small_recipe(recipes, "other", attention="math")
        c.outcomes["t5"] = play(tight, "t5", other, baseline=baseline, baseline_step1_loss=loss)

        # another campaign whose budget is below the default forecast of its first trial
        poor = c.executor(campaign="poor", budget_device_seconds=10.0, default_forecast_s=60.0)
        c.outcomes["p1"] = play(poor, "p1", other, baseline=baseline, baseline_step1_loss=loss)
        yield c


def test_rejected_candidate_is_never_launched(campaign: TrialsPlayed) -> None:
    out = campaign.outcomes["t1"]
    assert out.gate.verdict == "reject"
    assert out.result is None and out.refusal is None and out.post is None
    assert campaign.kinds("t1") == ["gate_checked"]
    (checked,) = campaign.events("t1")
    assert checked.payload["verdict"] == "reject"
    assert checked.payload["fingerprint"] == out.fingerprint()
    keys = {f["key"]: f for f in checked.payload["findings"]}
    assert keys["accumulate_grads_in_fp32"]["derived"] is True
    assert keys["accumulate_grads_in_fp32"]["class"] == "semantic"
    assert not campaign.trial_dir("t1").exists()


def test_failed_run_is_charged_and_its_exact_rerun_refused(campaign: TrialsPlayed) -> None:
    failed = campaign.outcomes["t2"]
    assert failed.gate.verdict == "allow"
    assert failed.result is not None
    assert failed.result.status == "failed"
    assert "injected crash" in (failed.result.error or "")
    assert failed.result.device_seconds > 0
    assert campaign.kinds("t2") == [
        "gate_checked",
        "trial_started",
        "trial_launched",
        "trial_finished",
    ]
    finished = campaign.events("t2")[-1].payload
    assert finished["status"] == "failed"
    assert finished["released_at"] > finished["allocated_at"]
    charge = (finished["released_at"] - finished["allocated_at"]) * finished["devices"]
    assert charge == pytest.approx(failed.result.device_seconds) and charge > 0
    assert failed.post is not None and not failed.post.passed

    rerun = campaign.outcomes["t3"]
    assert rerun.fingerprint() == failed.fingerprint()
    assert rerun.result is None
    assert rerun.refusal is not None and rerun.refusal.reason == "failed_rerun"
    assert campaign.kinds("t3") == ["gate_checked", "launch_refused"]
    refused = campaign.events("t3")[-1].payload
    assert refused["reason"] == "failed_rerun"
    assert refused["fingerprint"] == failed.fingerprint()
    assert not campaign.trial_dir("t3").exists()

    changed = campaign.outcomes["t4"]
    assert changed.fingerprint() != failed.fingerprint()
    assert changed.result is not None and changed.result.status == "ok"
    assert campaign.kinds("t4") == [
        "gate_checked",
        "trial_started",
        "trial_launched",
        "trial_finished",
    ]
    # and it trained the baseline's model: the post-launch gate passes it
    assert changed.post is not None and changed.post.passed, changed.post


def test_budget_refusal_charges_nothing(campaign: TrialsPlayed) -> None:
    for trial, camp in (("t5", CAMPAIGN), ("p1", "poor")):
        out = campaign.outcomes[trial]
        assert out.gate.verdict == "allow"
        assert out.result is None
        assert out.refusal is not None and out.refusal.reason == "budget", out.refusal
        assert campaign.kinds(trial, camp) == ["gate_checked", "launch_refused"]
        assert campaign.events(trial, camp)[-1].payload["reason"] == "budget"
        assert not campaign.trial_dir(trial).exists()
    poor = fold("poor", campaign.ledger.events("poor"))
    assert poor.runs_by_status == {} and poor.spent_device_seconds == 0.0


def test_charges_sum_to_the_runs(campaign: TrialsPlayed) -> None:
    results = [o.result for o in campaign.outcomes.values() if o.result is not None]
    assert sorted(r.status for r in results) == ["failed", "ok", "ok"]
    state = campaign_state(campaign.ledger, CAMPAIGN)
    assert state.runs_by_status == {"ok": 2, "failed": 1}
    assert state.spent_device_seconds == pytest.approx(sum(r.device_seconds for r in results))
    assert state.spent_device_seconds > 0


def test_ledger_verifies_and_refuses_raw_edits(campaign: TrialsPlayed) -> None:
    report = campaign.ledger.verify()
    assert report.ok, report
    assert report.checked == len(campaign.ledger.events()) > 10

    conn = sqlite3.connect(campaign.ledger.path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute(
                "UPDATE events SET payload = ? WHERE kind = 'trial_finished'",
                ('{"device_seconds": 0}',),
            )
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            conn.execute("DELETE FROM events WHERE kind = 'launch_refused'")
    finally:
        conn.close()
    after = campaign.ledger.verify()
    assert after.ok and after.checked == report.checked
    charged = campaign_state(campaign.ledger, CAMPAIGN).spent_device_seconds
    assert charged > 0
