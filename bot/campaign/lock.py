"""One owner per campaign directory: an exclusive ``flock`` on ``campaign.lock``, held by the
process that runs (or resumes) the campaign for as long as it does.

Two bots on one directory would both fold the same ledger and both launch the next missing run:
charged twice, two launches in one trial folder, a false ``baseline_failed``. The lock is
taken before anything is read or appended; a second process is refused at once, naming the pid
that holds it. The kernel drops the lock when its holder exits, however it exits (SIGKILL too),
so a killed bot never leaves a stale lock behind.

``attune serve`` holds its state directory the same way (``serve.lock``): two App servers on
one state directory would take deliveries from one inbox and run each campaign twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from gate.errors import AttuneError

LOCK_FILE = "campaign.lock"
"""In the campaign directory; holds the owner's pid (for the refusal's message only)."""

SERVE_LOCK_FILE = "serve.lock"
"""In ``attune serve``'s state directory; holds the server's pid."""

_held: dict[Path, tuple[IO[str], int]] = {}
"""Lock files this process holds -> (the locked file, nesting depth): taking the lock again in
the owner (``--resume`` then the run) nests instead of refusing itself."""
_guard = threading.Lock()


OWNER_WAIT_S = 2.0
"""How long a refused process waits for the holder to write its pid (it does so right after
taking the lock; until then the file is empty or still names a previous, dead owner)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _owner(lock: IO[str]) -> str:
    deadline = time.monotonic() + OWNER_WAIT_S
    while True:
        lock.seek(0)
        pid = lock.read().strip()
        if pid.isdigit() and _alive(int(pid)):
            return f"pid {pid}"
        if time.monotonic() >= deadline:
            return "another process (pid not written yet)"
        time.sleep(0.02)


def _campaign_busy(owner: str) -> str:
    return (
        f"the campaign is owned by {owner}, another attune process running it; wait "
        "for it to end or `attune stop` it, then `attune tune --resume`"
    )


def _serve_busy(owner: str) -> str:
    return (
        f"the App's state directory is held by {owner}, another `attune serve`; stop it "
        "first, or give this server its own ATTUNE_STATE_DIR"
    )


def _acquire(
    workdir: Path, lock_file: str = LOCK_FILE, busy: Callable[[str], str] = _campaign_busy
) -> Path:
    key = workdir.resolve() / lock_file
    with _guard:
        if key in _held:
            lock, depth = _held[key]
            _held[key] = (lock, depth + 1)
            return key
        if not key.parent.is_dir():
            why = "not a directory" if key.parent.exists() else "no such directory"
            raise AttuneError(f"no campaign here ({why})", path=str(workdir))
        lock = open(key, "a+")  # noqa: SIM115 - held past this function
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = _owner(lock)
            lock.close()
            raise AttuneError(busy(owner), path=str(workdir)) from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        _held[key] = (lock, 1)
        return key


def _release(key: Path) -> None:
    with _guard:
        lock, depth = _held[key]
        if depth > 1:
            _held[key] = (lock, depth - 1)
            return
        del _held[key]
        lock.close()  # closing the last descriptor drops the flock


@contextlib.contextmanager
def own_campaign_dir(workdir: Path) -> Iterator[None]:
    """Hold ``workdir``'s campaign lock for the block; AttuneError (exit 2) when another
    process holds it."""
    key = _acquire(workdir)
    try:
        yield
    finally:
        _release(key)


@contextlib.contextmanager
def own_state_dir(state_dir: Path) -> Iterator[None]:
    """Hold ``attune serve``'s state directory (made if missing) for the block; AttuneError
    (exit 2) naming the directory and the holder's pid when another server holds it."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AttuneError(
            f"cannot make the App's state directory ({exc.strerror})", path=str(state_dir)
        ) from None
    key = _acquire(state_dir, SERVE_LOCK_FILE, _serve_busy)
    try:
        yield
    finally:
        _release(key)
