"""`attune tune --resume DIR` after the bot was killed with SIGKILL, at five phases.

Real processes throughout: the bot runs as `python -m bot.cli tune ...`, the test polls its
ledger read-only until a trigger event appears, kills the bot with SIGKILL (the launches run
under supervisors in sessions of their own and outlive it), then runs `tune --resume DIR`.
Nothing may be lost, nothing charged twice, and a trial that was running is reconciled and
charged from its real allocation to its real release.

Two campaigns, killed at each phase of their chain in turn (each resumed bot is killed again):

- calibration: killed right after ``trial_launched`` of ``baseline-2``; resumed at once, while
  its supervisor still runs; then
  trial: killed right after ``trial_launched`` of candidate ``c1``; resumed only once its
  supervisor has written ``exit.json`` (the run finished while no bot was alive).
- judged: killed right after ``trial_judged`` of ``c1``, before its pull request was settled;
  then settled: killed right after ``pr_merged``/``pr_closed`` of ``c1``, before the next trial;
  then extra: killed right after ``trial_launched`` of the first judgement run (an A/B run, a
  recalibration run or a confirmation run, ``docs/judgement.md``), resumed while it runs; the
  scores decide whether a campaign makes one, and the test says so when it did not.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.forges.local import LocalForge
from bot.render import CAMPAIGN_MARKER, COST_MARKER
from gate.budget import spent_device_seconds, trial_charge
from gate.ledger import Ledger, LedgerEvent
from runners.supervise import EXIT_FILE, alive
from tests.conftest import ATTUNE, ROOT, SMALL_CONFIG

pytestmark = pytest.mark.slow

LEVERS: dict[str, Any] = {
    "activation_checkpointing": True,
    "attention": "math",
    "optimizer_impl": "for_loop",
    "threads": 1,
    "micro_batch_size": 1,
    "global_batch_size": 8,
}
MAX_TRIALS = 2
TUNE_ARGS = ["--budget", "1", "--steps", "4", "--warmup", "1", "--max-trials", str(MAX_TRIALS)]
TUNE_ARGS += ["--max-pairs", "3", "--confirm-pairs", "1"]
"""The judgement's extra runs happen, fewer of them (their kill points: ``EXTRA``)."""
CAMPAIGN_TIMEOUT_S = 600.0
"""A/B re-measurement and the final confirmation add runs to a campaign on a busy machine."""
EXTRA = "<a judgement run>"
"""Scenario trial: the first A/B, recalibration or confirmation run (``run_requested``)."""


@dataclass(frozen=True)
class Scenario:
    kinds: tuple[str, ...]
    """Ledger event kinds that trigger the kill."""
    trial: str
    """Trial id of the triggering event."""
    in_flight: bool
    """The trial is running when the bot dies: the resume must reconcile it."""
    wait_for_exit: bool
    """Resume only after the orphaned supervisor wrote exit.json."""
    optional: bool = False
    """The phase may not come (scores decide whether a campaign makes judgement runs)."""


SCENARIOS = {
    "calibration": Scenario(("trial_launched",), "baseline-2", in_flight=True, wait_for_exit=False),
    "trial": Scenario(("trial_launched",), "c1", in_flight=True, wait_for_exit=True),
    "judged": Scenario(("trial_judged",), "c1", in_flight=False, wait_for_exit=False),
    "settled": Scenario(("pr_merged", "pr_closed"), "c1", in_flight=False, wait_for_exit=False),
    "extra": Scenario(
        ("trial_launched",), EXTRA, in_flight=True, wait_for_exit=False, optional=True
    ),
}
CHAINS = {
    "calibration-then-trial": ("calibration", "trial"),
    "judged-then-settled": ("judged", "settled", "extra"),
}
"""One campaign per chain: killed at each phase in turn, the last resume runs to the end."""


@dataclass
class Kill:
    """One SIGKILL of the bot and the resume that followed it."""

    name: str
    scenario: Scenario
    killed_rc: int
    at_kill: list[LedgerEvent]
    """The ledger as the killed bot left it."""
    supervisor_alive_at_kill: bool
    exit_file_at_kill: bool
    resume_started: float


