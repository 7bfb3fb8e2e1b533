"""What a finished campaign proposes to the experience bank (pure: from its folded state).

A candidate that was merged (it beat the noise threshold) says its move is faster; one closed
as slower by more than the threshold says it is slower; one whose run failed (crash, out of
memory, NaN) says it fails. A change within the noise, a gate rejection or an interrupted run
teaches nothing and proposes nothing. Each lesson is proposed with a narrow scope (this
framework version, this hardware, model sizes within 2x of this one) for the reviewer to
widen, and ``status: proposed``: only a reviewer makes it ``accepted``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from bot.agents.levers.directions import FAILED, direction
from bot.lessons.bank import CampaignFacts, Evidence, Lesson, ParamRange, Scope
from bot.lessons.view import Effect
from bot.state.model import CampaignState, TrialRecord


def _size(params: float) -> str:
    for suffix, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if params >= scale:
            return f"{params / scale:.3g}{suffix}"
    return f"{params:.0f}"


def _moves(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changes.items())


def lesson_id(campaign: str, trial: str, learnt: str = "") -> str:
    """A lesson's id: what was learnt first (``threads-up-faster``), then where (the campaign,
    and the trial unless the campaign has the same name: ``c2``, not ``c2-c2``)."""
    parts = [learnt, campaign] + ([] if trial == campaign else [trial])
    slug = re.sub(r"[^a-z0-9._-]+", "-", "-".join(p for p in parts if p).lower())
    return re.sub(r"-{2,}", "-", slug).strip("-._")


def _learnt(changes: dict[str, Any], effect: str) -> str:
    """``threads-up-faster``: each lever's direction, then the effect."""
    moves = "-".join(f"{k}-{direction(old, new).lstrip('=')}" for k, (old, new) in changes.items())
    return f"{moves}-{effect}"


def _outcome(record: TrialRecord) -> tuple[Effect, float | None, float] | None:
    """(effect, measured change in percent, threshold in percent), or None: nothing learnt."""
    judged, finished = record.judged, record.finished
    threshold = 100 * ((judged.threshold if judged else None) or 0.0)
    if (finished and finished.interrupted) or record.gate_verdict == "reject":
        return None
    if finished and finished.status in FAILED:
        return "fails", None, threshold
    gain = judged.gain if judged else None
    if judged is None or gain is None:
        return None
    pct = round(100 * gain, 2)
    if judged.decision == "merge" and pct > 0:
        return "faster", pct, threshold
    if pct <= -threshold:
        return "slower", pct, threshold
    return None


def _size_claim(threshold: float, pct: float | None) -> float:
    """The claim's size: the noise threshold the trial was judged against, or the measured
    change where that is smaller (a merge decided by re-measurement, ``docs/judgement.md``)."""
    if pct is None:
        return 0.0
    return math.floor(10 * min(threshold, abs(pct))) / 10


def propose(state: CampaignState, facts: CampaignFacts, ledger: str) -> list[Lesson]:
    """The lessons ``state``'s candidates support, citing ``ledger`` (its path as the campaign
    wrote it; the reviewer commits the ledger and points the evidence at it)."""
    scope = Scope(
        framework=facts.framework,
        versions=f"=={facts.version}",
        hardware=[facts.hardware or "any"],
        model_params=(
            ParamRange(min=facts.model_params / 2, max=facts.model_params * 2)
            if facts.model_params
            else None
        ),
    )
    where = f"{facts.framework} {facts.version}, {facts.hardware or 'any hardware'}"
    if facts.model_params:
        where += f", a ~{_size(facts.model_params)}-parameter model"
    out = []
    for record in state.candidates:
        proposal, outcome = record.proposal, _outcome(record)
        if outcome is None or proposal is None or not proposal.changes:
            continue
        effect, pct, threshold = outcome
        changes = proposal.changes
        if effect == "fails":
            status = record.finished.status if record.finished else None
            claim = f"{_moves(changes)} makes the run fail ({status}) on {where}"
        else:
            reason = record.judged.reason if record.judged else ""
            claim = (
                f"{_moves(changes)} makes tokens/s/device {effect} on {where}: {pct:+.1f}% "
                f"against the incumbent in {record.trial} ({reason})"
            )
        out.append(
            Lesson(
                id=lesson_id(state.campaign, record.trial, _learnt(changes, effect)),
                status="proposed",
                claim=claim,
                levers={k: direction(old, new) for k, (old, new) in changes.items()},
                effect=effect,
                min_gain_pct=_size_claim(threshold, pct),
                bottleneck=proposal.bottleneck,
                scope=scope,
                evidence=[
                    Evidence(
                        ledger=ledger, campaign=state.campaign, trial=record.trial, delta_pct=pct
                    )
                ],
            )
        )
    return out


def lesson_file(lessons: list[Lesson]) -> str:
    """The YAML of a lesson file holding ``lessons``."""
    body = {"lessons": [lesson.model_dump(mode="json", exclude_none=True) for lesson in lessons]}
    return yaml.safe_dump(body, sort_keys=False, width=100)
