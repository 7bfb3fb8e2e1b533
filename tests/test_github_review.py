"""GitHub mode's review findings: the operator caps what a comment may ask for, the tuned head
is the one the comment meant, a pull request GitHub cannot fully list or not into the default
branch is refused, and errors reach pull requests as a short line (the whole text in the log).

The real app under uvicorn against the fake GitHub, as in test_github_app.py.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import jwt
import pytest

from bot.github.settings import Settings
from tests.github_harness import (
    RECIPE_PATH,
    SECRET,
    comment,
    github_mode,
    ledger_events,
    recipe_text,
    replies,
    wait_for,
)


def _the_reply(fake: object, number: int) -> str:
    wait_for(lambda: replies(fake, number), timeout=15, what="the reply")  # type: ignore[arg-type]
    (reply,) = replies(fake, number)  # type: ignore[arg-type]
    return reply


def test_budget_and_steps_over_the_operators_caps_are_refused_with_the_cap(
    tmp_path: Path,
) -> None:
    with github_mode(tmp_path, max_budget_hours=0.5, max_steps=100) as (fake, app, number):
        comment(fake, app, number, "maintainer", "/attune tune budget=2")
        reply = _the_reply(fake, number)
        assert "`budget=2` is over this installation's cap of 0.5 GPU-hours" in reply
        assert "`budget=0.5`" in reply
        comment(fake, app, number, "maintainer", "/attune tune steps=500")
        wait_for(lambda: len(replies(fake, number)) == 2, timeout=15, what="the second reply")
        assert (
            "`steps=500` is over this installation's cap of 100 steps" in replies(fake, number)[1]
        )
        assert ledger_events(app) == [] and fake.dispatches() == []


def test_a_default_budget_over_the_cap_is_a_settings_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"default_budget \(5\) is over max_budget_hours \(1\)"):
        Settings(
            app_id=1,
            private_key_path=tmp_path / "app.pem",
            webhook_secret="s",
            default_budget=5.0,
            max_budget_hours=1.0,
        )


def test_a_pull_request_not_into_the_default_branch_is_refused(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, _n):
        fake.create_branch("release")
        number = fake.open_pull("tune-ported", "release", "Into release", user="maintainer")
        comment(fake, app, number, "maintainer", "/attune tune")
        reply = _the_reply(fake, number)
        assert reply.startswith("Refused: this pull request is into `release`, not the default")
        assert ledger_events(app) == [] and fake.dispatches() == []


def test_a_pull_request_with_more_files_than_github_lists_is_refused(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        fake.pull_files_limit = 1  # GitHub's is 3,000
        fake.commit("tune-ported", {"notes/readme.md": "hello\n"}, author="maintainer")
        comment(fake, app, number, "maintainer", "/attune tune")
        reply = _the_reply(fake, number)
        assert "changes 2 files, and GitHub lists only 1 of them" in reply
        assert ledger_events(app) == [] and fake.dispatches() == []


def test_a_push_after_the_comment_is_refused(tmp_path: Path) -> None:
    """The comment is made, then the branch is pushed to, then the delivery reaches the app
    (as when the worker is busy): the head is no longer what the commenter meant."""
    with github_mode(tmp_path) as (fake, app, number):
        payload = fake.webhooks.issue_comment(number, "maintainer", "/attune tune")
        meant = fake.head("tune-ported")
        time.sleep(1.1)  # GitHub's timestamps are whole seconds
        pushed = fake.commit(
            "tune-ported", {RECIPE_PATH: recipe_text(threads=3)}, author="maintainer"
        )
        fake.webhooks.deliver(f"{app.url}/webhook", "issue_comment", payload, SECRET)
        reply = _the_reply(fake, number)
        assert "`tune-ported` was pushed to after your comment" in reply
        assert f"/attune tune sha={pushed[:12]}" in reply
        assert ledger_events(app) == [] and fake.dispatches() == []
        # naming the commit the comment meant is refused too: the head is another one
        comment(fake, app, number, "maintainer", f"/attune tune sha={meant[:10]}")
        wait_for(lambda: len(replies(fake, number)) == 2, timeout=15, what="the second reply")
        assert (
            f"`sha={meant[:10]}` is not the head of this pull request" in replies(fake, number)[1]
        )
        assert ledger_events(app) == []


def test_without_githubs_record_of_pushes_the_commit_must_be_named(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        fake.activity_api = False
        head = fake.head("tune-ported")
        comment(fake, app, number, "maintainer", "/attune tune")
        reply = _the_reply(fake, number)
        assert "does not say when the branch was last pushed to" in reply
        assert f"`/attune tune sha={head[:12]}`" in reply
        assert ledger_events(app) == []


def test_naming_the_head_binds_the_campaign_to_it(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        head = fake.head("tune-ported")
        comment(fake, app, number, "maintainer", f"/attune tune sha={head[:12]}")
        reply = _the_reply(fake, number)
        assert reply.startswith("Started campaign") and f"at {head[:7]}" in reply
        opened = [e for e in ledger_events(app) if e.kind == "campaign_opened"]
        assert opened and opened[0].payload["head_sha"] == head


def test_an_error_reaches_the_pull_request_as_a_short_line_and_the_log_has_it_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A campaign whose Slurm cluster is unreachable stops; slurmrestd's address and the
    request's path are in the bot's log, not on the pull request."""
    url = "http://127.0.0.1:9"  # discard: nothing listens
    token = jwt.encode({"sun": "ana", "exp": int(time.time()) + 600}, "k" * 32)
    for key, value in {
        "URL": url,
        "TOKEN": token,
        "USER": "ana",
        "RETRIES": "0",
        "HTTP_TIMEOUT_S": "2",
    }.items():
        monkeypatch.setenv(f"ATTUNE_SLURM_{key}", value)
    caplog.set_level(logging.ERROR, logger="attune.github")
    with github_mode(tmp_path, slurm_url=url) as (fake, app, number):
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: len(replies(fake, number)) == 2, timeout=60, what="the stop reply")
        stopped = replies(fake, number)[1]
        assert "stopped:" in stopped and "details in the bot's log, ref " in stopped
        assert "127.0.0.1" not in stopped and "http" not in stopped
        reference = stopped.split("ref ")[1].split(")")[0]
        logged = [r.getMessage() for r in caplog.records if reference in r.getMessage()]
        assert logged and url in logged[0]