@dataclass
class Killed:
    """One campaign: killed at each phase of a chain, then resumed to the end."""

    name: str
    kills: list[Kill]
    workdir: Path
    resumed_rc: int
    log: str
    events: list[LedgerEvent]
    """The ledger once the last resumed bot finished."""
    verify_ok: bool


@dataclass
class Uninterrupted:
    workdir: Path
    rc: int
    log: str
    events: list[LedgerEvent]


# --- helpers -----------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ATTUNE_FAULT"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _attune(*args: str) -> list[str]:
    return [*ATTUNE, *args]


def _read(workdir: Path) -> tuple[list[LedgerEvent], bool]:
    with Ledger(workdir / "ledger.db") as ledger:
        return ledger.events(), ledger.verify().ok


def _payloads(events: list[LedgerEvent], kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in events if e.kind == kind]


def _of(events: list[LedgerEvent], kind: str, trial: str) -> list[LedgerEvent]:
    return [e for e in events if e.kind == kind and e.payload.get("trial") == trial]


def _roles(events: list[LedgerEvent]) -> dict[str, str]:
    return {p["trial"]: p["role"] for p in _payloads(events, "trial_started")}


def _resume(workdir: Path, log: Path) -> int:
    with log.open("ab") as out:
        done = subprocess.run(
            _attune("tune", "--resume", str(workdir)),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=workdir.parent,
            timeout=CAMPAIGN_TIMEOUT_S,
        )
    return done.returncode


def _kill_at(
    command: list[str],
    workdir: Path,
    log: Path,
    trigger: Callable[[LedgerEvent], bool],
    optional: bool = False,
) -> tuple[int, list[LedgerEvent]]:
    """Start the bot (``attune tune`` or ``--resume``), SIGKILL it as soon as an event written
    after its start matches ``trigger``."""
    ledger_path = workdir / "ledger.db"
    already = len(_read(workdir)[0]) if ledger_path.exists() else 0
    with log.open("ab") as out:
        bot = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=workdir.parent,
        )
    ledger: Ledger | None = None
    try:
        deadline = time.monotonic() + CAMPAIGN_TIMEOUT_S
        while True:
            # Ledger(path) would create a missing file: wait for the bot to create it
            if ledger is None and ledger_path.exists():
                ledger = Ledger(ledger_path)
            if ledger is not None and any(trigger(e) for e in ledger.events()[already:]):
                os.kill(bot.pid, signal.SIGKILL)
                break
            if optional and bot.poll() is not None and ledger is not None:
                return bot.returncode, ledger.events()  # it ended: the phase never came
            assert bot.poll() is None, f"the bot ended before the trigger:\n{log.read_text()}"
            assert time.monotonic() < deadline, "the trigger event never came"
            time.sleep(0.002)
        rc = bot.wait(timeout=30)
        assert ledger is not None
        return rc, ledger.events()
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()
        if ledger is not None:
            ledger.close()


