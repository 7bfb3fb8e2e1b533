"""How the rules agent uses the experience bank: which accepted lesson speaks for or against a
move, so lesson-backed moves go first and moves a lesson says lose are skipped."""

from __future__ import annotations

from typing import Any

from bot.agents.levers.directions import direction
from bot.lessons.view import LessonView


def lesson_about(
    changes: dict[str, Any], old: dict[str, Any], lessons: list[LessonView]
) -> LessonView | None:
    """The lesson whose levers are exactly this move's keys, each moved its way; the one with
    the most evidence (then the largest measured change) when several are."""
    moves = {k: direction(old[k], new) for k, new in changes.items()}
    found = [lesson for lesson in lessons if lesson.levers == moves]
    found.sort(key=lambda lesson: (-lesson.trials, -abs(lesson.gain_pct)))
    return found[0] if found else None


def cite(lesson: LessonView) -> str:
    """The lesson as a hypothesis names it."""
    runs = f"{lesson.trials} trial{'s' if lesson.trials != 1 else ''}"
    return f"lesson {lesson.id} ({runs}, {lesson.gain_pct:+.1f}%): {lesson.claim}"
