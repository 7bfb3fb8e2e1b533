"""The decision on a candidate's first run, as a pure function of its result and the campaign's
state (the incumbent's score, the noise, the post-launch reference): merge beyond the one-run
bar, re-measure in (0, bar], close otherwise (``docs/judgement.md``)."""

from __future__ import annotations

import math

import pytest

from bot.campaign.judgement import judge_finished, paired_outcome
from bot.state.model import CampaignState, TrialRecord
from bot.state.views import history
from gate.models import NoiseModel, TrialResult
from tests.events_factory import payload

NOISE = NoiseModel(runs=5, mean=1000.0, std=20.0, cv=0.02, threshold=0.06)


def state() -> CampaignState:
    baseline = TrialRecord(
        trial="baseline-1",
        role="calibration",
        finished=payload("trial_finished", status="ok", step1_loss=5.0),
    )
    return CampaignState(campaign="c", noise=NOISE, trials={"baseline-1": baseline})


def result(score: float, step1_loss: float = 5.0, status: str = "ok") -> TrialResult:
    return TrialResult(
        recipe="r",
        fingerprint="f",
        status=status,
        warmup=1,
        score=score,
        step1_loss=step1_loss,
        allocated_at=0.0,
        released_at=1.0,
        devices=1,
    )


BAR = 4.9076 * 0.02 * math.sqrt(1 + 1 / 5)
"""The one-run bar: t_4 at 1 - 0.004 times the gain's spread, over the 6% noise threshold."""


@pytest.mark.parametrize(
    ("score", "decision", "reason"),
    [
        (1120.0, "remeasure", "+12.0% beats the one-run bar 10.8%: one interleaved pair confirms"),
        (1070.0, "remeasure", "+7.0% is within the one-run bar 10.8%: re-measured A/B"),
        (1001.0, "remeasure", "+0.1% is within"),
        (1000.0, "close", "+0.0%: no faster than the incumbent"),
        (990.0, "close", "-1.0%: no faster than the incumbent"),
    ],
)
def test_one_run_merges_beyond_the_bar_and_the_zone_below_it_is_re_measured(
    score: float, decision: str, reason: str
) -> None:
    verdict = judge_finished(state(), result(score))
    assert verdict.decision == decision and reason in verdict.reason
    assert verdict.gain == pytest.approx(score / 1000.0 - 1)
    assert verdict.bar == pytest.approx(BAR, rel=1e-4) and verdict.threshold == 0.06
    assert verdict.post_passed is True
    assert verdict.confirm_bar == (verdict.bar if score == 1120.0 else None)


def test_the_incumbent_is_the_last_winner_not_the_baseline() -> None:
    s = state()
    finished = payload("trial_finished", trial="c1", score=1100.0, status="ok")
    s.trials["c1"] = TrialRecord(trial="c1", role="candidate", finished=finished)
    s.incumbent = "c1"
    verdict = judge_finished(s, result(1150.0))
    assert verdict.decision == "remeasure" and verdict.gain == pytest.approx(1150 / 1100 - 1)
    # one run of the winner sets its score: a single gain is less certain than against five
    assert verdict.bar == pytest.approx(4.9076 * 0.02 * math.sqrt(2), rel=1e-4)


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        (result(5000.0, step1_loss=5.5), "differs from the baseline's"),
        (result(5000.0, step1_loss=math.nan), "step-1 loss is nan"),
    ],
)
def test_a_fast_run_that_trains_something_else_is_closed(bad: TrialResult, reason: str) -> None:
    verdict = judge_finished(state(), bad)
    assert verdict.decision == "close" and reason in verdict.reason
    assert verdict.post_passed is False and verdict.score is None and verdict.bar is None
    judged = verdict.judged("c1", 1000.0)  # the event: no score, the calibration's threshold
    assert (judged.decision, judged.score, judged.threshold) == ("close", None, 0.06)
    assert judged.post_reasons == list(verdict.post_reasons) and reason in judged.reason


