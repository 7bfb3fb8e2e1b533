"""The report's experience-bank section: whether the bank was read, the lessons the
hypotheses used, the ones proposed for review."""

from __future__ import annotations

from bot.lessons.campaign import FINAL
from bot.report.model import CampaignReport


def lessons_section(r: CampaignReport) -> list[str]:
    """The experience bank: read or not, the lessons the hypotheses used, the ones proposed."""
    out = ["", "## Experience bank", ""]
    if not r.lessons_read:
        out.append("Not read: the campaign was opened with `--no-lessons`.")
    used = sorted({x for c in r.candidates for x in c.hypothesis.lessons})
    trials = {x: [c.trial for c in r.candidates if x in c.hypothesis.lessons] for x in used}
    out += [f"- used `{x}`: {', '.join(trials[x])}" for x in used] or ["- no lesson used"]
    proposed = r.lessons_proposed
    if proposed is None and r.stop_reason in FINAL:
        out.append("- lessons proposed: none (no trial beat or lost by more than the noise)")
    elif proposed is None:
        out.append("- lessons proposed: not yet (at the end of the campaign)")
    else:
        ids = ", ".join(f"`{x}`" for x in proposed.get("lessons") or [])
        out.append(f"- lessons proposed for review in #{proposed['pr']}: {ids}")
    return out
