"""Slash-command parsing and webhook signatures: pure functions, exact replies."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from bot.github.commands import Command, CommandError, parse
from bot.github.signature import sign, verify


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/attune tune", Command(verb="tune")),
        (
            "/attune tune budget=0.5 steps=20 agent=rules",
            Command(verb="tune", budget_hours=0.5, steps=20, agent="rules"),
        ),
        ("Looks good.\n\n  /attune status  \nthanks", Command(verb="status")),
        ("/attune stop", Command(verb="stop")),
        ("/attune resume", Command(verb="resume")),
        ("/attune help", Command(verb="help")),
        ("LGTM", None),
        ("see /attune tune in the docs", None),  # not at the start of a line
        ("/attuned tune", None),
    ],
)
def test_parse(body: str, expected: Command | None) -> None:
    assert parse(body) == expected


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("/attune", "`/attune` needs a command"),
        ("/attune tnue", "`tnue` is not an attune command"),
        ("/attune tune budget=lots", "`budget=lots` is not a number of GPU-hours"),
        ("/attune tune budget=-1", "must be a positive number of GPU-hours"),
        ("/attune tune budget=nan", "must be a positive number of GPU-hours"),
        ("/attune tune steps=1", "`steps=1` must be between 2 and 10000"),
        ("/attune tune steps=2.5", "`steps=2.5` is not a whole number"),
        (
            "/attune tune agent=oracle",
            "`agent=oracle` is not an agent (known: rules, claude, random, tpe, model)",
        ),
        ("/attune tune gpus=8", "`gpus` is not an argument of tune"),
        ("/attune tune budget", "`budget` is not `key=value`"),
        ("/attune tune budget=1 budget=2", "`budget` is given twice"),
        ("/attune stop now", "`/attune stop` takes no arguments"),
    ],
)
def test_malformed_commands_say_what_is_wrong_and_the_form(body: str, message: str) -> None:
    with pytest.raises(CommandError) as info:
        parse(body)
    text = str(info.value)
    assert message in text
    assert "/attune" in text  # the accepted form is part of the reply


def test_only_tune_stop_resume_need_write() -> None:
    needs = {v: Command(verb=v).needs_write for v in ("tune", "status", "stop", "resume", "help")}
    assert needs == {"tune": True, "status": False, "stop": True, "resume": True, "help": False}


def test_signature_matches_github_and_rejects_the_rest() -> None:
    body, secret = b'{"zen": "Keep it logically awesome."}', "It's a Secret to Everybody"
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    assert sign(body, secret) == expected
    assert verify(body, expected, secret)
    assert not verify(body + b" ", expected, secret)
    assert not verify(body, expected.replace("sha256=", "sha1="), secret)
    assert not verify(body, None, secret)
    assert not verify(body, "", secret)
    assert not verify(body, expected, "")  # no secret configured: nothing verifies
    flipped = expected[:-1] + ("0" if expected[-1] != "0" else "1")
    assert not verify(body, flipped, secret)
