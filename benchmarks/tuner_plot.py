"""The tuner benchmark's plot: the incumbent's true speedup against device-hours spent, the
median over each agent's campaigns as one line (each campaign faint behind it), with the
optimum and 95% of it."""

from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.tuner_metrics import CampaignResult, step_value

COLOURS = {"rules": "#2ca02c", "random": "#1f77b4", "tpe": "#d62728"}


def median_curve(results: list[CampaignResult], grid: list[float]) -> list[float]:
    """The median campaign's speedup at each point of ``grid`` (device-hours)."""
    return [statistics.median(step_value(r.curve, hours) for r in results) for hours in grid]


def plot(
    results: dict[str, list[CampaignResult]],
    *,
    optimum: float,
    path: Path,
    title: str,
    scored_by: str = "measured table",
) -> Path:
    """Write the plot to ``path`` (PNG) and return it."""
    fig = Figure(figsize=(10.0, 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    end = max((r.hours for rs in results.values() for r in rs), default=1.0) or 1.0
    grid = [end * i / 400 for i in range(401)]
    for agent, runs in results.items():
        if not runs:
            continue
        colour = COLOURS.get(agent, "#7f7f7f")
        for r in runs:
            xs = [0.0, *(h for h, _ in r.curve)]
            ys = [1.0, *(s for _, s in r.curve)]
            ax.step(xs, ys, where="post", color=colour, alpha=0.25, linewidth=1)
        ax.step(grid, median_curve(runs, grid), where="post", color=colour, linewidth=2.5,
                label=f"{agent} (median of {len(runs)})")  # fmt: skip
    ax.axhline(
        optimum, color="#000000", linestyle="--", linewidth=1, label=f"optimum {optimum:.2f}x"
    )
    ax.axhline(0.95 * optimum, color="#7f7f7f", linestyle=":", lw=1, label="95% of it")
    ax.set_xlabel("device-hours spent (calibration included)")
    ax.set_ylabel(f"incumbent speedup over the baseline ({scored_by})")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(str(path))
    return path
