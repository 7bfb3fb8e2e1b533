"""A launch as the ledger stores it: its paths relative to the campaign directory, so a moved
campaign directory stays resumable (a restarted bot finds its trials where the directory is now).

The backend and the result parser need real paths: ``located`` turns a stored launch back into
one under the campaign directory as it is now. Paths outside the directory stay absolute, and a
launch stored with absolute paths (before this change) reads back unchanged.
"""

from __future__ import annotations

from pathlib import Path

from runners.bench import Launch


def _relative(path: str | None, root: Path) -> str | None:
    if path is None:
        return None
    resolved = Path(path).resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else path


def _absolute(path: str | None, root: Path) -> str | None:
    return None if path is None or Path(path).is_absolute() else str(root / path)


def stored(launch: Launch, campaign_dir: Path) -> Launch:
    """``launch`` with its handle's folder and profile trace relative to ``campaign_dir``."""
    root = campaign_dir.resolve()
    handle = launch.handle.model_copy(update={"workdir": _relative(launch.handle.workdir, root)})
    trace = _relative(launch.profile_trace, root)
    return launch.model_copy(update={"handle": handle, "profile_trace": trace})


def located(launch: Launch, campaign_dir: Path) -> Launch:
    """A stored launch with its paths under ``campaign_dir`` as it is now."""
    root = campaign_dir.resolve()
    workdir = _absolute(launch.handle.workdir, root) or launch.handle.workdir
    handle = launch.handle.model_copy(update={"workdir": workdir})
    trace = _absolute(launch.profile_trace, root) or launch.profile_trace
    return launch.model_copy(update={"handle": handle, "profile_trace": trace})
