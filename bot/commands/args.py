"""Argument types of the command line that refuse a bad value while arguments are parsed:
before anything is created, launched or written (argparse reports them as exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path

MAX_PR_NUMBER = 2**31 - 1
"""Pull request numbers are positive 32-bit integers on every forge attune speaks to."""


def directory(text: str) -> Path:
    """A work directory: new, or an existing directory, never an existing file."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
    return path


def ledger_file(text: str) -> Path:
    """A ledger file (``DIR/ledger.db``), never a directory."""
    path = Path(text)
    if path.is_dir():
        hint = f"; did you mean {path / 'ledger.db'}?" if (path / "ledger.db").is_file() else ""
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a ledger file{hint}")
    return path


def port(text: str) -> int:
    """A TCP port to listen on: 1 to 65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port number, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, got {value}")
    return value


def pr_number(text: str) -> int:
    """A pull request number: 1 to 2^31 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a pull request number, got {text!r}") from None
    if not 1 <= value <= MAX_PR_NUMBER:
        raise argparse.ArgumentTypeError(
            f"a pull request number is 1 to {MAX_PR_NUMBER}, got {text}"
        )
    return value
