"""The measured table of the embedded workload's layout space on one machine: what each
layout scored (tokens/s/device), what a run of it cost (device-seconds), and the optimum.

Pure except for ``load``/``save``: the table is cached as JSON under
``$ATTUNE_CACHE_DIR/optimum/<machine key>.json`` (default ``~/.cache/attune/optimum``), keyed
by the machine's fingerprint (CPU model, cores, torch version, the workload's version, the
baseline recipe's effective configuration and the run length), so it is measured once per
machine and a different machine, torch or recipe misses the cache.
"""

from __future__ import annotations

import hashlib
import os
import platform
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bot.agents.levers.layout_space import Layout, layout_key
from gate.models import ProfileBreakdown, StepRecord, canonical_json

CACHE_DIR_VAR = "ATTUNE_CACHE_DIR"


class Machine(BaseModel):
    """What the measurements depend on; its hash names the cache file."""

    cpu_model: str
    cores: int
    torch: str
    workload_version: str
    recipe: str
    """Effective-config fingerprint of the baseline recipe."""
    steps: int
    warmup: int

    def key(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump()).encode()).hexdigest()[:16]


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


class Measurement(BaseModel):
    """Every run of one layout."""

    layout: dict[str, Any]
    scores: list[float] = Field(default_factory=list)
    device_seconds: list[float] = Field(default_factory=list)
    step1_loss: float | None = None
    status: str = "ok"
    """ok, or the status of a run that failed (the layout then counts as failing)."""
    error: str | None = None
    steps: list[StepRecord] = Field(default_factory=list)
    """The step records of its first run (loss, grad norm, tokens, time)."""
    profile: ProfileBreakdown | None = None
    """A profile of the layout, measured when a campaign first asked for one."""
    profile_seconds: float | None = None

    @property
    def score(self) -> float | None:
        """The fastest of its runs: on a shared machine other processes only ever slow a run
        down, so the best run is the closest to the layout's own speed."""
        return max(self.scores) if self.ok and self.scores else None

    @property
    def seconds(self) -> float:
        return statistics.median(self.device_seconds) if self.device_seconds else 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class OptimumTable(BaseModel):
    machine: Machine
    entries: dict[str, Measurement] = Field(default_factory=dict)
    baseline: dict[str, Any]
    """The baseline recipe's layout."""

    def get(self, layout: Layout) -> Measurement | None:
        return self.entries.get(layout_key(layout))

    def put(self, measurement: Measurement) -> None:
        self.entries[layout_key(measurement.layout)] = measurement

    def ranked(self) -> list[Measurement]:
        """Measured layouts that ran, fastest first."""
        ok = [m for m in self.entries.values() if m.score is not None]
        return sorted(ok, key=lambda m: -(m.score or 0.0))

    def best(self) -> Measurement:
        ranked = self.ranked()
        if not ranked:
            raise ValueError("the table holds no layout that ran")
        return ranked[0]

    def baseline_score(self) -> float:
        entry = self.get(self.baseline)
        if entry is None or entry.score is None:
            raise ValueError("the table has no measurement of the baseline's layout")
        return entry.score

    def noise_cv(self) -> float:
        """Run-to-run noise: the pooled coefficient of variation of every layout run more
        than once (each layout's sample variance relative to its mean, pooled by degrees of
        freedom)."""
        num = den = 0.0
        for m in self.entries.values():
            if m.ok and len(m.scores) > 1:
                mean = statistics.fmean(m.scores)
                num += (len(m.scores) - 1) * (statistics.stdev(m.scores) / mean) ** 2
                den += len(m.scores) - 1
        return (num / den) ** 0.5 if den else 0.0

    def compile_factor(self) -> tuple[float, float] | None:
        """(score ratio, cost ratio) of compile=true over compile=false, the median over the
        layouts measured both ways; None when none was."""
        scores, costs = [], []
        for m in self.entries.values():
            if not m.layout["compile"] or m.score is None:
                continue
            plain = self.get({**m.layout, "compile": False})
            if plain is not None and plain.score and plain.seconds:
                scores.append(m.score / plain.score)
                costs.append(m.seconds / plain.seconds)
        if not scores:
            return None
        return statistics.median(scores), statistics.median(costs)

    def lookup(self, layout: Layout) -> tuple[Measurement, bool] | None:
        """The measurement of ``layout`` and whether it is estimated: a compile=true layout
        never measured is its compile=false twin scaled by ``compile_factor``."""
        entry = self.get(layout)
        if entry is not None:
            return entry, False
        factor = self.compile_factor()
        twin = self.get({**layout, "compile": False}) if layout["compile"] else None
        if twin is None or factor is None or twin.score is None:
            return None
        estimate = Measurement(
            layout=dict(layout),
            scores=[twin.score * factor[0]],
            device_seconds=[twin.seconds * factor[1]],
            step1_loss=twin.step1_loss,
        )
        return estimate, True


def cache_dir() -> Path:
    root = os.environ.get(CACHE_DIR_VAR) or str(Path.home() / ".cache" / "attune")
    return Path(root) / "optimum"


def cache_path(machine: Machine, root: Path | None = None) -> Path:
    return (root or cache_dir()) / f"{machine.key()}.json"


def load(machine: Machine, root: Path | None = None) -> OptimumTable | None:
    """The cached table of this machine, or None (a miss: never measured, or another machine,
    torch, workload version or recipe)."""
    path = cache_path(machine, root)
    if not path.exists():
        return None
    table = OptimumTable.model_validate_json(path.read_text())
    return table if table.machine == machine else None


def save(table: OptimumTable, root: Path | None = None) -> Path:
    """Write the table atomically (a sweep saves after every run, so it can resume)."""
    path = cache_path(table.machine, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(table.model_dump_json(indent=1))
    tmp.replace(path)
    return path