def _wait_for(path: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _trial_files(workdir: Path) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """trial -> (launch.json, exit.json or None) for every trial directory with a launch."""
    found: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for launch_file in sorted((workdir / "trials").glob("*/launch.json")):
        exit_file = launch_file.with_name(EXIT_FILE)
        exit_record = json.loads(exit_file.read_text()) if exit_file.exists() else None
        found[launch_file.parent.name] = (json.loads(launch_file.read_text()), exit_record)
    return found


# --- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory, write_recipe: Any) -> Path:
    path: Path = write_recipe(
        tmp_path_factory.mktemp("recipe"), "small", **{**SMALL_CONFIG, **LEVERS}
    )
    return path


def _kill_once(name: str, command: list[str], workdir: Path, log: Path) -> Kill | None:
    """Kill the bot ``command`` starts at the phase ``name``; wait as the scenario says. None:
    an optional phase never came and the bot ended."""
    scenario = SCENARIOS[name]
    requested: set[str] = set()

    def trigger(e: LedgerEvent) -> bool:
        if e.kind == "run_requested":
            requested.add(e.payload["trial"])
        if scenario.trial == EXTRA:
            return e.kind in scenario.kinds and e.payload.get("trial") in requested
        return e.kind in scenario.kinds and e.payload.get("trial") == scenario.trial

    killed_rc, at_kill = _kill_at(command, workdir, log, trigger, scenario.optional)
    if killed_rc != -signal.SIGKILL and scenario.optional:
        return None
    hit = [e for e in at_kill if trigger(e)]
    scenario = replace(scenario, trial=str(hit[-1].payload["trial"]))
    launched = _of(at_kill, "trial_launched", scenario.trial)
    supervisor_alive = exit_at_kill = False
    if launched:
        handle = launched[-1].payload["handle"]
        supervisor_alive = alive(int(handle["pid"]))
        exit_at_kill = (workdir / handle["workdir"] / EXIT_FILE).exists()
        if scenario.wait_for_exit:
            _wait_for(workdir / handle["workdir"] / EXIT_FILE)
    return Kill(name, scenario, killed_rc, at_kill, supervisor_alive, exit_at_kill, time.time())


@pytest.fixture(scope="module", params=list(CHAINS))
def killed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, recipe: Path
) -> Iterator[Killed]:
    name: str = request.param
    base = tmp_path_factory.mktemp(f"killed-{name}")
    workdir, log = base / "campaign", base / "bot.log"
    command = _attune("tune", str(recipe), "--workdir", str(workdir), *TUNE_ARGS)
    kills, resumed_rc = [], None
    for phase in CHAINS[name]:
        kill = _kill_once(phase, command, workdir, log)
        if kill is None:  # an optional phase never came: the campaign ran to its end
            resumed_rc = 0
            break
        kills.append(kill)
        command = _attune("tune", "--resume", str(workdir))
    resumed_rc = _resume(workdir, log) if resumed_rc is None else resumed_rc
    events, verify_ok = _read(workdir)
    yield Killed(
        name=name,
        kills=kills,
        workdir=workdir,
        resumed_rc=resumed_rc,
        log=log.read_text(errors="replace"),
        events=events,
        verify_ok=verify_ok,
    )


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, recipe: Path) -> Uninterrupted:
    base = tmp_path_factory.mktemp("uninterrupted")
    workdir, log = base / "campaign", base / "bot.log"
    with log.open("ab") as out:
        done = subprocess.run(
            _attune("tune", str(recipe), "--workdir", str(workdir), *TUNE_ARGS),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=base,
            timeout=CAMPAIGN_TIMEOUT_S,
        )
    events, _ = _read(workdir)
    return Uninterrupted(workdir, done.returncode, log.read_text(errors="replace"), events)


# --- the kill landed where the scenario says ----------------------------------------------


def test_the_kill_landed_in_the_intended_phase(killed: Killed) -> None:
    for kill in killed.kills:
        _landed_in_phase(kill)


def _landed_in_phase(killed: Kill) -> None:
    s, at_kill = killed.scenario, killed.at_kill
    assert killed.killed_rc == -signal.SIGKILL, killed.name
    kinds = [e.kind for e in at_kill]
    assert "campaign_stopped" not in kinds
    assert any(_of(at_kill, kind, s.trial) for kind in s.kinds), "the trigger is in the ledger"
    finished = {p["trial"] for p in _payloads(at_kill, "trial_finished")}
    if s.in_flight:
        # launched, never finished: only a reconciliation can charge it
        assert _of(at_kill, "trial_launched", s.trial)
        assert s.trial not in finished
        assert killed.supervisor_alive_at_kill or killed.exit_file_at_kill
    else:
        # between trials: c1 ran and was judged, nothing in flight
        assert _of(at_kill, "trial_finished", s.trial)
        assert set(_roles(at_kill)) == finished, "no trial was running when the bot died"
    if s.trial == "baseline-2":
        assert "noise_calibrated" not in kinds
        assert finished == {"baseline-1"}


# --- the resumed campaign -----------------------------------------------------------------


def test_resume_finishes_and_keeps_every_event(killed: Killed) -> None:
    assert killed.resumed_rc == 0, killed.log[-4000:]
    assert killed.verify_ok
    kinds = [e.kind for e in killed.events]
    assert kinds.count("campaign_stopped") == 1 and "campaign_stopped" in kinds[-2:]
    assert kinds.count("lessons_proposed") <= 1  # the end step, once across the kills
    # nothing lost: what each killed bot wrote is the unchanged prefix of the final chain
    for kill in killed.kills:
        prefix = killed.events[: len(kill.at_kill)]
        assert [e.hash for e in prefix] == [e.hash for e in kill.at_kill], kill.name
    assert not _payloads(killed.events, "trial_abandoned")


