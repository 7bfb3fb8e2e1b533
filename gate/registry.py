"""The registry: every configuration key of a framework classified, with reason and source.

A registry file is YAML validated by ``RegistryFile``; a malformed file is an AttuneError that
names the file and the entry, never an empty registry. Conditions are data: a rule under
``when`` changes a key's class when its test holds for the baseline or the candidate.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gate.conditions import Condition
from gate.env_allowlist import ENV_PREFIX, AllowList, entry_problem
from gate.errors import AttuneError
from gate.models import EffectiveConfig, KeyClass
from gate.text_files import read_utf8

DEFAULT_REGISTRY_DIR = Path(__file__).resolve().parent.parent / "registry"
SOURCE_RE = re.compile(r"^[\w./-]+:\d+(@[\w.+-]+)?$")
"""``path:line`` or ``path:line@version``."""

RegistryClass = KeyClass


class Rule(BaseModel):
    """A conditional class: applies when ``if`` holds for baseline or candidate."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    if_: Condition = Field(alias="if")
    key_class: RegistryClass = Field(alias="class")
    reason: str = Field(min_length=1)


class Entry(BaseModel):
    """One key: its class, why, and the code that consumes it."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    key_class: RegistryClass = Field(alias="class")
    reason: str = Field(min_length=1)
    source: str
    """``path:line`` (``@version`` for external frameworks) of the code that reads the key."""
    when: list[Rule] = Field(default_factory=list)
    """Rules tried in order; the first that holds overrides class and reason."""
    derived: bool = False
    """Computed by the framework's validation (or trainer), not an argument of its parser;
    ``source`` is the line that computes it."""

    @field_validator("source")
    @classmethod
    def _source_format(cls, v: str) -> str:
        if not SOURCE_RE.match(v):
            raise ValueError(f"source must look like path/to/file.py:123, got {v!r}")
        return v


def _specifier(v: str | None) -> str | None:
    if v is not None:
        try:
            SpecifierSet(v)
        except InvalidSpecifier as exc:
            raise ValueError(f"not a version specifier: {v!r}") from exc
    return v


def _in_range(version: str, specifier: str) -> bool:
    try:
        return Version(version) in SpecifierSet(specifier)
    except InvalidVersion:
        return False


class KnownBug(BaseModel):
    """A framework bug that makes changing some keys unsafe in some versions.

    Any change of a matching key, in a version the bug covers, is judged ``known_bug``
    (rejected), whatever the classification file says.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    versions: str
    """Affected versions, e.g. ``<0.16``."""
    keys: list[str] = Field(min_length=1)
    """Keys (or fnmatch patterns) whose change can trigger the bug."""
    reason: str = Field(min_length=1)
    """What goes wrong."""
    source: str
    """``path:line@version`` of the code the bug lives in (or its fix)."""
    fixed_by: str = ""
    """The upstream change that fixed it."""
    if_: Condition | None = Field(None, alias="if")
    """When given, the bug applies only if this holds for the baseline or the candidate."""

    _versions = field_validator("versions")(_specifier)

    @field_validator("source")
    @classmethod
    def _source_format(cls, v: str) -> str:
        return Entry._source_format(v)

    def matches(self, key: str) -> bool:
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in self.keys)


class RegistryFile(BaseModel):
    """Schema of one file in ``registry/``: classifications (``keys``) for a version range,
    and/or ``known_bugs``, each with its own affected versions."""

    model_config = ConfigDict(extra="forbid")

    framework: str
    versions: str | None = None
    """Version specifier the classifications hold for, e.g. ``>=0.19,<0.20``."""
    description: str = ""
    keys: dict[str, Entry] = Field(default_factory=dict)
    """Exact keys, or fnmatch patterns such as ``env.TORCHINDUCTOR_*``."""
    known_bugs: dict[str, KnownBug] = Field(default_factory=dict)
    """Bug id -> bug."""

    _versions = field_validator("versions")(_specifier)

    @model_validator(mode="after")
    def _has_content(self) -> RegistryFile:
        if not self.keys and not self.known_bugs:
            raise ValueError("a registry file needs keys or known_bugs")
        if self.keys and self.versions is None:
            raise ValueError("a file with keys needs versions (e.g. '>=0.19,<0.20')")
        for key in self.keys:
            problem = entry_problem(key) if key.startswith(ENV_PREFIX) else None
            if problem is not None:
                raise ValueError(f"keys.{problem}")
        return self

    def covers(self, version: str) -> bool:
        """Whether this file's classifications hold for ``version``."""
        return bool(self.keys) and self.versions is not None and _in_range(version, self.versions)


class Classification(BaseModel):
    key_class: KeyClass
    reason: str
    source: str


