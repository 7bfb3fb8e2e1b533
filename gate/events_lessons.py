"""Ledger events of the experience bank (``docs/lessons.md``)."""

from __future__ import annotations

from gate.event_base import Event


class LessonsProposed(Event):
    """The end of a campaign: the lessons it proposes, as a pull request for review."""

    KIND = "lessons_proposed"
    lessons: list[str]
    """Ids of the proposed lessons (empty: nothing the trials support; no pull request)."""
    pr: int | None = None
    branch: str | None = None
    path: str | None = None
    """The lesson file the pull request adds (``registry/lessons/<campaign>.yaml``)."""
