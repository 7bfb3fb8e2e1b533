"""The experience bank in a campaign: the lessons its agent reads, and the lessons it proposes.

``lessons_for`` reads the bank and keeps the accepted lessons whose scope matches the campaign
(none when it was opened with ``--no-lessons``). ``propose_lessons`` is the campaign's last
step: the lessons its merged and refused candidates support go to people as ONE pull request
through the forge (``status: proposed``; nothing enters the bank without review), and
``lessons_proposed`` is written to the ledger, so a bot restarted after that step does not open
a second one (and one killed between the two finds its pull request again by its branch,
``attune-lessons/<campaign>``: outside ``attune/<campaign>/``, where the candidates are).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.interfaces import Forge, ForgeError
from bot.lessons.bank import CampaignFacts, Lesson, campaign_facts, load_bank, matching
from bot.lessons.mining import lesson_file, lesson_id, propose
from bot.lessons.view import LessonView
from bot.render.words import count
from gate.events import CampaignOpened
from gate.models import EffectiveConfig, Recipe
from gate.recipe import parse_recipe

if TYPE_CHECKING:
    from bot.campaign.context import CampaignContext

FINAL = ("budget", "exhausted", "max_trials")
"""Stops after which the campaign is over (the others can be resumed, or taught nothing)."""
LABELS = ["attune", "attune:lessons"]


def lessons_for(
    params: CampaignOpened,
    effective: EffectiveConfig,
    recipe: Recipe,
    directory: Path | None = None,
) -> list[LessonView]:
    """The accepted lessons of the bank in ``directory`` (default ``registry/lessons/``) whose
    scope matches the campaign's baseline; none with ``--no-lessons``."""
    if not params.lessons:
        return []
    bank = [lesson for _, lesson in load_bank(directory)]
    return matching(bank, campaign_facts(effective, recipe.body))


def lessons_body(campaign: str, lessons: list[Lesson], facts: CampaignFacts) -> str:
    """The pull request's description: what each lesson claims and what to check."""
    rows = "\n".join(
        f"| `{lesson.id}` | {lesson.effect} | "
        + ", ".join(f"`{k}` {d}" for k, d in lesson.levers.items())
        + f" | {', '.join(e.trial for e in lesson.evidence)} | "
        + (f"{lesson.mean_delta_pct:+.2f}%" if lesson.effect != "fails" else "failed")
        + " |"
        for lesson in lessons
    )
    ledger = lessons[0].evidence[0].ledger
    return (
        f"Lessons the trials of campaign `{campaign}` support ({facts.framework} "
        f"{facts.version}, {facts.hardware or 'hardware not declared'}), proposed for review.\n\n"
        "| lesson | effect | levers | trials | measured |\n|---|---|---|---|---|\n"
        f"{rows}\n\n"
        "Each lesson is `status: proposed`; agents read only `accepted` ones. To accept one: "
        f"check its claim and scope (widen them only with evidence), commit the ledger "
        f"(`{ledger}`) under `registry/lessons/evidence/` and point `evidence[].ledger` at it, "
        "set `status: accepted`, and run `attune lessons audit` before merging "
        "(docs/lessons.md)."
    )


def open_lessons_pr(
    forge: Forge, campaign: str, tuned_pr: int, lessons: list[Lesson], facts: CampaignFacts
) -> dict[str, Any]:
    """Open (or find again, by its branch) the pull request adding ``lessons`` as one file,
    into the branch the tuned pull request merges into; the ``lessons_proposed`` payload."""
    base = forge.get(tuned_pr).base
    path = f"registry/lessons/{lesson_id(campaign, 'proposed')}.yaml"
    pr = forge.open_candidate(
        branch=f"attune-lessons/{campaign}",
        base=base,
        base_sha=forge.head_sha(base),
        recipe_path=path,
        recipe_text=lesson_file(lessons),
        title=f"attune: {count(len(lessons), 'lesson')} from campaign {campaign}",
        body=lessons_body(campaign, lessons, facts),
        labels=LABELS,
    )
    return {"lessons": [x.id for x in lessons], "pr": pr.number, "branch": pr.head, "path": path}


def propose_lessons(ctx: CampaignContext) -> None:
    """The end-of-campaign step (a no-op before a final stop, and after it was done)."""
    state = ctx.state()
    params = state.params
    if params is None or state.stopped is None or state.stopped.reason not in FINAL:
        return
    if state.lessons_proposed is not None:
        return
    recipe = parse_recipe(params.recipe_text, path=params.recipe_path)
    facts = campaign_facts(ctx.baseline_effective(state), recipe.body)
    lessons = propose(state, facts, str(ctx.ledger.path))
    if not lessons or state.tuned_pr is None:
        return  # nothing to review: no pull request, no event (mining again finds nothing)
    try:
        record = open_lessons_pr(ctx.forge, ctx.name, state.tuned_pr, lessons, facts)
    except ForgeError as exc:  # the campaign is done; a resume tries again
        ctx.progress.update(state, "lessons", f"no pull request for its lessons: {exc}")
        return
    ctx.ledger.append(ctx.name, "lessons_proposed", record)
    ctx.progress.update(ctx.state(), "lessons", f"#{record['pr']} proposes {len(lessons)}")