def test_with_a_b_re_measurement_off_a_first_run_within_the_bar_closes() -> None:
    from gate.events import CampaignOpened

    off = state()
    off.params = CampaignOpened(
        baseline="b",
        recipe_path="r.yaml",
        recipe_text="",
        framework="embedded",
        budget_device_hours=1.0,
        steps=4,
        warmup=1,
        agent="rules",
        calibration_runs=5,
        max_trials=3,
        max_pairs=0,
    )
    verdict = judge_finished(off, result(1070.0))
    assert verdict.decision == "close"
    assert verdict.reason == "+7.0% is within the one-run bar 10.8% (A/B re-measurement off)"
    merged = judge_finished(off, result(1120.0)).judged("c1", 1000.0)  # its one run decides
    assert merged.decision == "merge" and merged.pairs is None
    assert merged.score == 1120.0 and merged.gain == pytest.approx(0.12)
    assert merged.bar == pytest.approx(BAR, rel=1e-4) and merged.incumbent_score == 1000.0


def test_the_agent_sees_the_a_b_mean_where_pairs_ran() -> None:
    """A candidate closed after A/B pairs shows the agent the pairs' mean, not the screening
    run's gain (which was selected for landing in the zone); a one-run verdict shows its run."""
    s = state()
    proposal = payload("candidate_proposed", changes={"micro_batch_size": [1, 2]})
    s.trials["c1"] = TrialRecord(
        trial="c1",
        role="candidate",
        proposal=proposal,
        judged=payload(
            "trial_judged", trial="c1", gain=0.09, paired_mean=-0.01, pairs=3, decision="close"
        ),
    )
    s.trials["c2"] = TrialRecord(
        trial="c2",
        role="candidate",
        proposal=proposal,
        judged=payload("trial_judged", trial="c2", gain=-0.2),
    )
    items = {item.trial: item for item in history(s)}
    assert items["c1"].gain == pytest.approx(-0.01)
    assert items["c2"].gain == pytest.approx(-0.2)


def test_a_first_run_beyond_the_bar_merges_when_one_interleaved_pair_confirms_it() -> None:
    """The first run can beat the bar because the calibration ran in a slow spell; a pair run
    side by side cannot: it merges only when that pair's difference beats the bar too, and
    otherwise the paired rule decides from more pairs."""
    from gate.events_judgement import RunRequested

    def with_pair(a: float, b: float) -> tuple[CampaignState, list[RunRequested]]:
        s = state()
        runs = []
        for arm, trial, score in (("incumbent", "c1-a1", a), ("candidate", "c1-b1", b)):
            s.trials[trial] = TrialRecord(
                trial=trial,
                role="remeasure",
                finished=payload("trial_finished", trial=trial, score=score),
            )
            runs.append(
                RunRequested(
                    trial=trial,
                    phase="remeasure",
                    of="c1",
                    arm=arm,
                    recipe_of="baseline" if arm == "incumbent" else "c1",
                    pair=1,
                )
            )
        return s, runs

    confirmed = paired_outcome(*with_pair(1000.0, 1150.0), confirm_bar=BAR)
    assert confirmed is not None and confirmed.decision == "merge"
    assert confirmed.pairs == 1 and confirmed.paired_mean == pytest.approx(0.15)
    assert "beats the one-run bar 10.8% again" in confirmed.reason
    first = judge_finished(state(), result(1120.0))
    judged = first.judged("c1", 1000.0, confirmed)  # the pair decides; the first run's gain stays
    assert (judged.decision, judged.reason, judged.pairs) == ("merge", confirmed.reason, 1)
    assert judged.gain == pytest.approx(0.12) and judged.bar == BAR
    with pytest.raises(AssertionError, match="judged by its pairs"):
        first.judged("c1", 1000.0)  # re-measured: not decided by its one run
    assert paired_outcome(*with_pair(1000.0, 1050.0), confirm_bar=BAR) is None  # more pairs
    assert paired_outcome(*with_pair(1000.0, 1150.0)) is None  # no bar: the paired rule, 3 pairs
