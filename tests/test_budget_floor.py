"""Budgets that explain themselves: a budget that calibration would spend before any candidate
is refused before anything launches, naming the minimum; the agent never sees a negative budget
left; a campaign that tried no candidate says so instead of a speedup of 1.00x."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.commands.demo import LONG, SHORT
from bot.commands.tune_console import summarize
from bot.console import console
from bot.report.build import build_report, render_markdown
from bot.state.fold import fold
from bot.state.views import agent_view
from gate.budget import FIRST_RUN_FORECAST_S, campaign_floor, check_buys_a_candidate
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.recipe import load_recipe
from gate.registry import load_registry
from runners.adapters import get_adapter
from tests.conftest import ROOT
from tests.events_factory import payload

EXAMPLE = str(ROOT / "examples/ported-gpt.yaml")


def test_the_floor_counts_calibration_a_profile_and_one_candidate() -> None:
    floor = campaign_floor(per_run_s=60.0, calibration_runs=5)
    assert (floor.calibration_s, floor.minimum_s) == (360.0, 420.0)
    check_buys_a_candidate(420 / 3600, floor)  # exactly enough is enough
    with pytest.raises(AttuneError) as refused:
        check_buys_a_candidate(0.05, floor)
    assert str(refused.value) == (
        "--budget 0.05 device-hours buys no candidate: calibration is forecast at 0.100 "
        "device-hours (5 baseline runs and a profile, 60 device-seconds each until a run is "
        "measured) and a candidate at 0.017 more; give --budget 0.117 or more (each further "
        "candidate about 0.017)"
    )


@pytest.mark.parametrize("command", [["tune", EXAMPLE], ["demo"]])
def test_a_budget_that_buys_no_candidate_is_refused_before_anything_exists(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "w"
    assert main([*command, "--budget", "0.05", "--workdir", str(workdir)]) == 2
    err = capsys.readouterr().err
    assert "buys no candidate" in err and "give --budget 0.117 or more" in err
    assert not workdir.exists()


def test_both_demo_plans_buy_their_candidates() -> None:
    floor = campaign_floor(per_run_s=FIRST_RUN_FORECAST_S, calibration_runs=5)
    assert LONG.budget_hours * 3600 >= floor.minimum_s  # its runs' measured costs bound it
    # the short plan buys every one of its candidates even at the unmeasured forecast
    extra = (SHORT.max_trials - 1) * floor.per_run_s
    assert SHORT.budget_hours * 3600 >= floor.minimum_s + extra


def test_a_campaign_that_tried_no_candidate_says_so(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened"))
        ledger.append("c", "noise_calibrated", payload("noise_calibrated"))
        ledger.append("c", "campaign_stopped", payload("campaign_stopped", reason="budget"))
        events = ledger.events("c")
        state = fold("c", events)
    with console.capture() as out:
        summarize(state, tmp_path / "report.md")
    text = out.get()
    assert "no candidate was tried: the baseline stays" in text
    assert "1.00x" not in text and "stopped: budget" in text
    outcome = render_markdown(build_report(events))
    assert "**Outcome:** no candidate was tried: the baseline `base` stays" in outcome
    assert "1.00x" not in outcome


def test_the_agent_never_sees_a_negative_budget_left(tmp_path: Path) -> None:
    recipe = load_recipe(ROOT / "examples/ported-gpt.yaml")
    incumbent = get_adapter("embedded").resolve(recipe)
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("c", "campaign_opened", payload("campaign_opened", budget_device_hours=0.01))
        ledger.append(  # a run stopped at the budget's limit went a little past it
            "c",
            "trial_finished",
            payload("trial_finished", allocated_at=0.0, released_at=38.0, devices=1),
        )
        state = fold("c", ledger.events("c"))
    assert state.spent_device_seconds > 36.0
    view = agent_view(state, incumbent, load_registry("embedded", "1"), forecast_s=10.0, cores=2)
    assert view.budget_left_s == 0.0
