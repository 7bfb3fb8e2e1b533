"""The judgement's part of the report and of ``attune ledger show``: which candidates were
re-measured A/B and how they were decided, the noise recalibrations, and the winner's final
confirmation against the baseline with its confidence interval (``docs/judgement.md``)."""

from __future__ import annotations

from bot.render.words import count
from bot.state.model import CampaignState
from gate import sequential
from gate.events_judgement import ConfirmationFinished
from gate.sequential import Interval


def confirmation_of(state: CampaignState) -> Interval | None:
    """The winner's confirmed speedup and interval; None before (or without) a confirmation."""
    c = state.judgement.confirmed
    if not c or c.speedup is None or c.low is None or c.high is None:
        return None
    return Interval(pairs=c.pairs, speedup=c.speedup, low=c.low, high=c.high, level=c.level)


def confirmation_text(confirmed: ConfirmationFinished) -> str:
    """One line: the winner's speedup over the baseline from interleaved pairs, with its CI."""
    winner, pairs = confirmed.winner, confirmed.pairs
    note = f" ({confirmed.note})" if confirmed.note else ""
    if confirmed.speedup is None:
        return f"winner {winner} not confirmed against the baseline{note}"
    text = f"winner {winner} confirmed against the baseline: {confirmed.speedup:.3f}x"
    if confirmed.low is not None and confirmed.high is not None:
        level = f"{confirmed.level:.0%}"
        text += f" ({level} CI {confirmed.low:.3f}x to {confirmed.high:.3f}x)"
    return f"{text} over {count(pairs, 'interleaved pair')}{note}"


def judgement_section(state: CampaignState) -> list[str]:
    """Markdown lines of the report's judgement section."""
    out = ["", "## Judgement", ""]
    cap = state.params.max_pairs if state.params else sequential.MAX_PAIRS
    if cap:
        text = (
            "A first run beyond the one-run bar (at least the threshold) merges once one "
            "interleaved pair beats the bar too; a gain in (0, bar], or one that pair does not "
            f"bear out, is re-measured A/B, at most {cap} pairs, and merges only when the mean "
            "paired difference beats max(3%, k x its standard error), k >= 3"
        )
    else:
        text = (
            "One run merges beyond the one-run bar (at least the threshold); a gain in (0, bar] "
            "closes (A/B re-measurement is off)"
        )
    out.append(f"{text} (`docs/judgement.md`).")
    out.append("")
    judged = [t.judged for t in state.candidates if t.judged and t.judged.pairs is not None]
    for j in judged:
        mean, se = j.paired_mean, j.paired_se
        shown = f"{mean:+.2%} ± {se:.2%}" if mean is not None and se is not None else "-"
        out.append(
            f"- {j.trial}: re-measured over {count(j.pairs or 0, 'pair')}, {shown}: {j.decision}"
        )
    if not judged:
        out.append("- no candidate needed re-measuring")
    for incumbent, r in state.judgement.recalibrations.items():
        out.append(
            f"- noise recalibrated for {incumbent} ({', '.join(r.keys)} changed): "
            f"cv {r.cv:.2%}, threshold {r.threshold:.2%}, from {len(r.trials)} runs"
        )
    if state.judgement.confirmed:
        out.append(f"- {confirmation_text(state.judgement.confirmed)}")
    elif state.judgement.confirmation:
        out.append(f"- confirmation of {state.judgement.confirmation.winner} under way")
    return out
