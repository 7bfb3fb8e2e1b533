"""Helpers for the resolve workers (``python -m runners.<framework>.resolve_worker``).

Standard library only: a worker imports its framework and this, nothing from the bot.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


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
