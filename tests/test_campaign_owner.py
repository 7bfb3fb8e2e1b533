"""One process owns a campaign directory, and the directory can move.

Real processes: the bot runs as `python -m bot.cli tune ...`, the test watches its ledger
read-only and kills it with SIGKILL at a chosen event; the launches run under supervisors in
sessions of their own and outlive it.

- Two `attune tune --resume DIR` started at once: one runs, the other is refused at once
  (exit 2) with a message naming the owner's pid, and nothing is launched or charged twice.
- A campaign killed while a run is in flight, its directory moved once the run ended, then
  `--resume`d from the new place: the run is found where it is now and charged as it ran (its
  handle's paths are the campaign directory's, not absolute).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.lock import LOCK_FILE
from gate.ledger import Ledger, LedgerEvent
from runners.supervise import EXIT_FILE, alive
from tests.conftest import ATTUNE, ROOT, SMALL_CONFIG

pytestmark = pytest.mark.slow  # a few real training runs each

TUNE_ARGS = ["--budget", "1", "--steps", "4", "--warmup", "1", "--max-trials", "1"]
TIMEOUT_S = 180.0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ATTUNE_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _attune(*args: str, log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [*ATTUNE, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=cwd,
        )


def _events(workdir: Path) -> list[LedgerEvent]:
    with Ledger(workdir / "ledger.db") as ledger:
        return ledger.events()


def _wait_until(
    workdir: Path, bot: subprocess.Popen[bytes], log: Path, hit: Callable[[LedgerEvent], bool]
) -> LedgerEvent:
    """The first event after the ones already there that ``hit`` matches; fails when the bot
    ends first."""
    seen = len(_events(workdir)) if (workdir / "ledger.db").exists() else 0
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        if (workdir / "ledger.db").exists():
            for event in _events(workdir)[seen:]:
                if hit(event):
                    return event
        assert bot.poll() is None, f"the bot ended before the event:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"the event never came:\n{log.read_text()}"
        time.sleep(0.02)


def _kill(bot: subprocess.Popen[bytes]) -> None:
    if bot.poll() is None:
        bot.send_signal(signal.SIGKILL)
    bot.wait(timeout=30)


def _handles(workdir: Path) -> list[dict[str, Any]]:
    return [e.payload["handle"] for e in _events(workdir) if e.kind == "trial_launched"]


@contextlib.contextmanager
def _reaped(workdir: Callable[[], Path]) -> Iterator[None]:
    """Kill the supervisors (and their launches) a killed bot left running."""
    try:
        yield
    finally:
        if (workdir() / "ledger.db").exists():
            for handle in _handles(workdir()):
                if alive(int(handle["pid"])):
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(int(handle["pid"]), signal.SIGKILL)


@pytest.fixture
def recipe(tmp_path: Path, write_recipe: Any) -> Path:
    path: Path = write_recipe(tmp_path / "recipe", "small", **SMALL_CONFIG)
    return path


def test_a_second_resume_is_refused_naming_the_owner_and_nothing_is_charged_twice(
    tmp_path: Path, recipe: Path
) -> None:
    workdir, log = tmp_path / "campaign", tmp_path / "bot.log"
    with _reaped(lambda: workdir):
        opener = _attune(
            "tune", str(recipe), "--workdir", str(workdir), *TUNE_ARGS, log=log, cwd=tmp_path
        )
        _wait_until(workdir, opener, log, lambda e: e.kind == "trial_launched")
        _kill(opener)

        logs = [tmp_path / "first.log", tmp_path / "second.log"]
        bots = [_attune("tune", "--resume", str(workdir), log=x, cwd=tmp_path) for x in logs]
        deadline = time.monotonic() + TIMEOUT_S
        while all(bot.poll() is None for bot in bots):
            assert time.monotonic() < deadline, "neither resume was refused"
            time.sleep(0.05)
        refused = next(i for i, bot in enumerate(bots) if bot.poll() is not None)
        owner = bots[1 - refused]
        message = logs[refused].read_text()
        assert bots[refused].returncode == 2, message
        assert f"the campaign is owned by pid {owner.pid}" in message
        assert (workdir / LOCK_FILE).read_text().strip() == str(owner.pid)

        # the owner carries on alone: it settles the run in flight and launches the next
        _wait_until(workdir, owner, logs[1 - refused], lambda e: e.kind == "trial_launched")
        _kill(owner)

    events = _events(workdir)
    started = Counter(e.payload["trial"] for e in events if e.kind == "trial_started")
    finished = Counter(e.payload["trial"] for e in events if e.kind == "trial_finished")
    assert max(started.values()) == 1, started
    assert max(finished.values()) == 1, finished
    assert finished["baseline-1"] == 1
    with Ledger(workdir / "ledger.db") as ledger:
        assert ledger.verify().ok


def test_a_moved_campaign_dir_resumes_and_charges_the_run_it_left_behind(
    tmp_path: Path, recipe: Path
) -> None:
    first, log = tmp_path / "campaign", tmp_path / "bot.log"
    moved = tmp_path / "elsewhere" / "campaign"
    where = [first]
    with _reaped(lambda: where[-1]):
        bot = _attune(
            "tune", str(recipe), "--workdir", str(first), *TUNE_ARGS, log=log, cwd=tmp_path
        )
        launched = _wait_until(first, bot, log, lambda e: e.kind == "trial_launched")
        _kill(bot)
        trial, handle = launched.payload["trial"], launched.payload["handle"]
        assert handle["workdir"] == f"trials/{trial}"  # the campaign dir's, not this machine's
        deadline = time.monotonic() + TIMEOUT_S
        while not (first / "trials" / trial / EXIT_FILE).exists():
            assert time.monotonic() < deadline, "the orphaned run never ended"
            time.sleep(0.05)

        moved.parent.mkdir()
        first.rename(moved)
        where.append(moved)
        resumed = _attune("tune", "--resume", str(moved), log=log, cwd=tmp_path)
        charged = _wait_until(
            moved,
            resumed,
            log,
            lambda e: e.kind == "trial_finished" and e.payload["trial"] == trial,
        )
        _kill(resumed)

    assert charged.payload["reconciled"] is True
    assert charged.payload["status"] == "ok", charged.payload["error"]
    assert charged.payload["score"] is not None and charged.payload["score"] > 0
    record = json.loads((moved / "trials" / trial / EXIT_FILE).read_text())
    assert charged.payload["allocated_at"] == handle["allocated_at"]
    assert charged.payload["released_at"] == pytest.approx(float(record["released_at"]))
