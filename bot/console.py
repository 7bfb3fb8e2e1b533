"""The terminal: one rich console for everything attune prints.

On a terminal, rich sizes output to the window. Anywhere else (CI logs, pipes, files) the width
is ``COLUMNS`` or 120, and nothing is padded to it: progress lines are plain text (``log_line``)
and tables wrap their cells (``bot/render/text.py``) instead of cropping them.
"""

from __future__ import annotations

import os
import sys
import time

from rich.console import Console
from rich.markup import escape

_WIDTH = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 120
console = Console(highlight=False, soft_wrap=False, width=_WIDTH, log_path=False)


def log_line(text: str) -> None:
    """One progress line, ``[HH:MM:SS] text``: never padded to the console's width (rich's
    ``Console.log`` pads every line, which fills logs and pipes with trailing spaces)."""
    console.print(f"[dim]\\[{time.strftime('%H:%M:%S')}][/] {escape(text)}", soft_wrap=True)