def test_every_launch_is_charged_exactly_once(killed: Killed) -> None:
    events = killed.events
    launched = [p["trial"] for p in _payloads(events, "trial_launched")]
    assert len(launched) == len(set(launched)), "a trial was launched twice"
    finished = Counter(p["trial"] for p in _payloads(events, "trial_finished"))
    assert set(finished) == set(launched)
    assert set(finished.values()) == {1}, f"charged twice: {finished}"
    reconciled = {p["trial"] for p in _payloads(events, "trial_finished") if p["reconciled"]}
    assert reconciled == {k.scenario.trial for k in killed.kills if k.scenario.in_flight}


def test_ledger_charges_equal_the_real_allocations(killed: Killed) -> None:
    events, workdir = killed.events, killed.workdir
    finished = {p["trial"]: p for p in _payloads(events, "trial_finished")}
    charged = {e.payload["trial"]: trial_charge(e) for e in events if e.kind == "trial_finished"}
    by_rule = sum((p["released_at"] - p["allocated_at"]) * p["devices"] for p in finished.values())
    assert spent_device_seconds(events) == pytest.approx(by_rule, abs=1e-6)
    # ground truth from the trial directories: the supervisor's release, the bot's allocation
    files = _trial_files(workdir)
    assert set(files) == set(finished)
    for trial, (launch, exit_record) in files.items():
        assert exit_record is not None, f"{trial}: no {EXIT_FILE}"
        allocated, released = launch["handle"]["allocated_at"], exit_record["released_at"]
        assert finished[trial]["allocated_at"] == allocated
        assert finished[trial]["released_at"] == released
        truth = (released - allocated) * launch["devices"]
        assert charged[trial] == pytest.approx(truth, abs=1e-6), trial
    for kill in killed.kills:
        if not kill.scenario.in_flight:
            continue
        trial = kill.scenario.trial
        killed_at = kill.at_kill[-1].time
        record = _of(events, "trial_finished", trial)[0]
        # allocated by the killed bot, recorded by the resumed one
        assert finished[trial]["allocated_at"] < killed_at < kill.resume_started
        assert record.time > kill.resume_started
        if kill.scenario.wait_for_exit:
            # it ended while no bot was alive: charged to that release, not to the resume
            assert finished[trial]["released_at"] < kill.resume_started


def test_calibration_ends_with_five_ok_runs(killed: Killed) -> None:
    events = killed.events
    roles = _roles(events)
    calibration = [
        p for p in _payloads(events, "trial_finished") if roles[p["trial"]] == "calibration"
    ]
    assert sorted(p["trial"] for p in calibration) == [f"baseline-{i}" for i in range(1, 6)]
    assert all(p["status"] == "ok" for p in calibration)
    noise = _payloads(events, "noise_calibrated")
    assert len(noise) == 1 and noise[0]["runs"] == 5
    assert sorted(noise[0]["scores"]) == sorted(p["score"] for p in calibration)


def test_every_candidate_is_decided_once(killed: Killed) -> None:
    events = killed.events
    candidates = [p["trial"] for p in _payloads(events, "candidate_proposed")]
    assert candidates == [f"c{i}" for i in range(1, MAX_TRIALS + 1)]
    for trial in candidates:
        judged = _of(events, "trial_judged", trial)
        assert len(judged) == 1, trial
        merged, closed = _of(events, "pr_merged", trial), _of(events, "pr_closed", trial)
        assert len(merged) + len(closed) == 1, trial
        assert judged[0].payload["decision"] == ("merge" if merged else "close")


