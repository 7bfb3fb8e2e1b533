"""A campaign is bound to the head its command screened and to a user who may write: a moved
head or a revoked permission stops it, with a reply, when a restarted app picks it up and
before any launch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gate.ledger import Ledger
from tests.fakegithub import FakeGitHub
from tests.github_harness import (
    FULL,
    RECIPE_PATH,
    ActionsPlayer,
    App,
    comment,
    github_mode,
    ledger_events,
    recipe_text,
    replies,
    seed_repo,
    wait_for,
)

CAMPAIGN = "octo-org-models-pr1-1"


def opened_by_an_app_that_died(fake: FakeGitHub, tmp: Path, number: int) -> None:
    """The ledger an app leaves when it is killed right after ``/attune tune`` was accepted."""
    with Ledger(tmp / "ledger.db") as ledger:
        ledger.append(
            CAMPAIGN,
            "campaign_opened",
            {
                "baseline": "ported-gpt",
                "recipe_path": RECIPE_PATH,
                "recipe_text": recipe_text(activation_checkpointing=True),
                "framework": "embedded",
                "budget_device_hours": 0.05,
                "steps": 4,
                "warmup": 1,
                "agent": "rules",
                "calibration_runs": 5,
                "max_trials": 20,
                "repo": FULL,
                "pr": number,
                "head_sha": fake.pull(number).head_sha,
                "by": "maintainer",
                "installation": fake.installation_id,
                "comment_id": 1,
            },
        )


def stopped(app: App) -> dict[str, Any]:
    (event,) = [e.payload for e in ledger_events(app) if e.kind == "campaign_stopped"]
    return dict(event)


def test_a_head_that_moved_before_the_restart_stops_the_campaign(tmp_path: Path) -> None:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        opened_by_an_app_that_died(fake, tmp_path, number)
        fake.commit("tune-ported", {RECIPE_PATH: recipe_text(threads=2)}, author="maintainer")
        with App(fake, tmp_path) as app:
            wait_for(lambda: replies(fake, number), timeout=30, what="the reply")
            assert stopped(app)["reason"] == "head_moved"
            (reply,) = replies(fake, number)
            assert "moved from" in reply and "`/attune tune` starts a new campaign" in reply
            assert fake.dispatches() == []
            assert not any(e.kind == "forge_ready" for e in ledger_events(app))


def test_a_revoked_permission_stops_the_campaign_on_restart(tmp_path: Path) -> None:
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        opened_by_an_app_that_died(fake, tmp_path, number)
        fake.set_permission("maintainer", "read")
        with App(fake, tmp_path) as app:
            wait_for(lambda: replies(fake, number), timeout=30, what="the reply")
            assert stopped(app)["reason"] == "permission"
            assert "no longer has write permission" in replies(fake, number)[0]
            assert fake.dispatches() == []


@pytest.mark.slow  # real training runs
def test_a_permission_revoked_mid_campaign_stops_it_before_the_next_launch(
    tmp_path: Path,
) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        actions = ActionsPlayer(fake, app, tmp_path)
        comment(fake, app, number, "maintainer", "/attune tune budget=0.05 steps=4")
        wait_for(lambda: len(fake.dispatches()) == 1, timeout=30, what="the first dispatch")
        fake.set_permission("maintainer", "read")
        actions._run_new_dispatches()  # baseline-1 runs and finishes; baseline-2 is next
        wait_for(lambda: _stopped_any(app), timeout=60, what="the stop")
        assert stopped(app)["reason"] == "permission"
        assert [d.inputs["trial"] for d in fake.dispatches()] == ["baseline-1"]
        finished = [e.payload for e in ledger_events(app) if e.kind == "trial_finished"]
        assert [f["trial"] for f in finished] == ["baseline-1"]  # what ran is still charged


def _stopped_any(app: App) -> bool:
    return any(e.kind == "campaign_stopped" for e in ledger_events(app))
