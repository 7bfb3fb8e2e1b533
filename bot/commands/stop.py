"""``attune stop DIR``: ask the campaign running in DIR to stop, and what tune does about it.

The request is a file in the work directory, ``stop-requested``. The running ``attune tune``
polls it between steps (and the Slurm backend while a job runs: it cancels the job, which is
charged for what it held); the campaign then stops as ``requested``. ``attune tune --resume
DIR`` withdraws the request and carries on.
"""

from __future__ import annotations

import contextlib
import getpass
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from bot.console import console
from bot.state.fold import campaign_state, fold
from gate.errors import AttuneError
from gate.events import RESUMABLE
from gate.ledger import Ledger

STOP_FILE = "stop-requested"


def stop(workdir: Path) -> int:
    if not (workdir / "ledger.db").exists():
        raise AttuneError("no campaign here (no ledger.db)", path=str(workdir))
    with Ledger(workdir / "ledger.db") as ledger:  # refuses a file that is not a ledger
        ledger.require_intact("request a stop")
        campaigns = ledger.campaigns()
        state = fold(campaigns[0], ledger.events(campaigns[0])) if campaigns else None
    if state is None:
        raise AttuneError("the ledger holds no campaign: nothing to stop", path=str(workdir))
    if state.stopped is not None:
        raise AttuneError(
            f"campaign {state.campaign} has already stopped "
            f"({state.stopped.reason}): nothing to stop",
            path=str(workdir),
        )
    (workdir / STOP_FILE).write_text("requested by `attune stop`\n")
    console.print(
        f"stop requested: the campaign in {workdir} stops after its current step "
        "(a running Slurm job is cancelled); `attune tune --resume` continues it"
    )
    return 0


def stop_requested(workdir: Path) -> Callable[[], bool]:
    """Whether ``attune stop`` asked the campaign in ``workdir`` to stop."""
    return lambda: (workdir / STOP_FILE).exists()


def withdraw(ledger: Ledger, name: str, workdir: Path) -> None:
    """On ``--resume``: forget a stop request, and reopen a campaign it stopped."""
    (workdir / STOP_FILE).unlink(missing_ok=True)
    stopped = campaign_state(ledger, name).stopped
    if stopped is not None and stopped.reason in RESUMABLE:
        ledger.append(name, "campaign_resumed", {"by": getpass.getuser()})


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, like Ctrl-C, so a shutdown unwinds through the
    backend (the Slurm backend cancels its running job) instead of killing the bot mid-way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
