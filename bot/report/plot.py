"""The campaign plot: scores per trial, the incumbent with its noise band, cumulative cost."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # before pyplot can be imported anywhere: no display, same pixels everywhere

from matplotlib import style
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from bot.report.model import CampaignReport

FIGSIZE = (12.0, 5.5)
DPI = 100

# role or candidate outcome -> (label, marker, colour, size); None marks "no score: axis bottom"
_STYLE: dict[str, tuple[str, str, str, float]] = {
    "calibration": ("calibration run", "o", "#7f7f7f", 36),
    "profile": ("profile run", "D", "#9467bd", 36),
    "other": ("other run", "s", "#8c564b", 36),
    "merged": ("candidate: merged", "*", "#2ca02c", 160),
    "closed": ("candidate: closed", "o", "#d62728", 48),
    "merge_pending": ("candidate: merge pending", "o", "#17becf", 48),
    "pending": ("candidate: pending", "o", "#1f77b4", 48),
    "failed": ("candidate: failed, no score", "v", "#ff7f0e", 64),
    "rejected": ("candidate: rejected by gate, not run", "x", "#000000", 64),
    "refused": ("candidate: refused, not run", "x", "#bcbd22", 64),
}


def _points(report: CampaignReport) -> list[tuple[str, str, float | None, float]]:
    """(trial, style key, score, device-seconds) in ledger order, for trials with a row."""
    rows: dict[str, tuple[str, float | None, float]] = {
        r.trial: (r.role if r.role in _STYLE else "other", r.score, r.device_seconds)
        for r in report.runs
    }
    for c in report.candidates:
        rows[c.trial] = (c.outcome, c.score, c.device_seconds)
    return [(t, *rows[t]) for t in report.order if t in rows]


def render_plot(report: CampaignReport, path: Path) -> None:
    """Write the plot as a PNG; the same report always gives the same bytes."""
    points = _points(report)
    xs = list(range(1, len(points) + 1))
    with style.context("default"):
        fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        bottom = ax.get_xaxis_transform()  # x in data, y in axes fraction
        seen: set[str] = set()
        for x, (_, key, score, _) in zip(xs, points, strict=True):
            label, marker, colour, size = _STYLE[key]
            kw: dict[str, Any] = {"marker": marker, "c": colour, "s": size, "zorder": 3}
            if key not in seen:
                kw["label"] = label
                seen.add(key)
            if score is None:
                if key in ("rejected", "refused", "failed"):
                    ax.scatter([x], [0.03], transform=bottom, clip_on=False, **kw)
                continue
            ax.scatter([x], [score], **kw)
        noise = report.noise
        if noise is not None and xs:
            steps = {s.trial: s.score for s in report.incumbent[1:]}
            level, inc = noise.mean, []
            for trial, *_ in points:
                level = steps.get(trial, level)
                inc.append(level)
            edge = [*xs, xs[-1] + 0.5]
            inc.append(inc[-1])
            ax.step(edge, inc, where="post", color="#2ca02c", lw=1.5, label="incumbent")
            upper = [v * (1 + noise.threshold) for v in inc]
            ax.fill_between(
                edge,
                inc,
                upper,
                step="post",
                color="#2ca02c",
                alpha=0.15,
                label=f"noise band (+{noise.threshold:.1%})",
            )
        ax.set_xlabel("trial (ledger order)")
        ax.set_ylabel("score (tokens/s/device)")
        ax.set_xticks(xs, [p[0] for p in points], rotation=45, ha="right", fontsize=8)
        if xs:
            ax.set_xlim(0.5, xs[-1] + 0.5)
        else:
            ax.text(0.5, 0.5, "no trials yet", transform=ax.transAxes, ha="center")
        ax.grid(True, axis="y", alpha=0.3)
        cost = ax.twinx()
        total, cumulative = 0.0, []
        for p in points:
            total += p[3]
            cumulative.append(total)
        ends = [*xs, xs[-1] + 0.5] if xs else []
        cumulative += cumulative[-1:]
        cost.step(ends, cumulative, where="post", color="#555555", ls="--", lw=1, label="device-s")
        cost.set_ylabel("cumulative device-seconds")
        cost.set_ylim(bottom=0)
        handles, labels = ax.get_legend_handles_labels()
        more, more_labels = cost.get_legend_handles_labels()
        fig.legend(handles + more, labels + more_labels, loc="outside right upper", fontsize=8)
        speed = f", {report.speedup:.2f}x over baseline" if report.speedup is not None else ""
        ax.set_title(f"attune campaign {report.campaign or '-'}{speed}")
        fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
