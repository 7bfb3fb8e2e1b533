"""The base of every ledger event: closed, immutable, versioned (``gate/events.py``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict


class Event(BaseModel):
    """A ledger payload. Immutable; unknown fields are an error."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    KIND: ClassVar[str]
    VERSION: ClassVar[int] = 1
    v: int = 1
    """The shape's version (absent in 0.1 ledgers: 1)."""
