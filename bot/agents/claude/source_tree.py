"""The framework source the agent may read: read-only, confined to one package directory,
every answer size-capped.

For the embedded workload that is attune's own ``runners/embedded/``; for Megatron-LM and
torchtitan the checkout named by ``ATTUNE_MEGATRON_PATH`` / ``ATTUNE_TORCHTITAN_PATH`` when
set (what the resolver runs), else the installed package. Paths are relative to the directory
holding the package (``megatron/core/...``, ``runners/embedded/train.py``), as the registry's
``source`` fields are.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]

from bot.agents.claude.key_sites import is_key_site
from gate.errors import AttuneError
from runners.source_lines import mentions

REPO_ROOT = Path(__file__).resolve().parents[3]
MAX_LINES = 200
"""Lines one read_source call returns at most."""
MAX_CHARS = 16_000
MAX_HITS = 60
MAX_LINE = 300
"""Characters of one line shown (longer lines are cut)."""
MAX_PATTERN = 200
"""Characters of a grep pattern."""
MAX_FILE_BYTES = 4_000_000
"""A source file larger than this is not read (generated or vendored data, not source)."""
MAX_FILES = 5_000
"""Files one grep searches at most."""
GREP_DEADLINE_S = 5.0
"""Seconds one grep may search; it answers with the hits found so far past it."""
REGEX_MEMORY = 8 << 20
"""Bytes RE2 may use to compile one pattern (a huge repetition is refused, not built)."""
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".txt", ".toml", ".json", ".sh")
CHECKOUT_VARS = {"megatron": "ATTUNE_MEGATRON_PATH", "torchtitan": "ATTUNE_TORCHTITAN_PATH"}
PACKAGES = {"megatron": "megatron", "torchtitan": "torchtitan"}


class SourceError(AttuneError):
    """A path or pattern the agent may not use; the message goes back to the model."""


@dataclass
class GrepResult:
    hits: list[tuple[str, int, str]] = field(default_factory=list)
    """(path, line, text) of the matching lines, in file order."""
    cut: str | None = None
    """Why the search stopped before the end (hit cap, output cap, deadline), if it did."""


def compile_pattern(pattern: str) -> object:
    """The pattern compiled by RE2, a linear-time engine: no pattern can backtrack
    catastrophically (``^(\\w+\\s?)*$`` on a long line takes microseconds, where Python's ``re``
    takes minutes holding the GIL). Backreferences and lookaround are refused by RE2."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise SourceError(f"give a pattern of 1 to {MAX_PATTERN} characters")
    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args else str(exc)
        if isinstance(why, bytes):  # pragma: no cover - RE2 gives bytes or str
            why = why.decode(errors="replace")
        raise SourceError(
            f"not a regular expression RE2 accepts (no backreferences or lookaround): {why}"
        ) from None


