"""Does a registry classify every key a framework's parser defines, and nothing stale?
(``attune registry coverage``)"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from gate.registry import Registry


class Coverage(BaseModel):
    """How a registry file and a framework's parser line up."""

    missing: list[str]
    """Parser keys no entry (exact or pattern) classifies: they would be judged unknown."""
    not_in_parser: list[str]
    """Exact, non-derived, non-``env.`` registry keys the parser does not define (stale)."""
    derived_in_parser: list[str]
    """Keys marked ``derived`` that the parser does define (should be plain entries)."""


def coverage(registry: Registry, parser_keys: Iterable[str]) -> Coverage:
    """Compare ``registry`` with the keys a framework's parser defines."""
    known = set(parser_keys)
    exact = {k: e for k, e in registry.data.keys.items() if k not in registry._patterns}
    stale = [k for k, e in exact.items() if not (e.derived or k.startswith("env.") or k in known)]
    return Coverage(
        missing=sorted(k for k in known if registry.entry(k) is None),
        not_in_parser=sorted(stale),
        derived_in_parser=sorted(k for k, e in exact.items() if e.derived and k in known),
    )
