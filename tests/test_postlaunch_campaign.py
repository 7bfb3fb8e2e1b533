"""A campaign calibrates its post-launch checks once, from real runs: the layout variants of its
baseline run as charged ``layout_check`` trials, the reference lands in the ledger, a restarted
bot folds it back without measuring again, and a refused variant is named, not fatal.

To keep the file short, the campaigns share one real calibration run (copied) and its
``noise_calibrated`` is written from that run's score (the noise model: test_noise_and_postlaunch).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bot.agents.rules import RulesAgent
from bot.campaign.check_calibration import affordable, calibrate_checks
from bot.campaign.executor import LocalExecutor
from bot.campaign.judgement import judge_finished
from bot.campaign.layout_variants import layout_variants
from bot.campaign.loop import Campaign
from bot.campaign.setup import open_campaign
from bot.forges.local import LocalForge
from bot.state.model import CampaignState
from gate.ledger import Ledger
from gate.models import EffectiveConfig, TrialResult
from gate.postlaunch_reference import LOSS_BAND_FLOOR, UNMEASURED_LOSS_FLOOR
from gate.registry import Registry, load_registry

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

STEPS = 3


def _campaign(root: Path, ledger: Ledger, registry: Registry, budget_s: float) -> Campaign:
    executor = LocalExecutor(
        ledger=ledger,
        campaign="c",
        registry=registry,
        workdir=root,
        budget_device_seconds=budget_s,
        steps=STEPS,
        warmup=1,
    )
    return Campaign(
        name="c",
        ledger=ledger,
        forge=LocalForge(root / "forge"),
        executor=executor,
        agent=RulesAgent(),
        registry=registry,
        cores=2,
    )


@pytest.fixture(scope="module")
def noise_calibrated(tmp_path_factory: pytest.TempPathFactory, write_recipe: Any) -> Path:
    """A work directory whose campaign has one real calibration run and its noise written;
    each test works on a copy."""
    from tests.conftest import SMALL_CONFIG

    root = tmp_path_factory.mktemp("calibrated")
    recipe = write_recipe(root, "small", **{**SMALL_CONFIG, "micro_batch_size": 2})
    with Ledger(root / "ledger.db") as ledger:
        open_campaign(
            ledger,
            "c",
            recipe_text=recipe.read_text(),
            recipe_path="small.yaml",
            budget_hours=1.0,
            steps=STEPS,
            warmup=1,
        )
        campaign = _campaign(root, ledger, load_registry("embedded", "1"), 3600.0)
        baseline = campaign.ctx.recipe(recipe.read_text(), "baseline")
        assert campaign.ctx.bench("baseline-1", "calibration", baseline)
        finished = campaign.state().trials["baseline-1"].finished
        assert finished is not None and finished.status == "ok", finished
        assert finished.score is not None
        score = finished.score
        ledger.append(
            "c",
            "noise_calibrated",
            {"runs": 1, "mean": score, "std": 0.0, "cv": 0.0, "threshold": 0.03, "scores": [score]},
        )
        assert campaign.state().checks_reference is None
    return root


def _copy(root: Path, tmp_path: Path) -> tuple[Path, Ledger]:
    work = tmp_path / "work"
    shutil.copytree(root, work)
    return work, Ledger(work / "ledger.db")


def test_the_checks_are_calibrated_from_layout_variants_once(
    noise_calibrated: Path, tmp_path: Path
) -> None:
    registry = load_registry("embedded", "1")
    work, ledger = _copy(noise_calibrated, tmp_path)
    with ledger:
        calibrate_checks(_campaign(work, ledger, registry, 3600.0).ctx)
        state = _campaign(work, ledger, registry, 3600.0).state()  # a restarted bot
        ref = state.checks_reference
        assert ref is not None
        assert ref.variants == [
            "micro_batch_size 2 -> 4 (accumulation 4 -> 2)",
            "data_parallel_size 1 -> 2",
        ]
        assert ref.runs == ["baseline-1", "layout-1", "layout-2"]
        assert ref.k == STEPS and ref.loss_band == [LOSS_BAND_FLOOR] * STEPS
        assert ref.step1_grad_norm is not None and ref.notes == []
        layout = state.role_trials("layout_check")
        assert [t.trial for t in layout] == ["layout-1", "layout-2"]
        assert all(t.device_seconds > 0 for t in layout)  # charged like any run
        assert state.trials["layout-2"].finished.devices == 2  # type: ignore[union-attr]
        # the agent may still propose these layouts: they are not its moves
        assert not {t.finished.fingerprint for t in layout} & state.tried  # type: ignore[union-attr]

        events = len(ledger.events("c"))
        calibrate_checks(_campaign(work, ledger, registry, 3600.0).ctx)
        assert len(ledger.events("c")) == events  # calibrated once: nothing runs again

        # the judgement uses the calibrated reference: a layout variant passes every check
        result = TrialResult.model_validate_json(
            (work / "trials" / "layout-1" / "result.json").read_text()
        )
        verdict = judge_finished(state, result)
        assert verdict.post_passed is True, verdict


def test_a_refused_variant_is_named_and_the_repeats_still_calibrate(
    noise_calibrated: Path, tmp_path: Path
) -> None:
    registry = load_registry("embedded", "1")
    work, ledger = _copy(noise_calibrated, tmp_path)
    with ledger:
        calibrate_checks(_campaign(work, ledger, registry, budget_s=1.0).ctx)  # nothing left
        state: CampaignState = _campaign(work, ledger, registry, 1.0).state()
        ref = state.checks_reference
        assert ref is not None and ref.runs == ["baseline-1"] and ref.variants == []
        refused, wide = ref.notes[:2], ref.notes[2:]
        assert all("not run: forecast" in n and "exceeds" in n for n in refused), ref.notes
        assert wide == ["no layout variant ran: wide floors (2% loss, 10% gradient norm)"]
        assert ref.loss_band == [UNMEASURED_LOSS_FLOOR] * STEPS
        assert not state.role_trials("layout_check") or all(
            t.finished is None for t in state.role_trials("layout_check")
        )


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (  # accumulation 8: double the micro-batch; one rank of one thread: two ranks
            {"global_batch_size": 8, "micro_batch_size": 1, "data_parallel_size": 1, "threads": 1},
            ["micro_batch_size 1 -> 2 (accumulation 8 -> 4)", "data_parallel_size 1 -> 2"],
        ),
        (  # no accumulation left: halve the micro-batch; two ranks: one
            {"global_batch_size": 8, "micro_batch_size": 4, "data_parallel_size": 2, "threads": 1},
            ["micro_batch_size 4 -> 2 (accumulation 1 -> 2)", "data_parallel_size 2 -> 1"],
        ),
        (  # two threads fill both cores: no second rank, one thread fewer instead
            {"global_batch_size": 3, "micro_batch_size": 3, "data_parallel_size": 1, "threads": 2},
            ["threads 2 -> 1"],
        ),
    ],
)
def test_layout_variants(values: dict[str, Any], expected: list[str]) -> None:
    effective = EffectiveConfig(
        framework="embedded", framework_version="1", values=values, devices=1
    )
    assert [v.description for v in layout_variants(effective, cores=2)] == expected
    gbs = values["global_batch_size"]
    for v in layout_variants(effective, cores=2):
        assert v.changes.get("global_batch_size", gbs) == gbs  # the global batch stays pinned


def test_other_frameworks_get_no_variants() -> None:
    effective = EffectiveConfig(
        framework="megatron", framework_version="0.19", values={}, devices=8
    )
    assert layout_variants(effective, cores=64) == []


def test_variants_leave_room_for_candidates() -> None:
    """A variant runs only when the budget still covers it and three baseline-sized runs."""
    assert affordable(left_s=100.0, cost_s=20.0, reserve_s=60.0)
    assert not affordable(left_s=100.0, cost_s=50.0, reserve_s=60.0)
