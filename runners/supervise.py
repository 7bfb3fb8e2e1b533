"""Hold one launch's allocation: run it, enforce the wall-clock limit, record how it ended.

    python -m runners.supervise --workdir DIR --timeout SECONDS -- ARGV...

The local backend starts this in a session of its own, so it outlives the bot that started
it: a bot killed mid-trial finds, on restart, either this process still running or its
``exit.json`` (return code, whether it timed out, release time). Launch stdout goes to
``DIR/stdout.jsonl``, stderr to ``DIR/launch.log``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

EXIT_FILE = "exit.json"


def proc_stat(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state first), None when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` in the process tree (from /proc)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            fields = proc_stat(entry.name) if entry.name.isdigit() else None
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(proc: subprocess.Popen[bytes]) -> int:
    """Kill the launch and everything below it; return its exit status once all are gone.

    torchrun starts every rank in a session of its own, so killing one process group leaves
    the ranks running: freeze the launcher (nothing new gets spawned), then kill the group of
    every descendant while the launcher still links them to us.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGSTOP)
    below = descendants(proc.pid) if proc.poll() is None else []
    for pid in below:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            pgid = os.getpgid(pid)
            if pgid != os.getpgrp():
                os.killpg(pgid, signal.SIGKILL)
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    returncode = proc.wait()
    deadline = time.monotonic() + 5.0
    while any(alive(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.01)  # SIGKILL is asynchronous: release only once they are gone
    return returncode


def write_exit(workdir: Path, returncode: int | None, timed_out: bool, hung: bool = False) -> None:
    record = {
        "returncode": returncode,
        "timed_out": timed_out,
        "hung": hung,
        "released_at": time.time(),
    }
    tmp = workdir / (EXIT_FILE + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, workdir / EXIT_FILE)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workdir", type=Path, required=True)
    p.add_argument("--timeout", type=float, required=True, help="wall-clock limit (s)")
    p.add_argument(
        "--hang-timeout", type=float, default=None, help="kill after this long without output (s)"
    )
    p.add_argument("argv", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    workdir: Path = args.workdir
    with (workdir / "stdout.jsonl").open("wb") as out, (workdir / "launch.log").open("ab") as err:
        try:
            # the launch gets a process group of its own, below this session
            proc = subprocess.Popen(command, stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            err.write(f"cannot start {command[:1]}: {exc}\n".encode())
            write_exit(workdir, None, False)
            return 1

        def stop(signum: int, frame: FrameType | None) -> None:
            write_exit(workdir, kill_tree(proc), False)
            sys.exit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        hang = hang_limit(args.timeout, args.hang_timeout)
        timed_out, hung, returncode = watch(proc, workdir, args.timeout, hang)
        kill_tree(proc)  # nothing of the launch may outlive it
    write_exit(workdir, returncode, timed_out, hung)
    return 0


def hang_limit(timeout: float, hang_timeout: float | None) -> float | None:
    """The silence after which a launch counts as hung. One at or past the wall-clock limit
    could never fire (the runner's 900 s default against a 600 s run: every hang was reported
    as a timeout); it is cut to half the limit."""
    if hang_timeout is None or hang_timeout < timeout:
        return hang_timeout
    return timeout / 2


def _output_size(workdir: Path) -> int:
    return sum(p.stat().st_size for p in (workdir / "stdout.jsonl", workdir / "launch.log"))


def watch(
    proc: subprocess.Popen[bytes], workdir: Path, timeout: float, hang_timeout: float | None
) -> tuple[bool, bool, int | None]:
    """Wait for the launch: (timed out, hung, return code). Past ``timeout`` seconds, or
    ``hang_timeout`` seconds without a byte of new output, the whole tree is killed."""
    start = last_output = time.monotonic()
    size = _output_size(workdir)
    while True:
        try:
            return False, False, proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if now - start > timeout:
            return True, False, kill_tree(proc)
        grown = _output_size(workdir)
        if grown != size:
            size, last_output = grown, now
        elif hang_timeout is not None and now - last_output > hang_timeout:
            return False, True, kill_tree(proc)


if __name__ == "__main__":
    sys.exit(main())
