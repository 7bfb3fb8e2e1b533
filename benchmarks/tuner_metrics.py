"""What the tuner benchmark computes from campaigns, as pure functions.

A campaign's *curve* is the true speedup of its incumbent (the measured table's score of the
incumbent's layout over the baseline layout's) after each charge, against the device-hours
spent so far (calibration included). Judging every agent's choice on the same measured table
keeps the luck of one noisy run out of the comparison: what is compared is which layouts the
agents found and what they spent finding them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

Curve = list[tuple[float, float]]
"""(device-hours spent, true speedup of the incumbent then), in spending order."""
TARGETS = (0.90, 0.95)


@dataclass(frozen=True)
class CampaignResult:
    agent: str
    seed: int
    curve: Curve
    reported_speedup: float | None
    """What the campaign itself reported (its incumbent's measured score over the baseline
    mean): noisy, for the record."""
    trials: int
    estimated: int = 0
    """Trials whose layout's score was estimated rather than measured."""

    @property
    def hours(self) -> float:
        return self.curve[-1][0] if self.curve else 0.0

    @property
    def final(self) -> float:
        return self.curve[-1][1] if self.curve else 1.0


def hours_to_reach(curve: Curve, speedup: float) -> float | None:
    """Device-hours spent when the incumbent first reached ``speedup``; None when never."""
    for hours, reached in curve:
        if reached >= speedup - 1e-12:
            return hours
    return None


def step_value(curve: Curve, hours: float) -> float:
    """The incumbent's speedup once ``hours`` were spent (1.0 before the first point)."""
    value = 1.0
    for spent, speedup in curve:
        if spent > hours:
            break
        value = speedup
    return value


def median(values: Sequence[float | None]) -> float | None:
    """The median, counting a None (never reached) as infinitely late; None when that is
    where the median falls."""
    ranked = sorted(math.inf if v is None else v for v in values)
    if not ranked:
        return None
    mid = statistics.median(ranked)
    return None if math.isinf(mid) else mid


@dataclass(frozen=True)
class AgentRow:
    agent: str
    campaigns: int
    final_speedup: float
    fraction: float
    hours_to: dict[float, float | None]
    reached: dict[float, int]
    hours_spent: float
    trials: float


def agent_row(agent: str, results: list[CampaignResult], optimum: float) -> AgentRow:
    """Medians over one agent's campaigns; ``optimum`` is the table's best speedup."""
    finals = [r.final for r in results]
    hours_to: dict[float, float | None] = {}
    reached: dict[float, int] = {}
    for target in TARGETS:
        times = [hours_to_reach(r.curve, target * optimum) for r in results]
        hours_to[target] = median(times)
        reached[target] = sum(t is not None for t in times)
    return AgentRow(
        agent=agent,
        campaigns=len(results),
        final_speedup=statistics.median(finals),
        fraction=statistics.median(finals) / optimum,
        hours_to=hours_to,
        reached=reached,
        hours_spent=statistics.median(r.hours for r in results),
        trials=statistics.median(r.trials for r in results),
    )


def ratio(rules: AgentRow, other: AgentRow, target: float, budget_h: float) -> str:
    """Rules' median device-hours to ``target`` over another agent's, as text: a bound when
    the other never got there within the budget (it would need more than all of it)."""
    mine, theirs = rules.hours_to[target], other.hours_to[target]
    if mine is None:
        return "rules did not reach it"
    if theirs is None:
        return f"<= {mine / budget_h:.2f} ({other.agent} did not reach it within the budget)"
    return f"{mine / theirs:.2f}" if theirs > 0 else "-"


def _hours(value: float | None, reached: int, n: int) -> str:
    text = "not reached" if value is None else f"{value:.4f}"
    return f"{text} ({reached}/{n})"


def table(rows: list[AgentRow], *, optimum: float, budget_h: float) -> str:
    """The markdown table of medians, and the ratios the compass asks about."""
    lines = [
        "| agent | campaigns | final speedup | fraction of optimum | device-h to 90% "
        "(reached) | device-h to 95% (reached) | device-h spent | candidates |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.agent} | {r.campaigns} | {r.final_speedup:.2f}x | {r.fraction:.1%} | "
            f"{_hours(r.hours_to[0.90], r.reached[0.90], r.campaigns)} | "
            f"{_hours(r.hours_to[0.95], r.reached[0.95], r.campaigns)} | "
            f"{r.hours_spent:.4f} | {r.trials:g} |"
        )
    lines.append("")
    lines.append(f"optimum: {optimum:.2f}x the baseline; budget {budget_h:g} device-hours each")
    rules = next((r for r in rows if r.agent == "rules"), None)
    if rules is not None:
        for other in rows:
            if other is rules:
                continue
            lines.append(
                f"rules / {other.agent} device-hours to 95% of the optimum: "
                f"{ratio(rules, other, 0.95, budget_h)} (target <= 0.33)"
            )
    return "\n".join(lines)
