"""Helpers for the resolve workers (``python -m runners.<framework>.resolve_worker``).

Standard library only: a worker imports its framework and this, nothing from the bot.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import logging
import os
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TextIO


def json_safe(value: Any) -> Any:
    """``value`` with tuples as lists and anything JSON cannot hold (dtypes, enums) as str."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    return str(value)


def one_line(exc: BaseException) -> str:
    """A one-line message for ``exc``."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


@contextlib.contextmanager
def pinned(env: dict[str, str], argv: list[str]) -> Iterator[None]:
    """``os.environ`` updated with ``env`` and ``sys.argv`` set to ``argv``, restored on exit."""
    saved_env = dict(os.environ)
    saved_argv = sys.argv
    os.environ.update(env)
    sys.argv = argv
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv


def _in_package(file: str, package: Path) -> str | None:
    """``file`` relative to the directory holding ``package`` when it lies inside it."""
    try:
        rel = Path(file).resolve().relative_to(package.resolve().parent)
    except ValueError:
        return None
    return rel.as_posix() if rel.parts[0] == package.name else None


@functools.cache
def _statements(file: str) -> tuple[tuple[int, int], ...]:
    """(first, last) line of every statement in ``file``; none when it cannot be parsed."""
    try:
        tree = ast.parse(Path(file).read_text())
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
    )


def statement_start(file: str, line: int) -> int:
    """The first line of the innermost statement of ``file`` spanning ``line``: a traceback
    names the line of a multi-line ``assert``'s condition; the source names the ``assert``."""
    spans = [(last - first, first) for first, last in _statements(file) if first <= line <= last]
    return min(spans)[1] if spans else line


def raise_site(exc: BaseException, package: Path) -> str | None:
    """Where the framework raised ``exc``: ``path:line`` of the statement of the innermost
    traceback frame inside ``package`` (the path relative to the directory holding it, as
    registry sources are written), or None when no frame is the framework's."""
    site = None
    tb = exc.__traceback__
    while tb is not None:
        file = tb.tb_frame.f_code.co_filename
        rel = _in_package(file, package)
        if rel is not None:
            site = f"{rel}:{statement_start(file, tb.tb_lineno)}"
        tb = tb.tb_next
    return site


def refusal(exc: BaseException, package: Path, *, key: str, message: str) -> dict[str, Any]:
    """A worker's error result for a recipe the framework refused: the message, the recipe key
    it is reported under and, when found, where in the framework it was raised."""
    result: dict[str, Any] = {"error": message, "key": key}
    site = raise_site(exc, package)
    if site is not None:
        result["source"] = site
    return result


WARNING_HELPERS = frozenset(
    {"warn_rank_0", "print_rank_0", "log_single_rank", "log_rank_0", "warn_once", "_warn_once"}
)
"""Functions that only forward a warning: its source is their caller's line."""
_PRINTED_WARNING = re.compile(r"\bWARN(ING)?\b")


class WarningLog:
    """Warnings a framework raised while validating one recipe, each with the framework line
    that raised it (helpers in ``WARNING_HELPERS`` skipped): ``warnings.warn``, logger
    records at WARNING or above, and printed lines that say ``WARNING``."""

    def __init__(self, package: Path) -> None:
        self.package = package
        self.items: list[dict[str, str]] = []

    def site(self, frame: FrameType | None) -> str:
        while frame is not None:
            rel = _in_package(frame.f_code.co_filename, self.package)
            if rel is not None and frame.f_code.co_name not in WARNING_HELPERS:
                return f"{rel}:{frame.f_lineno}"
            frame = frame.f_back
        return "-"

    def add(self, message: str, category: str) -> None:
        text = " ".join(message.split())
        item = {"message": text, "category": category, "source": self.site(sys._getframe(2))}
        if text and item not in self.items:
            self.items.append(item)


class _LogHandler(logging.Handler):
    def __init__(self, log: WarningLog) -> None:
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        self.log.add(record.getMessage(), "logging")


class _Tee(io.TextIOBase):
    """Writes through to ``stream``; complete lines that say WARNING go to ``log``."""

    def __init__(self, stream: TextIO, log: WarningLog) -> None:
        self.stream, self.log, self.pending = stream, log, ""

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if _PRINTED_WARNING.search(line):
                self.log.add(line, "printed")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


@contextlib.contextmanager
def collect_warnings(package: Path) -> Iterator[WarningLog]:
    """Every warning raised inside the block, all of them (no once-per-location filter)."""
    log = WarningLog(package)
    handler = _LogHandler(log)
    root = logging.getLogger()
    with warnings.catch_warnings():
        warnings.simplefilter("always")

        def show(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
            log.add(str(message), category.__name__)

        warnings.showwarning = show
        root.addHandler(handler)
        try:
            with contextlib.redirect_stdout(_Tee(sys.stdout, log)):
                yield log
        finally:
            root.removeHandler(handler)
