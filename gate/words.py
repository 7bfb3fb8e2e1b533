"""Counted nouns in user-facing text: "1 candidate", "2 candidates", never a noun and "(s)".

Here, in pure code, so that the gate's own messages use it too; ``bot.render.words`` is where
the bot's text takes it from."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural``, else ``noun`` + "s")."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
