"""Reading and writing ledger events: a stored payload becomes its kind's typed event (upcast
from older versions first), and a typed event becomes the payload the ledger stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from gate.errors import AttuneError
from gate.events import MODELS, Event

UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}
"""(kind, version) -> the payload in the next version's shape. Empty while every kind is at
version 1; a shape change adds its upcaster here and a test on a ledger of the old release."""


class EventError(AttuneError):
    """A payload that is not a valid event of its kind."""


def parse_event(kind: str, payload: dict[str, Any]) -> Event:
    """The typed event for a stored payload, upcast from older versions."""
    model = MODELS.get(kind)
    if model is None:
        raise EventError(f"unknown ledger event kind {kind!r}; known: {', '.join(MODELS)}")
    data = dict(payload)
    version = int(data.get("v", 1))
    while version < model.VERSION:
        upcast = UPCASTERS.get((kind, version))
        if upcast is None:
            raise EventError(f"{kind} v{version}: no upcaster to v{version + 1}")
        data, version = upcast(data), version + 1
        data["v"] = version
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(payload)"
        raise EventError(f"{kind}: {where}: {first['msg']}") from None


def to_payload(event: Event) -> dict[str, Any]:
    """What the ledger stores: JSON-ready, field names as documented (``class``, not
    ``key_class``)."""
    return event.model_dump(mode="json", by_alias=True)
