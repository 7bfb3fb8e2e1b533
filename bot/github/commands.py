"""Slash commands in pull-request comments: ``/attune tune|status|stop|resume|help``.

Pure parsing: a comment body becomes a ``Command``, ``None`` (not addressed to attune), or a
``CommandError`` whose message says what is wrong and the accepted form. The app decides who may
run what.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel

from bot.campaign.setup import AGENTS
from gate.errors import AttuneError

PREFIX = "/attune"
MAX_STEPS = 10_000

Verb = Literal["tune", "status", "stop", "resume", "help"]
WRITE_VERBS: frozenset[str] = frozenset({"tune", "stop", "resume"})
"""Verbs that start or stop work: write, maintain or admin permission only."""

TUNE_FORM = (
    "/attune tune [budget=<gpu-hours>] [steps=N] [agent=rules|claude|random|tpe] [lessons=off] "
    "[sha=<head commit>]"
)

USAGE = f"""\
`{TUNE_FORM}`: tune this PR's recipe
`/attune status`: where the campaign on this pull request stands
`/attune stop`: stop the campaign after the current trial
`/attune resume`: continue a stopped or interrupted campaign
`/attune help`: this message"""

FORMS = {
    "tune": TUNE_FORM,
    "status": "/attune status",
    "stop": "/attune stop",
    "resume": "/attune resume",
    "help": "/attune help",
}


class Command(BaseModel):
    verb: Verb
    budget_hours: float | None = None
    steps: int | None = None
    agent: str | None = None
    lessons: bool | None = None
    """False: ``lessons=off``, the agent does not read the experience bank (ablation)."""
    sha: str | None = None
    """``sha=``: the head commit the comment means (7 to 40 hex digits); the campaign is
    refused unless the pull request's head is that commit."""

    @property
    def needs_write(self) -> bool:
        return self.verb in WRITE_VERBS


class CommandError(AttuneError):
    """A comment addressed to attune that is not a valid command; the message is the reply."""


def _budget(value: str) -> float:
    try:
        hours = float(value)
    except ValueError:
        raise CommandError(f"`budget={value}` is not a number of GPU-hours") from None
    if not math.isfinite(hours) or hours <= 0:
        raise CommandError(f"`budget={value}` must be a positive number of GPU-hours")
    return hours


def _steps(value: str) -> int:
    if not value.isdigit():
        raise CommandError(f"`steps={value}` is not a whole number")
    steps = int(value)
    if not 2 <= steps <= MAX_STEPS:
        raise CommandError(f"`steps={value}` must be between 2 and {MAX_STEPS}")
    return steps


def _agent(value: str) -> str:
    if value not in AGENTS:
        raise CommandError(f"`agent={value}` is not an agent (known: {', '.join(AGENTS)})")
    return value


def _lessons(value: str) -> bool:
    if value not in ("on", "off"):
        raise CommandError(f"`lessons={value}` is not `on` or `off`")
    return value == "on"


def _sha(value: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{7,40}", value):
        raise CommandError(f"`sha={value}` is not a commit (7 to 40 hex digits)")
    return value


PARSERS = {
    "budget": _budget,
    "steps": _steps,
    "agent": _agent,
    "lessons": _lessons,
    "sha": _sha,
}


def over_the_caps(command: Command, *, max_budget_hours: float, max_steps: int) -> str | None:
    """The reply refusing a tune that asks for more than the operator allows
    (``ATTUNE_MAX_BUDGET_HOURS``, ``ATTUNE_MAX_STEPS``), or None."""
    if command.budget_hours is not None and command.budget_hours > max_budget_hours:
        return (
            f"`budget={command.budget_hours:g}` is over this installation's cap of "
            f"{max_budget_hours:g} GPU-hours per campaign: ask for at most "
            f"`budget={max_budget_hours:g}` (the operator sets the cap)."
        )
    if command.steps is not None and command.steps > max_steps:
        return (
            f"`steps={command.steps}` is over this installation's cap of {max_steps} steps per "
            f"benchmark: ask for at most `steps={max_steps}` (the operator sets the cap)."
        )
    return None


def command_line(body: str) -> str | None:
    """The comment's first line addressed to attune (starting with ``/attune``), or None: the
    webhook's test of whether a comment is for attune; ``parse`` reads the line itself."""
    return next(
        (ln.strip() for ln in body.splitlines() if ln.strip().split(" ", 1)[0] == PREFIX),
        None,
    )


def parse(body: str) -> Command | None:
    """The command in ``body``: its first line that starts with ``/attune``.

    None when no line does (the comment is not for attune). Raises CommandError for a line that
    does but is not a valid command.
    """
    line = command_line(body)
    if line is None:
        return None
    words = line.split()[1:]
    if not words:
        raise CommandError(f"`{PREFIX}` needs a command.\n\n{USAGE}")
    verb, args = words[0], words[1:]
    if verb not in FORMS:
        raise CommandError(f"`{verb}` is not an attune command.\n\n{USAGE}")
    if verb != "tune":
        if args:
            raise CommandError(f"`{PREFIX} {verb}` takes no arguments: use `{FORMS[verb]}`")
        return Command(verb=verb)
    values: dict[str, object] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or not value:
            raise CommandError(f"`{arg}` is not `key=value`: use `{FORMS['tune']}`")
        if key not in PARSERS:
            raise CommandError(f"`{key}` is not an argument of tune: use `{FORMS['tune']}`")
        if key in values:
            raise CommandError(f"`{key}` is given twice: use `{FORMS['tune']}`")
        try:
            values[key] = PARSERS[key](value)
        except CommandError as exc:
            raise CommandError(f"{exc}: use `{FORMS['tune']}`") from None
    return Command(
        verb="tune",
        budget_hours=values.get("budget"),
        steps=values.get("steps"),
        agent=values.get("agent"),
        lessons=values.get("lessons"),
        sha=values.get("sha"),
    )
