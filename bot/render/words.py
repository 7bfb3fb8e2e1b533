"""Counted nouns in user-facing text: "1 candidate", "2 candidates", never a noun and "(s)".
The one helper lives in ``gate.words`` (the gate's messages use it too)."""

from gate.words import count

__all__ = ["count"]