def test_forge_holds_no_duplicate(killed: Killed) -> None:
    events = killed.events
    opened = {p["trial"]: p for p in _payloads(events, "pr_opened")}
    tuned = _payloads(events, "forge_ready")
    assert len(tuned) == 1
    with LocalForge(killed.workdir / "forge", create=False) as forge:
        pulls = [pr for pr in forge.pulls() if "attune:lessons" not in pr.labels]
        heads = Counter(pr.head for pr in pulls)
        assert set(heads.values()) == {1}, f"a branch has two pull requests: {heads}"
        assert len(pulls) == 1 + len(opened)
        assert {pr.number for pr in pulls} == {tuned[0]["tuned_pr"]} | {
            p["pr"] for p in opened.values()
        }
        campaign = [c for c in forge.comments(tuned[0]["tuned_pr"]) if c.marker == CAMPAIGN_MARKER]
        assert len(campaign) == 1
        (stopped,) = _payloads(events, "campaign_stopped")
        assert f"Stopped ({stopped['reason']})." in campaign[0].body
        for trial, p in opened.items():
            pr = forge.get(p["pr"])
            assert pr.head == p["branch"]
            assert pr.state == ("merged" if _of(events, "pr_merged", trial) else "closed")
            # exactly one: a bot killed after pr_merged/pr_closed must not lose it either
            costs = [c for c in forge.comments(p["pr"]) if c.marker == COST_MARKER]
            assert len(costs) == 1, trial


def test_report_is_rebuilt_identically(killed: Killed, tmp_path: Path) -> None:
    workdir = killed.workdir
    written = {name: (workdir / name).read_bytes() for name in ("report.md", "report.png")}
    shutil.copytree(workdir, tmp_path / "copy")  # `attune report` reads the ledger alone
    (tmp_path / "copy" / "report.md").unlink()
    (tmp_path / "copy" / "report.png").unlink()
    assert main(["report", str(workdir)]) == 0
    assert main(["report", str(tmp_path / "copy")]) == 0
    for name, data in written.items():
        assert (workdir / name).read_bytes() == data, name
        assert (tmp_path / "copy" / name).read_bytes() == data, name


def test_resumed_totals_match_an_uninterrupted_campaign(
    killed: Killed, uninterrupted: Uninterrupted
) -> None:
    ref, got = uninterrupted.events, killed.events
    assert uninterrupted.rc == 0, uninterrupted.log[-4000:]
    for events in (ref, got):
        kinds = Counter(e.kind for e in events)
        assert kinds["trial_started"] - kinds["trial_abandoned"] == kinds["trial_finished"]
        finished = Counter(p["trial"] for p in _payloads(events, "trial_finished"))
        assert set(finished.values()) == {1}
        assert set(finished) == set(_roles(events))
    assert not any(p["reconciled"] for p in _payloads(ref, "trial_finished"))
    ref_roles, got_roles = Counter(_roles(ref).values()), Counter(_roles(got).values())
    # the judgement's runs depend on the scores: A/B re-measurement, recalibration, confirmation
    allowed = {"calibration", "profile", "candidate", "layout_check"}
    allowed |= {"remeasure", "recalibration", "confirmation"}
    for roles in (set(ref_roles), set(got_roles)):
        assert {"calibration", "profile", "candidate"} <= roles <= allowed
    assert ref_roles["calibration"] == got_roles["calibration"] == 5
    assert ref_roles["candidate"] == got_roles["candidate"] == MAX_TRIALS
    assert [p["reason"] for p in _payloads(ref, "campaign_stopped")] == [
        p["reason"] for p in _payloads(got, "campaign_stopped")
    ]
    judged = {p["trial"] for p in _payloads(got, "trial_judged")}
    assert judged == {p["trial"] for p in _payloads(got, "candidate_proposed")}


def test_a_judgement_run_killed_in_flight_is_reconciled(killed: Killed) -> None:
    """The A/B, recalibration or confirmation run the bot died during was waited for, charged
    once, and its phase carried on to its decision."""
    if "extra" not in CHAINS[killed.name]:
        pytest.skip(f"{killed.name} is not killed in a judgement run")
    extra = [k for k in killed.kills if k.name == "extra"]
    if not extra:
        pytest.skip("this campaign made no A/B, recalibration or confirmation run")
    trial = extra[0].scenario.trial
    [request] = [p for p in _payloads(killed.events, "run_requested") if p["trial"] == trial]
    [finished] = [p for p in _payloads(killed.events, "trial_finished") if p["trial"] == trial]
    assert finished["reconciled"] and _roles(killed.events)[trial] == request["phase"]
    if request["phase"] == "remeasure":
        assert _of(killed.events, "trial_judged", request["of"])
    elif request["phase"] == "confirmation":
        assert _payloads(killed.events, "confirmation_finished")
    else:
        assert _payloads(killed.events, "noise_recalibrated")