@dataclass(frozen=True)
class SourceTree:
    root: Path
    """Directory the paths are relative to."""
    package: str
    """The one top directory under ``root`` that may be read (``runners/embedded``)."""
    version: str
    """The framework version a ``path:line@version`` citation must name, if it names one."""

    def file(self, path: str) -> Path:
        """The file ``path`` names, refused when it leaves the package or is not source."""
        if not path or path.startswith("/") or "\\" in path or "\x00" in path:
            raise SourceError(
                f"{path!r}: give a path relative to the source root, e.g. {self.package}/..."
            )
        top = (self.root / self.package).resolve()
        target = (self.root / path).resolve()
        if not target.is_relative_to(top):
            raise SourceError(f"{path!r} is outside {self.package}/: only it may be read")
        if target.is_dir():
            raise SourceError(f"{path!r} is a directory: grep_source it, or name a file")
        if not target.is_file():
            raise SourceError(f"{path!r}: no such file under {self.package}/")
        if target.suffix not in SUFFIXES:
            raise SourceError(f"{path!r}: not a source file ({', '.join(SUFFIXES)})")
        if target.stat().st_size > MAX_FILE_BYTES:
            raise SourceError(f"{path!r} is over {MAX_FILE_BYTES:,} bytes: not read")
        return target

    def lines(self, path: str) -> list[str]:
        return self.file(path).read_text(errors="replace").splitlines()

    def read(self, path: str, start: int, end: int) -> tuple[str, range]:
        """Numbered lines ``start``..``end`` (1-based, inclusive, capped) and the range shown."""
        lines = self.lines(path)
        if start < 1 or start > len(lines):
            raise SourceError(f"{path} has {len(lines)} lines; start {start} is out of range")
        end = min(max(end, start), len(lines), start + MAX_LINES - 1)
        out, shown = [], start - 1
        size = 0
        for n in range(start, end + 1):
            row = f"{n:>6}| {lines[n - 1][:MAX_LINE]}"
            size += len(row) + 1
            if size > MAX_CHARS:
                break
            out.append(row)
            shown = n
        note = f"\n[{path} has {len(lines)} lines; shown {start}-{shown}]"
        return "\n".join(out) + note, range(start, shown + 1)

    def grep(
        self, pattern: str, path: str | None = None, *, deadline_s: float = GREP_DEADLINE_S
    ) -> GrepResult:
        """Lines matching ``pattern`` (RE2 syntax), capped in hits, characters, files and time."""
        regex: Any = compile_pattern(pattern)
        base = path or self.package
        top = (self.root / self.package).resolve()
        target = (self.root / base).resolve()
        if not target.is_relative_to(top):
            raise SourceError(f"{base!r} is outside {self.package}/: only it may be searched")
        files = [target] if target.is_file() else sorted(target.rglob("*.py"))
        result, size = GrepResult(), 0
        stop_at = time.monotonic() + deadline_s
        for count, f in enumerate(files):
            if count >= MAX_FILES:
                result.cut = f"searched the first {MAX_FILES} files only: narrow the path"
                return result
            if time.monotonic() > stop_at:
                result.cut = f"stopped after {deadline_s:g} s: narrow the path or the pattern"
                return result
            if f.suffix not in SUFFIXES or not f.resolve().is_relative_to(top):
                continue
            if f.stat().st_size > MAX_FILE_BYTES:
                continue
            rel = f.relative_to(self.root.resolve()).as_posix()
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if regex.search(line[:MAX_LINE]):
                    shown = line.strip()[:MAX_LINE]
                    size += len(rel) + len(shown) + 12
                    if size > MAX_CHARS:
                        result.cut = f"output over {MAX_CHARS:,} characters: narrow the search"
                        return result
                    result.hits.append((rel, n, shown))
                    if len(result.hits) >= MAX_HITS:
                        result.cut = f"the first {MAX_HITS} hits only: narrow the search"
                        return result
        return result

    def cite(
        self, ref: str, key: str, sites: frozenset[str] = frozenset()
    ) -> tuple[str, int] | str:
        """(path, line) of a citation ``path:line[@version]`` of a line where ``key`` is read,
        defined or consumed (``key_sites``: code naming it, not prose), or one of ``sites``
        (the registry's source for the key, ``path:line``), else why not."""
        location, _, version = ref.strip().partition("@")
        path, sep, line = location.rpartition(":")
        if not sep or not line.isdigit():
            return f"{ref!r} is not path:line[@version]"
        if version and version != self.version:
            return f"{ref!r} names version {version}; the recipe runs {self.version}"
        try:
            lines = self.lines(path)
            path = self.file(path).relative_to(self.root.resolve()).as_posix()
        except SourceError as exc:
            return f"{ref!r}: {exc}"
        n = int(line)
        if not 1 <= n <= len(lines):
            return f"{ref!r}: {path} has {len(lines)} lines"
        if f"{path}:{n}" in sites:
            return path, n
        if not mentions(lines[n - 1], key):
            return f"{ref!r} reads {lines[n - 1].strip()[:160]!r}, which does not mention {key}"
        if not is_key_site(self.file(path), n, key):
            return (
                f"{ref!r} names {key} only in prose (a comment, docstring or message): cite a "
                f"line where {key} is read, defined or consumed (get_registry gives one)"
            )
        return path, n


def source_tree(framework: str, version: str, env: Mapping[str, str] | None = None) -> SourceTree:
    """The source a recipe of ``framework`` at ``version`` runs."""
    env = os.environ if env is None else env
    if framework == "embedded":
        return SourceTree(root=REPO_ROOT, package="runners/embedded", version=version)
    if framework not in PACKAGES:
        raise AttuneError(f"the claude agent has no source to read for framework {framework!r}")
    package = PACKAGES[framework]
    checkout = env.get(CHECKOUT_VARS[framework], "")
    if checkout and (Path(checkout) / package).is_dir():
        return SourceTree(root=Path(checkout), package=package, version=version)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise AttuneError(
            f"the claude agent reads {framework}'s source, which is not installed: install it "
            f"or set {CHECKOUT_VARS[framework]} to a checkout"
        )
    root = Path(next(iter(spec.submodule_search_locations))).parent
    return SourceTree(root=root, package=package, version=version)
