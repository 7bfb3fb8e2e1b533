"""Re-check a lesson against the ledgers it cites (pure: the ledgers come in folded).

A lesson must be retired when its evidence is gone (the ledger, the campaign or a cited trial
is missing), when a cited trial did not make the move the lesson is about, when the measured
change the ledger holds is not the one the lesson cites, when the measured changes do not
support the claim's direction and size, or when its levers are no longer layout keys in the
registry of the installed framework it applies to. A lesson whose version range does not cover
the installed framework is noted (nobody reads it here) but not retired.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, Field

from bot.agents.levers.directions import FAILED, direction
from bot.lessons.bank import Evidence, Lesson
from bot.state.model import CampaignState, TrialRecord

TOLERANCE_PCT = 0.05
"""How far a cited change may be from the ledger's (rounding)."""


class Audit(BaseModel):
    """What re-checking one lesson found."""

    lesson: str
    file: str
    status: str
    problems: list[str] = Field(default_factory=list)
    """Reasons to retire it; empty: it holds."""
    notes: list[str] = Field(default_factory=list)

    @property
    def retire(self) -> bool:
        return self.status != "retired" and bool(self.problems)


def measured_pct(record: TrialRecord) -> float | None:
    gain = record.judged.gain if record.judged else None
    return None if gain is None else 100 * gain


def check_evidence(lesson: Lesson, cited: Evidence, state: CampaignState | str) -> list[str]:
    """Problems with one cited trial; ``state`` is its campaign folded from the ledger, or
    why it could not be read."""
    where = f"{cited.campaign}/{cited.trial}"
    if isinstance(state, str):
        return [f"{where}: {state}"]
    record = state.trials.get(cited.trial)
    if record is None or record.proposal is None:
        return [f"{where}: no such candidate trial in {cited.ledger}"]
    changes = record.proposal.changes
    moved = {k: direction(old, new) for k, (old, new) in changes.items()}
    if moved != lesson.levers:
        return [f"{where} moved {moved}, not the lesson's levers {lesson.levers}"]
    status = record.finished.status if record.finished else None
    if lesson.effect == "fails":
        return [] if status in FAILED else [f"{where} did not fail (status {status})"]
    pct = measured_pct(record)
    if pct is None:
        return [f"{where} has no measured change (status {status}, not judged on a score)"]
    if cited.delta_pct is None or abs(pct - cited.delta_pct) > TOLERANCE_PCT:
        return [f"{where}: the ledger measured {pct:+.2f}%, the lesson cites {cited.delta_pct}"]
    return []


def check_claim(lesson: Lesson, measured: list[float]) -> list[str]:
    """Do the ledger's changes support the claim's direction and size?"""
    if lesson.effect == "fails" or not measured:
        return []
    sign = 1.0 if lesson.effect == "faster" else -1.0
    against = [f"{m:+.2f}%" for m in measured if sign * m <= 0]
    if against:
        return [f"claims {lesson.effect}, but the ledger measured {', '.join(against)}"]
    mean = sum(measured) / len(measured)
    if sign * mean < lesson.min_gain_pct:
        return [
            f"claims at least {lesson.min_gain_pct:.1f}% {lesson.effect}; the evidence's mean "
            f"is {mean:+.2f}%"
        ]
    return []


def check_scope(
    lesson: Lesson, installed: str | None, layout_keys: set[str] | None
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the scope against the installed framework: ``installed`` is its
    version (None: not installed), ``layout_keys`` its registry's layout keys (None: none)."""
    framework = lesson.scope.framework
    if installed is None:
        return [], [f"{framework} is not installed here: scope not checked"]
    try:
        covered = Version(installed) in SpecifierSet(lesson.scope.versions)
    except InvalidVersion:
        covered = False
    if not covered:
        return [], [
            f"not read with the installed {framework} {installed} ({lesson.scope.versions})"
        ]
    if layout_keys is None:
        return [f"no registry covers the installed {framework} {installed}"], []
    gone = [k for k in lesson.levers if k not in layout_keys]
    if gone:
        names = ", ".join(gone)
        return [f"{names}: not a layout key in the {framework} {installed} registry"], []
    return [], []


def audit(
    file: str,
    lesson: Lesson,
    campaigns: dict[tuple[str, str], CampaignState | str],
    installed: str | None,
    layout_keys: set[str] | None,
) -> Audit:
    """The lesson re-checked; ``campaigns`` maps (ledger, campaign) to its folded state."""
    found = Audit(lesson=lesson.id, file=file, status=lesson.status)
    if lesson.status == "retired":
        return found
    measured = []
    for cited in lesson.evidence:
        state = campaigns[(cited.ledger, cited.campaign)]
        problems = check_evidence(lesson, cited, state)
        found.problems += problems
        if not problems and not isinstance(state, str):
            pct = measured_pct(state.trials[cited.trial])
            measured += [pct] if pct is not None else []
    found.problems += check_claim(lesson, measured)
    problems, notes = check_scope(lesson, installed, layout_keys)
    found.problems += problems
    found.notes += notes
    return found
