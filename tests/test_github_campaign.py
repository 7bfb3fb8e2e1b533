"""A whole campaign in GitHub mode, over real HTTP: a comment starts it, candidate pull
requests are opened, gated and benchmarked through the (played) workflows, winners are merged,
losers closed, and the ledger matches the comments.

The GitHub Actions side is played by tests/github_harness.ActionsPlayer, which runs the real
``attune gate check`` and ``attune bench`` on the embedded workload for what the bot dispatches.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from bot.checks import BASELINE_GATE_CHECK, GATE_CHECK
from bot.state.fold import fold
from gate.ledger import Ledger
from tests.fakegithub import FakeGitHub
from tests.github_harness import (
    RECIPE_PATH,
    SECRET,
    ActionsPlayer,
    App,
    comment,
    github_mode,
    ledger_events,
    replies,
    seed_repo,
    serve_process,
    wait_for,
)

pytestmark = pytest.mark.slow
OPERATOR = "operator-token-for-the-test"


def test_a_comment_runs_a_campaign_end_to_end(tmp_path: Path) -> None:
    with (
        github_mode(tmp_path, operator_token=OPERATOR) as (fake, app, number),
        ActionsPlayer(fake, app, tmp_path) as actions,
    ):
        tuned_head = fake.head("tune-ported")
        comment(fake, app, number, "maintainer", "/attune tune budget=0.05 steps=4")
        wait_for(lambda: replies(fake, number), timeout=20, what="the start reply")
        assert replies(fake, number)[0].startswith("Started campaign `octo-org-models-pr1-1`")

        # a second tune while it runs answers with the status
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: len(replies(fake, number)) >= 2, timeout=20, what="the second reply")
        assert any("already running" in r for r in replies(fake, number))

        def stopped() -> bool:
            return any(e.kind == "campaign_stopped" for e in ledger_events(app))

        wait_for(stopped, timeout=400, what="the campaign to stop")
        assert actions.errors == []

        with Ledger(app.settings.ledger_path) as ledger:
            assert ledger.verify().ok
            (campaign,) = ledger.campaigns()
            events = ledger.events(campaign)
        state = fold(campaign, events)
        assert state.noise is not None and state.noise.runs >= 5
        assert state.stopped is not None

        # every bench ran as a dispatched workflow on the pinned commit, none twice
        dispatches = fake.dispatches()
        finished = [e for e in events if e.kind == "trial_finished"]
        assert len(dispatches) == len({d.inputs["trial"] for d in dispatches}) == len(finished)
        calibration = [d for d in dispatches if d.inputs["trial"].startswith("baseline-")]
        assert {d.inputs["sha"] for d in calibration} == {tuned_head}
        assert all(d.workflow.endswith("attune-bench.yml") for d in dispatches)
        # each dispatched run was predicted before it launched, as in a local campaign
        predicted = {e.payload["trial"] for e in events if e.kind == "prediction_made"}
        assert predicted == {d.inputs["trial"] for d in dispatches}

        # candidate pull requests into the tuned branch, gated, each merged or closed
        candidates = [p for p in fake.pulls() if p.head.startswith(f"attune/{campaign}/")]
        assert candidates, "the agent proposed nothing"
        for pull in candidates:
            assert pull.base == "tune-ported"
            assert {"attune", "attune:candidate"} <= set(pull.labels)
            assert pull.state == "closed"
            checks = {c.name: c.conclusion for c in fake.check_runs(pull.number)}
            assert checks[GATE_CHECK] in ("success", "failure")  # the workflow's
            assert checks[BASELINE_GATE_CHECK] in ("success", "failure")  # the bot's
            costs = [c for c in fake.comments(pull.number) if "<!-- attune:cost -->" in c.body]
            assert len(costs) == 1
            assert "Hypothesis" in pull.body and "Bottleneck" in pull.body
        merged = [p for p in candidates if p.merged]
        if merged:  # squash-merged into the tuned branch: its recipe is the last winner's
            last = max(merged, key=lambda p: p.merged_at)
            assert (
                fake.files_at("tune-ported")[RECIPE_PATH]
                == fake.files_at(last.head_sha)[RECIPE_PATH]
            )

        # ONE campaign comment on the tuned PR, edited in place; its total is the ledger's
        marked = [c for c in fake.comments(number) if "<!-- attune:campaign -->" in c.body]
        assert len(marked) == 1
        assert marked[0].updated_at > marked[0].created_at
        spent = re.search(r"\*\*Budget:\*\* ([0-9.]+) of", marked[0].body)
        assert spent is not None
        total = fold(events[0].campaign, events).spent_device_seconds / 3600
        assert float(spent.group(1)) == pytest.approx(total, abs=5e-5)

        operator = {"Authorization": f"Bearer {OPERATOR}"}
        (status,) = httpx.get(f"{app.url}/campaigns", headers=operator).json()
        assert status["campaign"] == campaign and status["tuned_pr"] == number
        assert status["spent_gpu_hours"] == pytest.approx(total, abs=1e-5)

        assert fake.violations == []
        assert fake.response_problems == []


def _events(app: object, kind: str) -> list[dict[str, object]]:
    return [e.payload for e in ledger_events(app) if e.kind == kind]  # type: ignore[arg-type]


def test_stop_then_resume_from_the_ledger(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        actions = ActionsPlayer(fake, app, tmp_path)  # played by hand, one run at a time
        comment(fake, app, number, "maintainer", "/attune tune budget=0.05 steps=4")
        wait_for(lambda: len(fake.dispatches()) == 1, timeout=30, what="the first dispatch")
        comment(fake, app, number, "maintainer", "/attune stop")
        wait_for(
            lambda: any("Stopping" in r for r in replies(fake, number)),
            timeout=20,
            what="the stop reply",
        )
        actions._run_new_dispatches()  # the running trial finishes; then the campaign stops
        wait_for(lambda: _events(app, "campaign_stopped"), timeout=60, what="the stop")
        assert _events(app, "campaign_stopped")[0]["reason"] == "requested"
        assert len(fake.dispatches()) == 1

        comment(fake, app, number, "reader", "/attune resume")
        wait_for(
            lambda: any("Sorry @reader" in r for r in replies(fake, number)),
            timeout=20,
            what="the refusal",
        )
        comment(fake, app, number, "maintainer", "/attune resume")
        wait_for(lambda: len(fake.dispatches()) == 2, timeout=30, what="the next dispatch")
        assert [e["by"] for e in _events(app, "campaign_resumed")] == ["maintainer"]
        assert any(r.startswith("Resuming `octo-org-models-pr1-1`") for r in replies(fake, number))
        trials = [d.inputs["trial"] for d in fake.dispatches()]
        assert trials == ["baseline-1", "baseline-2"]  # picked up where the ledger left off


def test_a_head_that_moves_during_the_campaign_stops_it(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        actions = ActionsPlayer(fake, app, tmp_path)
        comment(fake, app, number, "maintainer", "/attune tune budget=0.05 steps=4")
        wait_for(lambda: len(fake.dispatches()) == 1, timeout=30, what="the first dispatch")
        fake.commit(
            "tune-ported", {"README.md": "pushed during the campaign\n"}, author="maintainer"
        )
        actions._run_new_dispatches()
        wait_for(lambda: _events(app, "campaign_stopped"), timeout=60, what="the stop")
        (stopped,) = _events(app, "campaign_stopped")
        assert stopped["reason"] == "head_moved"
        assert "the head of tune-ported moved" in str(stopped["evidence"])
        assert len(fake.dispatches()) == 1  # nothing launched on the moved head
        wait_for(
            lambda: any("moved" in r for r in replies(fake, number)), timeout=20, what="the comment"
        )


def test_a_candidate_pushed_with_a_registry_change_is_never_benchmarked(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number), ActionsPlayer(fake, app, tmp_path):
        opened = fake.open_pull

        def open_then_tamper(head: str, base: str, *args: object, **kwargs: object) -> int:
            pr = opened(head, base, *args, **kwargs)  # type: ignore[arg-type]
            if head.startswith("attune/"):  # someone pushes onto the bot's branch at once
                fake.commit(head, {"registry/embedded.yaml": "keys: {}\n"}, author="mallory")
            return pr

        fake.open_pull = open_then_tamper  # type: ignore[method-assign]
        comment(fake, app, number, "maintainer", "/attune tune budget=0.05 steps=4")
        wait_for(lambda: _events(app, "campaign_stopped"), timeout=120, what="the stop")
        (stopped,) = _events(app, "campaign_stopped")
        assert stopped["reason"] == "error"
        assert "registry/embedded.yaml" in str(stopped["evidence"])
        trials = [d.inputs["trial"] for d in fake.dispatches()]
        assert [t for t in trials if re.fullmatch(r"c\d+", t)] == []  # the candidate never ran
        assert len([t for t in trials if t.startswith("baseline-")]) == 5
        wait_for(
            lambda: any("a candidate may change" in r for r in replies(fake, number)),
            timeout=20,
            what="the comment",
        )


def test_an_app_killed_mid_campaign_carries_on_after_a_restart(tmp_path: Path) -> None:
    """``attune serve`` is killed (-9) while a trial runs; the next app resumes the campaign
    from the ledger by itself, waits for the run the first one dispatched and charges it once."""
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        with serve_process(fake, tmp_path) as (url, _pid):
            payload = fake.webhooks.issue_comment(
                number, "maintainer", "/attune tune budget=0.05 steps=4"
            )
            fake.webhooks.deliver(f"{url}/webhook", "issue_comment", payload, SECRET)
            wait_for(lambda: len(fake.dispatches()) == 1, timeout=60, what="the first dispatch")

            def launched() -> bool:
                with Ledger(tmp_path / "ledger.db") as ledger:
                    return any(
                        e.kind == "trial_launched"
                        for c in ledger.campaigns()
                        for e in ledger.events(c)
                    )

            wait_for(launched, timeout=30, what="the launch in the ledger")
        # killed with -9 on leaving the block

        with App(fake, tmp_path) as app, ActionsPlayer(fake, app, tmp_path):
            wait_for(lambda: len(fake.dispatches()) >= 3, timeout=120, what="the campaign")
            trials = [d.inputs["trial"] for d in fake.dispatches()]
            assert trials[:3] == ["baseline-1", "baseline-2", "baseline-3"]
            first = _events(app, "trial_finished")[0]
            assert first["trial"] == "baseline-1" and first["reconciled"] is True
            finished = [p["trial"] for p in _events(app, "trial_finished")]
            assert finished.count("baseline-1") == 1  # charged once
            assert trials.count("baseline-1") == 1  # never dispatched twice
