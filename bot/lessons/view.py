"""What an agent sees of one lesson of the experience bank (``registry/lessons/*.yaml``).

The bank itself (the full lesson with its scope and evidence, the loader, scope matching and
the audit) is ``bot/lessons/bank.py``; an agent only gets the accepted lessons whose scope matches
its campaign, reduced to what it can act on.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

Effect = Literal["faster", "slower", "fails"]
"""What the lesson says its move does to tokens/s/device: faster, slower, or the run fails."""


class LessonView(BaseModel):
    """An accepted lesson whose scope matches the campaign."""

    model_config = ConfigDict(frozen=True)

    id: str
    claim: str
    """The lesson in one sentence, as people reviewed it."""
    levers: dict[str, str]
    """Registry key -> direction the lesson is about: ``up``, ``down`` or ``=value``."""
    effect: Effect
    gain_pct: float
    """Mean measured change of tokens/s/device over the lesson's evidence, in percent."""
    trials: int
    """How many cited trials back it."""
    bottleneck: str | None = None
    """The bottleneck the move relieves (compute, communication, cpu, ...), when the lesson
    names one."""
