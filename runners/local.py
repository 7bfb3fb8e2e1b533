"""The local backend: run a launch under a supervisor process that outlives the bot."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from gate.errors import AttuneError
from gate.events import HandleRecord
from runners.adapter import LaunchSpec
from runners.launch_env import launch_environment
from runners.supervise import EXIT_FILE, alive

PROJECT_ROOT = Path(__file__).resolve().parent.parent


RunHandle = HandleRecord
"""What a restarted bot needs to find a launch again; stored in the ledger (one class with the
ledger's ``gate.events.HandleRecord``)."""


class RunOutcome(BaseModel):
    """What a backend reports about one launch."""

    returncode: int | None
    """Exit status; negative for a signal; None when unknown (launch never started, or its
    supervisor was killed)."""
    timed_out: bool
    hung: bool = False
    """Killed after ``hang_timeout_s`` without new output."""
    allocated_at: float
    released_at: float
    """Unix time the devices were free again (after the whole process tree was gone)."""
    stdout_path: str
    log_path: str
    """stderr of the launch: framework warnings and tracebacks."""
    nodes: list[str] | None = None
    """The machines that ran it, when the backend knows (a cluster's node names)."""
    devices: int | None = None
    """Devices the backend allocated, when it says (Slurm's ``gres/gpu``); else the launch's."""
    failure: str | None = None
    """The backend's account of an end the launch did not choose (cancelled, a node failure,
    preemption): the trial's error, before the log's tail."""
    interrupted: bool = False
    """Ended by something other than the recipe (a stop request, a shutdown, a lost node,
    preemption): a failed run that says nothing about the recipe."""
    submitted: bool = True
    """False when the backend could not hand the launch over at all (slurmrestd unreachable):
    nothing ran, nothing is charged, and the campaign stops until it is resumed."""


class Backend(Protocol):
    """Where a launch runs. ``start`` returns at once; the handle survives the bot."""

    name: str

    def start(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunHandle: ...

    def wait(self, handle: RunHandle) -> RunOutcome:
        """Block until the launch is over (also for a handle from an earlier bot process)."""


class LocalBackend:
    """Runs launches on this machine."""

    name = "local"

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunHandle:
        if spec.nodes > 1:
            raise AttuneError(
                f"the launch spans {spec.nodes} nodes; the local backend runs one machine "
                "(use a multi-node backend such as Slurm)"
            )
        workdir = workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / EXIT_FILE).unlink(missing_ok=True)
        env = launch_environment(spec)  # named runner variables + the recipe's allowed env
        argv = [sys.executable, "-m", "runners.supervise", "--workdir", str(workdir)]
        argv += ["--timeout", str(timeout_s)]
        if spec.hang_timeout_s is not None:
            argv += ["--hang-timeout", str(spec.hang_timeout_s)]
        argv += ["--", *spec.argv]
        (workdir / "launch.log").write_bytes(b"")
        allocated_at = time.time()
        with (workdir / "launch.log").open("ab") as err:  # shared with the launch: append
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                cwd=workdir,
                start_new_session=True,  # survives the bot: a restart reconciles it
            )
        self._children[proc.pid] = proc
        return RunHandle(
            backend=self.name, pid=proc.pid, workdir=str(workdir), allocated_at=allocated_at
        )

    def wait(self, handle: RunHandle) -> RunOutcome:
        """Block until the launch is over; works for a handle from an earlier bot process."""
        workdir = Path(handle.workdir)
        exit_file = workdir / EXIT_FILE
        proc = self._children.pop(handle.pid, None)
        if proc is not None:
            proc.wait()
        else:
            while alive(handle.pid) and not exit_file.exists():
                time.sleep(0.2)
        stdout, log = workdir / "stdout.jsonl", workdir / "launch.log"
        if exit_file.exists():
            record = json.loads(exit_file.read_text())
            returncode, timed_out = record["returncode"], record["timed_out"]
            hung = bool(record.get("hung", False))
            released_at = float(record["released_at"])
        else:  # the supervisor itself was killed: the last sign of life is the release
            returncode, timed_out, hung = None, False, False
            released_at = max(
                [handle.allocated_at, *(p.stat().st_mtime for p in (stdout, log) if p.exists())]
            )
        return RunOutcome(
            returncode=returncode,
            timed_out=timed_out,
            hung=hung,
            allocated_at=handle.allocated_at,
            released_at=released_at,
            stdout_path=str(stdout),
            log_path=str(log),
        )
