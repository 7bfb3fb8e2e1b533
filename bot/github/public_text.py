"""What of an error may be posted on a pull request: a short line, without addresses or paths.

Errors carry what helps an operator (a slurmrestd address, a runner's file paths, a
subprocess's stderr, a request's URL); a pull request is read by everyone who can read the
repository. So a reply gets the error's first line, shortened, with URLs and absolute paths
replaced, and the bot's log keeps the whole text under a reference the reply names.
"""

from __future__ import annotations

import logging
import re
import secrets

URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s`'\"<>)\]]+")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])(?:~|[A-Za-z]:)?[/\\](?:[\w.@+-]+[/\\])+[\w.@+-]*")
"""``/a/b``, ``~/a/b``, ``C:\\a\\b``: two components at least (``1/2`` or ``tokens/s`` are
not absolute, and neither is a repository path such as ``recipes/gpt.yaml``)."""
MAX_LINE = 240


def public(text: str) -> str:
    """``text`` with URLs and absolute paths replaced."""
    return ABSOLUTE_PATH.sub("<path>", URL.sub("<url>", text))


def short_public(text: str, limit: int = MAX_LINE) -> str:
    """The first non-empty line of ``text``, made public and at most ``limit`` characters."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    line = public(first)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def for_the_pull_request(log: logging.Logger, what: str, error: BaseException | str) -> str:
    """The short public text of ``error`` with a reference; the whole of it goes to ``log``
    under that reference."""
    text = str(error)
    reference = secrets.token_hex(4)
    log.error("%s [ref %s]: %s", what, reference, text)
    return f"{short_public(text)} (details in the bot's log, ref {reference})"
