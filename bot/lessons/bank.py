"""The experience bank: lessons from earlier campaigns, reviewed by people, read by the agents.

A lesson file (``registry/lessons/*.yaml``) holds ``lessons:``, a list of lessons. Each says
what moving some layout levers does (``effect``: faster, slower, fails) within a scope (framework
and version range, hardware, model size), cites the ledgers and trials that measured it, and has
a status: ``proposed`` (written by a campaign, in review), ``accepted`` (merged by a reviewer:
the agents read it), ``retired`` (kept for the record; the agents no longer read it).

Reading the files is ``load_bank``; everything else here is pure: validation, the facts a
campaign is matched on, and scope matching. See docs/lessons.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.lessons.view import Effect, LessonView
from gate.errors import AttuneError
from gate.models import EffectiveConfig
from gate.text_files import read_utf8

BANK_DIR = Path(__file__).resolve().parents[2] / "registry" / "lessons"
"""The bank of this attune checkout (CODEOWNERS guards ``registry/``)."""

Status = Literal["proposed", "accepted", "retired"]
DIRECTION = re.compile(r"^(up|down|=.+)$")
SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([KMBT]?)\s*$", re.IGNORECASE)
SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


def parse_size(value: Any) -> float:
    """A parameter count: a number, or ``125M``, ``8B``, ``1.5K``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    found = SIZE.match(str(value))
    if not found:
        raise ValueError(f"{value!r} is not a parameter count (e.g. 120000, 3M, 8B)")
    return float(found.group(1)) * SUFFIX[found.group(2).upper()]


class ParamRange(BaseModel):
    """Model sizes (parameter counts) a lesson holds for, both ends included."""

    model_config = ConfigDict(extra="forbid")
    min: float = 0.0
    max: float | None = None
    """None: no upper bound."""

    @field_validator("min", "max", mode="before")
    @classmethod
    def _size(cls, v: Any) -> float | None:
        return None if v is None else parse_size(v)

    def holds(self, params: float) -> bool:
        return params >= self.min and (self.max is None or params <= self.max)


class Scope(BaseModel):
    """Where a lesson holds."""

    model_config = ConfigDict(extra="forbid")
    framework: str
    versions: str
    """A PEP 440 specifier on the framework's version (``==1``, ``>=0.19,<0.20``)."""
    hardware: list[str] = Field(min_length=1)
    """``cpu``, GPU architectures (``sm90``), or ``any``."""
    model_params: ParamRange | None = None
    """None: any model size."""

    @field_validator("versions")
    @classmethod
    def _specifier(cls, v: str) -> str:
        try:
            SpecifierSet(v)
        except InvalidSpecifier:
            raise ValueError(f"{v!r} is not a version specifier (e.g. '>=0.19,<0.20')") from None
        return v


class Evidence(BaseModel):
    """One measured trial behind a lesson."""

    model_config = ConfigDict(extra="forbid")
    ledger: str
    """The ledger file, relative to the repository root."""
    campaign: str
    trial: str
    delta_pct: float | None = None
    """Measured tokens/s/device change against the incumbent of its time, in percent
    (``trial_judged.gain`` x 100); None for a run that failed (effect ``fails``)."""


