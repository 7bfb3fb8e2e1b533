"""The terminal: one rich console for everything attune prints."""

from __future__ import annotations

import sys

from rich.console import Console

# 120 columns when not on a terminal (CI logs, pipes): gate tables stay readable
_WIDTH = None if sys.stdout.isatty() else 120
console = Console(highlight=False, soft_wrap=False, width=_WIDTH, log_path=False)
