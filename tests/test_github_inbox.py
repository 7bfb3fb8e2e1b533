"""The app's front door under abuse: oversized bodies, bot comments, the same command twice,
racing commands, and a command accepted just before the app was killed."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx

from bot.github.inbox import Inbox
from bot.github.signature import sign
from tests.fakegithub import FakeGitHub
from tests.github_harness import (
    SECRET,
    App,
    comment,
    github_mode,
    ledger_events,
    replies,
    seed_repo,
    serve_process,
    wait_for,
)

MIB = 1024 * 1024


def test_bodies_over_25_mib_are_refused_before_being_read(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (_fake, app, _n):
        big = b"x" * (26 * MIB)
        headers = {"X-GitHub-Event": "issue_comment", "X-GitHub-Delivery": "big"}
        unsigned = httpx.post(f"{app.url}/webhook", content=big, headers=headers)
        assert unsigned.status_code == 401  # no signature header: the body is never read
        signed = dict(headers, **{"X-Hub-Signature-256": sign(big, SECRET)})
        declared = httpx.post(f"{app.url}/webhook", content=big, headers=signed)
        assert declared.status_code == 413  # even signed: over GitHub's own cap

        def chunks() -> object:  # no Content-Length: the server counts as it reads
            for _ in range(27):
                yield b"y" * MIB

        forged = dict(headers, **{"X-Hub-Signature-256": "sha256=" + "0" * 64})
        streamed = httpx.post(
            f"{app.url}/webhook",
            content=chunks(),  # type: ignore[arg-type]
            headers=forged,
        )
        assert streamed.status_code == 413
        assert ledger_events(app) == []


def test_comments_by_bots_are_never_commands(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        for login in (fake.bot_login, "other-app[bot]"):
            response = comment(fake, app, number, login, "/attune tune")
            assert response.json() == {"status": "ignored"}
        comment(fake, app, number, "maintainer", "/attune help")
        wait_for(lambda: replies(fake, number), timeout=10, what="the help reply")
        assert len(replies(fake, number)) == 1 and ledger_events(app) == []


def test_one_comment_is_one_command_whatever_its_deliveries(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        payload = fake.webhooks.issue_comment(number, "reader", "/attune help")
        body = json.dumps(payload).encode()
        answers = []
        for delivery in ("first-id", "second-id"):
            headers = {
                "X-GitHub-Event": "issue_comment",
                "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": sign(body, SECRET),
            }
            answers.append(httpx.post(f"{app.url}/webhook", content=body, headers=headers))
        assert answers[0].status_code == 202
        assert answers[1].json() == {"status": "command already received, ignored"}
        wait_for(lambda: replies(fake, number), timeout=10, what="the reply")
        inbox = app.app.state.inbox
        wait_for(lambda: inbox.pending() == 0, timeout=10, what="the queue")
        assert [d for d, _ in inbox.handled()] == ["first-id"]


def test_racing_tune_commands_start_one_campaign(tmp_path: Path) -> None:
    with github_mode(tmp_path, workers=4) as (fake, app, number):
        payloads = [
            fake.webhooks.issue_comment(number, "maintainer", "/attune tune budget=0.05 steps=4")
            for _ in range(4)
        ]
        go = threading.Barrier(len(payloads))

        def send(payload: dict[str, object]) -> None:
            go.wait()
            fake.webhooks.deliver(f"{app.url}/webhook", "issue_comment", payload, SECRET)

        threads = [threading.Thread(target=send, args=(p,)) for p in payloads]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wait_for(lambda: len(replies(fake, number)) >= 4, timeout=30, what="four replies")
        opened = [e for e in ledger_events(app) if e.kind == "campaign_opened"]
        assert len(opened) == 1
        started = [r for r in replies(fake, number) if r.startswith("Started campaign")]
        assert len(started) == 1
        others = [r for r in replies(fake, number) if not r.startswith("Started campaign")]
        assert all("already running" in r or "being started" in r for r in others), others


def test_a_command_accepted_before_a_kill_runs_once_after_the_restart(tmp_path: Path) -> None:
    """The app answers 202 only after the command is on disk: killed (-9) before any worker
    touched it, the next app runs it, once, and a redelivery of it is still a duplicate."""
    with FakeGitHub() as fake:
        number = seed_repo(fake)
        payload = fake.webhooks.issue_comment(number, "reader", "/attune help")
        with serve_process(fake, tmp_path, ATTUNE_WORKERS="0") as (url, _pid):
            accepted = fake.webhooks.deliver(
                f"{url}/webhook", "issue_comment", payload, SECRET, delivery="before-the-kill"
            )
            assert accepted.status_code == 202
        # killed with -9 on leaving the block; nothing was handled
        assert replies(fake, number) == []
        with App(fake, tmp_path) as app:
            wait_for(lambda: replies(fake, number), timeout=20, what="the reply after restart")
            inbox = app.app.state.inbox
            wait_for(lambda: inbox.pending() == 0, timeout=10, what="the queue")
            again = fake.webhooks.deliver(
                f"{app.url}/webhook", "issue_comment", payload, SECRET, delivery="before-the-kill"
            )
            # refused at the door: nothing was queued, so there is nothing to wait for
            assert again.json()["status"].startswith("duplicate")
            assert inbox.pending() == 0
            assert len(replies(fake, number)) == 1
            assert len(inbox.handled()) == 1


def test_the_inbox_prunes_by_age_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "inbox.db"
    inbox = Inbox(path, retention_s=3600.0)
    assert inbox.accept("d1", "issue_comment", command={"n": 1}, comment_id=7) == "queued"
    assert inbox.accept("d1", "issue_comment", command={"n": 1}, comment_id=7) == (
        "duplicate delivery"
    )
    inbox.close()
    reopened = Inbox(path, retention_s=3600.0)
    assert reopened.ready.is_set()  # a queued command from before is there to drain
    item = reopened.take()
    assert item is not None and item.payload == {"n": 1} and item.attempts == 0
    reopened.done(item.seq)
    reopened.retention_s = 0.0
    reopened.prune()
    assert reopened.accept("d1", "issue_comment", command={"n": 1}, comment_id=7) == "queued"
    reopened.close()


def test_a_queued_command_goes_to_one_worker_only(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path / "inbox.db")
    inbox.accept("d1", "issue_comment", command={"n": 1}, comment_id=1)
    first, second = inbox.take(), inbox.take()
    assert first is not None and second is None  # started by the first worker
    inbox.close()
    again = Inbox(tmp_path / "inbox.db")  # a restart: what was started and not done is queued
    taken = again.take()
    assert taken is not None and taken.seq == first.seq and taken.attempts == 1
    again.close()