class Lesson(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    status: Status
    claim: str = Field(min_length=10)
    levers: dict[str, str] = Field(min_length=1)
    """Registry key -> direction: ``up``, ``down`` or ``=value``."""
    effect: Effect
    min_gain_pct: float = Field(0.0, ge=0.0)
    """The claim's size: the evidence's mean change is at least this, in percent, in the
    effect's direction."""
    bottleneck: str | None = None
    scope: Scope
    evidence: list[Evidence] = Field(min_length=1)
    note: str | None = None
    """Anything a reviewer wants kept: why retired, what was checked."""

    @field_validator("levers")
    @classmethod
    def _directions(cls, v: dict[str, str]) -> dict[str, str]:
        for key, direction in v.items():
            if not DIRECTION.match(str(direction)):
                raise ValueError(f"{key}: direction {direction!r} is not up, down or =value")
        return v

    @property
    def mean_delta_pct(self) -> float:
        deltas = [e.delta_pct for e in self.evidence if e.delta_pct is not None]
        return sum(deltas) / len(deltas) if deltas else 0.0

    def view(self) -> LessonView:
        """What an agent sees of it."""
        return LessonView(
            id=self.id,
            claim=self.claim,
            levers=dict(self.levers),
            effect=self.effect,
            gain_pct=round(self.mean_delta_pct, 2),
            trials=len(self.evidence),
            bottleneck=self.bottleneck,
        )


class LessonFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lessons: list[Lesson]


def _location(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_lessons(text: str, path: str) -> list[Lesson]:
    """The lessons of one file's text; a malformed one is an AttuneError naming the file and
    the field (``lessons[1].scope.versions``)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise AttuneError(f"malformed lesson YAML: {exc}", path=path) from None
    if not isinstance(raw, dict) or "lessons" not in raw:
        raise AttuneError("a lesson file is a mapping with a 'lessons:' list", path=path)
    try:
        return LessonFile.model_validate(raw).lessons
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise AttuneError(f"invalid lesson: {msg}", path=path, key=_location(err["loc"])) from None


def check_unique(lessons: list[tuple[str, Lesson]]) -> None:
    """Lesson ids are unique across the bank."""
    seen: dict[str, str] = {}
    for path, lesson in lessons:
        if lesson.id in seen:
            raise AttuneError(f"lesson id {lesson.id!r} is also in {seen[lesson.id]}", path=path)
        seen[lesson.id] = path


def load_bank(directory: Path | None = None) -> list[tuple[str, Lesson]]:
    """(file, lesson) for every lesson under ``directory`` (default: the bank), in file order."""
    directory = directory or BANK_DIR
    if not directory.is_dir():
        return []
    out: list[tuple[str, Lesson]] = []
    for path in sorted(directory.glob("*.yaml")):
        text = read_utf8(path, "lesson file")
        out.extend((str(path), lesson) for lesson in parse_lessons(text, str(path)))
    check_unique(out)
    return out


# --- the campaign a lesson is matched to ---


class CampaignFacts(BaseModel):
    """What scope matching looks at in a campaign."""

    framework: str
    version: str
    hardware: str | None
    """``cpu``, a GPU architecture (``sm90``), or None when the recipe does not say."""
    model_params: float | None
    """Approximate parameter count; None when it cannot be told from the configuration."""


def model_params(effective: EffectiveConfig) -> float | None:
    """Approximate parameter count of a dense transformer (12·L·h² + V·h, the FFN at its own
    width where the configuration names it), or a torchtitan flavor's size (``8B``)."""
    v = effective.values
    if effective.framework == "torchtitan":
        found = re.search(r"(\d+(?:\.\d+)?)\s*([MB])\b", str(v.get("model_spec.flavor", "")))
        return float(found.group(1)) * SUFFIX[found.group(2)] if found else None
    layers = v.get("n_layer", v.get("num_layers"))
    hidden = v.get("d_model", v.get("hidden_size"))
    vocab = v.get("vocab_size", v.get("padded_vocab_size")) or 0
    if not isinstance(layers, int) or not isinstance(hidden, int):
        return None
    ffn = v.get("ffn_hidden_size") or 4 * hidden
    per_layer = 4 * hidden * hidden + 2 * hidden * int(ffn)
    return float(layers * per_layer + int(vocab) * hidden)


def campaign_facts(effective: EffectiveConfig, recipe_body: dict[str, Any]) -> CampaignFacts:
    """The facts of a campaign from its baseline: hardware is the recipe's ``gpu_arch``, or
    ``cpu`` for the embedded workload."""
    arch = recipe_body.get("gpu_arch")
    hardware = (
        arch if isinstance(arch, str) else ("cpu" if effective.framework == "embedded" else None)
    )
    return CampaignFacts(
        framework=effective.framework,
        version=effective.framework_version,
        hardware=hardware,
        model_params=model_params(effective),
    )


def scope_mismatch(scope: Scope, facts: CampaignFacts) -> str | None:
    """Why ``scope`` does not cover the campaign; None when it does."""
    if scope.framework != facts.framework:
        return f"framework {facts.framework}, not {scope.framework}"
    try:
        if Version(facts.version) not in SpecifierSet(scope.versions):
            return f"{facts.framework} {facts.version} is outside {scope.versions}"
    except InvalidVersion:
        return f"version {facts.version!r} cannot be compared with {scope.versions}"
    if "any" not in scope.hardware and facts.hardware not in scope.hardware:
        return f"hardware {facts.hardware or 'unknown'}, not {', '.join(scope.hardware)}"
    if scope.model_params is not None:
        if facts.model_params is None:
            return "the model's size is unknown and the lesson is bounded by size"
        if not scope.model_params.holds(facts.model_params):
            return f"a {facts.model_params:,.0f}-parameter model is outside the lesson's sizes"
    return None


def matching(lessons: list[Lesson], facts: CampaignFacts) -> list[LessonView]:
    """The accepted lessons whose scope covers the campaign, as the agents see them."""
    return [
        lesson.view()
        for lesson in lessons
        if lesson.status == "accepted" and scope_mismatch(lesson.scope, facts) is None
    ]
