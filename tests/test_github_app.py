"""The GitHub App over real HTTP: signatures, redeliveries, commands, permissions, forks.

Every test drives the real FastAPI app under uvicorn with recorded-payload webhooks, against
the GitHub-compatible server in tests/fakegithub; no campaign runs a benchmark here.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from bot.github.signature import sign
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


def test_health_is_open_and_campaigns_is_off_without_an_operator_token(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (_fake, app, _n):
        assert httpx.get(f"{app.url}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{app.url}/campaigns").status_code == 404
        wrong = {"Authorization": "Bearer guess"}
        assert httpx.get(f"{app.url}/campaigns", headers=wrong).status_code == 404


def test_campaigns_needs_the_operator_token(tmp_path: Path) -> None:
    with github_mode(tmp_path, operator_token="s3cret-operator") as (_fake, app, _n):
        assert httpx.get(f"{app.url}/campaigns").status_code == 401
        wrong = {"Authorization": "Bearer s3cret-operatoR"}
        assert httpx.get(f"{app.url}/campaigns", headers=wrong).status_code == 401
        right = {"Authorization": "Bearer s3cret-operator"}
        assert httpx.get(f"{app.url}/campaigns", headers=right).json() == []


def test_forged_or_unsigned_webhooks_are_401_and_nothing_happens(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        payload = fake.webhooks.issue_comment(number, "maintainer", "/attune tune")
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": "d-1",
            "Content-Type": "application/json",
        }
        for signature in (None, sign(body, "wrong-secret"), "sha256=" + "0" * 64):
            sent = dict(headers)
            if signature:
                sent["X-Hub-Signature-256"] = signature
            response = httpx.post(f"{app.url}/webhook", content=body, headers=sent)
            assert response.status_code == 401
        # a body changed after signing
        signed = dict(headers, **{"X-Hub-Signature-256": sign(body, SECRET)})
        tampered = body.replace(b"/attune tune", b"/attune stop")
        assert httpx.post(f"{app.url}/webhook", content=tampered, headers=signed).status_code == 401
        assert replies(fake, number) == []
        assert all(not fake.reactions(c.id) for c in fake.comments(number))
        assert ledger_events(app) == []


def test_help_gets_eyes_and_a_reply_and_a_redelivery_does_nothing_twice(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        payload = fake.webhooks.issue_comment(number, "reader", "/attune help")
        body = json.dumps(payload).encode()
        headers = {
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": "same-id",
            "X-Hub-Signature-256": sign(body, SECRET),
            "Content-Type": "application/json",
        }
        first = httpx.post(f"{app.url}/webhook", content=body, headers=headers)
        assert first.status_code == 202
        wait_for(lambda: replies(fake, number), timeout=10, what="the help reply")
        again = httpx.post(f"{app.url}/webhook", content=body, headers=headers)
        assert again.json() == {"status": "duplicate delivery, ignored"}
        (reply,) = replies(fake, number)
        assert "/attune tune [budget=<gpu-hours>]" in reply
        command = next(c for c in fake.comments(number) if c.body == "/attune help")
        assert [r.content for r in fake.reactions(command.id)] == ["eyes"]


def test_edited_comments_and_plain_chat_are_not_commands(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        edited = comment(fake, app, number, "maintainer", "/attune tune", action="edited")
        chat = comment(fake, app, number, "maintainer", "nice speedup!")
        assert edited.json() == {"status": "ignored"}
        assert chat.json() == {"status": "ignored"}  # not queued: nothing can answer it later
        # a command delivered after them is answered; nothing else ever is
        comment(fake, app, number, "maintainer", "/attune help")
        wait_for(lambda: replies(fake, number), timeout=10, what="the help reply")
        inbox = app.app.state.inbox
        wait_for(lambda: inbox.pending() == 0, timeout=10, what="the queue to drain")
        assert len(inbox.handled()) == 1  # the help command, and only it, was ever handled
        (reply,) = replies(fake, number)
        assert "/attune tune [budget=<gpu-hours>]" in reply
        chat_comment = next(c for c in fake.comments(number) if c.body == "nice speedup!")
        assert fake.reactions(chat_comment.id) == []
        assert ledger_events(app) == [] and fake.dispatches() == []


def test_malformed_arguments_get_the_accepted_form(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        comment(fake, app, number, "maintainer", "/attune tune budget=lots")
        wait_for(lambda: replies(fake, number), timeout=10, what="the reply")
        (reply,) = replies(fake, number)
        assert "`budget=lots` is not a number of GPU-hours" in reply
        assert "/attune tune [budget=<gpu-hours>] [steps=N]" in reply
        assert "[agent=rules|claude|random|tpe]" in reply
        assert ledger_events(app) == []


def test_read_only_commenter_is_refused_politely(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        comment(fake, app, number, "reader", "/attune tune")
        wait_for(lambda: replies(fake, number), timeout=10, what="the refusal")
        (reply,) = replies(fake, number)
        assert reply.startswith("Sorry @reader, `/attune tune` needs write, maintain or admin")
        assert fake.dispatches() == [] and ledger_events(app) == []


def test_fork_pull_requests_are_never_benchmarked(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, _n):
        fake.fork_repo("outsider")
        fork = "outsider/models"
        fake.commit("main", {RECIPE_PATH: recipe_text(threads=2)}, repo=fork, author="outsider")
        number = fake.open_pull("main", "main", "Faster", user="outsider", fork=True)
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: replies(fake, number), timeout=10, what="the refusal")
        (reply,) = replies(fake, number)
        assert "never benchmarks pull requests from forks" in reply
        assert fake.dispatches() == [] and ledger_events(app) == []


def test_a_pull_request_touching_the_registry_is_refused(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        fake.commit(
            "tune-ported", {"registry/embedded.yaml": "framework: embedded\n"}, author="maintainer"
        )
        comment(fake, app, number, "maintainer", "/attune tune")
        wait_for(lambda: replies(fake, number), timeout=10, what="the refusal")
        (reply,) = replies(fake, number)
        assert reply.startswith("Refused: this pull request changes `registry/embedded.yaml`")
        assert fake.dispatches() == [] and ledger_events(app) == []


def test_repositories_not_allowed_are_ignored(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        payload = fake.webhooks.issue_comment(number, "maintainer", "/attune tune")
        payload["repository"]["full_name"] = "someone/else"
        response = fake.webhooks.deliver(f"{app.url}/webhook", "issue_comment", payload, SECRET)
        assert response.json() == {"status": "repository not allowed, ignored"}
        assert replies(fake, number) == []


def test_no_violations_of_the_rest_description(tmp_path: Path) -> None:
    with github_mode(tmp_path) as (fake, app, number):
        comment(fake, app, number, "reader", "/attune status")
        wait_for(lambda: replies(fake, number), timeout=10, what="the status reply")
        assert "No attune campaign on this pull request yet" in replies(fake, number)[0]
        assert fake.violations == []
        assert fake.response_problems == []


def test_each_verb_is_answered_by_its_own_handler_behind_one_screening(tmp_path: Path) -> None:
    """The rule production uses (``Command.needs_write``): stop and resume are screened like
    tune; status and help are open to everyone."""
    with github_mode(tmp_path) as (fake, app, number):
        for body in ("/attune stop", "/attune resume", "/attune status", "/attune help"):
            comment(fake, app, number, "reader", body)
        wait_for(lambda: len(replies(fake, number)) == 4, timeout=20, what="four replies")
        verbs = ("stop", "resume", "status", "help")
        by_verb = dict(zip(verbs, replies(fake, number), strict=True))
        for verb in ("stop", "resume"):
            assert by_verb[verb].startswith(f"Sorry @reader, `/attune {verb}` needs write")
        assert by_verb["status"].startswith("No attune campaign on this pull request yet")
        assert "/attune tune [budget=<gpu-hours>]" in by_verb["help"]