class Registry:
    """A loaded registry file: looks keys up and applies conditions."""

    def __init__(
        self, data: RegistryFile, path: Path, bugs: dict[str, KnownBug] | None = None
    ) -> None:
        self.data = data
        self.path = path
        self.bugs = bugs or {}
        """Known bugs that affect the version this registry was loaded for."""
        self._patterns = {k: e for k, e in data.keys.items() if any(c in k for c in "*?[")}
        env_keys = [k for k in data.keys if k.startswith(ENV_PREFIX)]
        self.env_allowlist = AllowList(env_keys, where=f"{path.parent.name}/{path.name}")
        """The ``env.*`` entries: the variables a recipe of this framework may set."""

    def layout_sources(self) -> dict[str, str]:
        """Every key classified layout -> its source: what an agent may change, and why."""
        return {k: e.source for k, e in self.data.keys.items() if e.key_class == "layout"}

    def entry(self, key: str) -> Entry | None:
        if key in self.data.keys:
            return self.data.keys[key]
        for pattern, entry in self._patterns.items():
            if fnmatch.fnmatchcase(key, pattern):
                return entry
        return None

    def classify(
        self, key: str, baseline: EffectiveConfig, candidate: EffectiveConfig
    ) -> Classification:
        for bug_id, bug in self.bugs.items():
            if bug.matches(key) and (bug.if_ is None or bug.if_.holds_for(baseline, candidate)):
                fix = f" (fixed by {bug.fixed_by})" if bug.fixed_by else ""
                return Classification(
                    key_class="known_bug",
                    reason=f"{bug_id}: {bug.reason}{fix}",
                    source=bug.source,
                )
        if key.startswith(ENV_PREFIX):
            problem = self.env_allowlist.name_problem(key.removeprefix(ENV_PREFIX))
            if problem is not None:
                return Classification(key_class="invalid", reason=problem, source="-")
        entry = self.entry(key)
        if entry is None:
            return Classification(
                key_class="unknown",
                reason=f"not in {self.path.name}: allowed to the loss check, needs human review",
                source="-",
            )
        for rule in entry.when:
            if rule.if_.holds_for(baseline, candidate):
                return Classification(
                    key_class=rule.key_class, reason=rule.reason, source=entry.source
                )
        return Classification(key_class=entry.key_class, reason=entry.reason, source=entry.source)


def _location(err: dict[str, Any]) -> str:
    return ".".join(str(p) for p in err["loc"] if p not in ("function-after",))


_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_file(path: Path) -> Registry:
    """Load and validate one registry file (remembered while the file is unchanged)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise AttuneError(f"cannot read registry ({exc.strerror})", path=str(path)) from exc
    return _load_file(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _load_file(path: Path, mtime_ns: int, size: int) -> Registry:
    try:
        # libyaml's loader where PyYAML has it: the Megatron registry is 3,600 lines, and the
        # pure-Python loader spends 0.4 s on it in every gate check (libyaml: 0.05 s)
        raw = yaml.load(read_utf8(path, "registry"), Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise AttuneError(f"malformed registry YAML: {exc}", path=str(path)) from exc
    try:
        data = RegistryFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise AttuneError(
            f"invalid registry entry: {err['msg']}", path=str(path), key=_location(dict(err))
        ) from None
    return Registry(data, path)


def load_registry(framework: str, version: str, directory: Path | None = None) -> Registry:
    """The registry file for ``framework`` at ``version``. Every file in the directory is
    validated, so a broken file is reported even when another framework is asked for."""
    directory = directory or DEFAULT_REGISTRY_DIR
    files = sorted(directory.glob("*.yaml"))
    loaded = [load_file(p) for p in files]
    matching = [r for r in loaded if r.data.framework == framework and r.data.covers(version)]
    if not matching:
        raise AttuneError(
            f"no registry for framework {framework!r} version {version} in {directory}"
        )
    if len(matching) > 1:
        names = ", ".join(r.path.name for r in matching)
        raise AttuneError(f"several registries cover {framework} {version}: {names}")
    bugs = {
        bug_id: bug
        for r in loaded
        if r.data.framework == framework
        for bug_id, bug in r.data.known_bugs.items()
        if _in_range(version, bug.versions)
    }
    return Registry(matching[0].data, matching[0].path, bugs)


def recipe_allowlist(framework: str, directory: Path | None = None) -> AllowList:
    """The env names a recipe of ``framework`` may set, before its version is known: those
    every classification file of the framework allows (no file: none)."""
    directory = directory or DEFAULT_REGISTRY_DIR
    files = [load_file(p) for p in sorted(directory.glob("*.yaml"))]
    lists = [r.env_allowlist for r in files if r.data.framework == framework and r.data.keys]
    if not lists:
        return AllowList([], where=f"{directory.name}/ (no registry for {framework!r})")
    common = set(lists[0].entries).intersection(*(set(a.entries) for a in lists[1:]))
    where = ", ".join(a.where for a in lists)
    return AllowList(common, where=where)
