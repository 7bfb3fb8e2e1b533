"""The local backend: run a launch as a subprocess group with a wall-clock limit."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from pydantic import BaseModel

from runners.adapter import LaunchSpec

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class RunOutcome(BaseModel):
    """What a backend reports about one launch."""

    returncode: int | None
    """Exit status; negative for a signal; None when the launch never started."""
    timed_out: bool
    allocated_at: float
    """Unix time the devices were taken (just before the process started)."""
    released_at: float
    """Unix time the devices were free again (after the whole process group was gone)."""
    stdout_path: str
    log_path: str
    """stderr of the launch: framework warnings and tracebacks."""


class LocalBackend:
    """Runs launches on this machine, one at a time."""

    name = "local"

    def run(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunOutcome:
        workdir.mkdir(parents=True, exist_ok=True)
        stdout_path, log_path = workdir / "stdout.jsonl", workdir / "launch.log"
        env = {k: v for k, v in os.environ.items() if k not in spec.unset_env}
        env.update(spec.env)
        # the launch imports runners.* from this checkout, wherever it runs from
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")])
        )
        with stdout_path.open("wb") as out, log_path.open("wb") as err:
            allocated_at = time.time()
            try:
                proc = subprocess.Popen(
                    spec.argv, stdout=out, stderr=err, env=env, cwd=workdir, start_new_session=True
                )
            except OSError as exc:
                err.write(f"cannot start {spec.argv[0]}: {exc}\n".encode())
                return RunOutcome(
                    returncode=None,
                    timed_out=False,
                    allocated_at=allocated_at,
                    released_at=time.time(),
                    stdout_path=str(stdout_path),
                    log_path=str(log_path),
                )
            timed_out = False
            try:
                returncode = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                returncode = self._kill_group(proc)
            finally:
                if proc.poll() is None:  # interrupted while waiting: leave nothing behind
                    self._kill_group(proc)
            # every rank of a torchrun launch is in the group; make sure none outlives it
            self._kill_group(proc)
            released_at = time.time()
        return RunOutcome(
            returncode=returncode,
            timed_out=timed_out,
            allocated_at=allocated_at,
            released_at=released_at,
            stdout_path=str(stdout_path),
            log_path=str(log_path),
        )

    @staticmethod
    def _kill_group(proc: subprocess.Popen[bytes]) -> int:
        # torchrun starts every rank in a session of its own, so killing the launcher's group
        # alone leaves the ranks running: freeze the group (nothing new gets spawned), then
        # kill the group of every descendant too, while the launcher still links them to us
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGSTOP)
        descendants = _descendants(proc.pid) if proc.poll() is None else []
        own_group = os.getpgrp()
        for pid in descendants:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                pgid = os.getpgid(pid)
                if pgid != own_group:
                    os.killpg(pgid, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
        deadline = time.monotonic() + 5.0
        while any(_alive(pid) for pid in descendants) and time.monotonic() < deadline:
            time.sleep(0.01)  # SIGKILL is asynchronous: release only once they are gone
        return returncode


def _proc_stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    fields = _proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` in the process tree (from /proc; none where it is absent)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            fields = _proc_stat(entry.name) if entry.name.isdigit() else None
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found
