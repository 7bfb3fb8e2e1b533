"""The terminal: one rich console for everything attune prints."""

from __future__ import annotations

from rich.console import Console

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False)
