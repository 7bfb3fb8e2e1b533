"""A whole campaign on a real Slurm (``tests/slurm_cluster.py``) with ``--backend slurm``.

One campaign of a few trials (baseline runs, a profile, two candidates) lives through three
accidents: its bot is killed (SIGKILL) while ``baseline-2`` runs as a Slurm job, and the
resumed campaign waits for that same job by its id (no second submission) and charges it;
``attune stop`` while ``baseline-3`` runs cancels that job (charged, interrupted) and stops the
campaign, which ``--resume`` continues with another baseline run in its place; then its node is
set DOWN in the middle of candidate ``c1``, which fails (NODE_FAIL), is charged for what it
held and closed unmeasured, and the campaign goes on. Bad credentials are a clear error with
nothing written and nothing charged.

Each campaign's ledger charge for every trial equals Slurm's own elapsed x devices.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from gate.ledger import Ledger, LedgerEvent
from tests.conftest import ROOT, SMALL_CONFIG, RecipeWriter
from tests.slurm_cluster import runtime_s

pytestmark = pytest.mark.slurm  # a real Slurm started by tests/slurm_cluster.py

Cluster = Any  # tests.slurm_cluster.SlurmCluster
TUNE = ["--budget", "1", "--steps", "4", "--warmup", "1", "--backend", "slurm"]
TUNE += ["--max-pairs", "0", "--confirm-pairs", "0"]  # Slurm is under test, not the judgement


def events_of(workdir: Path) -> list[LedgerEvent]:
    with Ledger(workdir / "ledger.db") as ledger:
        return ledger.events()


def of(events: list[LedgerEvent], kind: str, trial: str | None = None) -> list[dict[str, Any]]:
    return [
        e.payload
        for e in events
        if e.kind == kind and (trial is None or e.payload.get("trial") == trial)
    ]


def assert_every_charge_is_slurms(slurm: Cluster, events: list[LedgerEvent]) -> None:
    """Each Slurm trial: the ledger's charge = Slurm's elapsed x devices, within a second;
    the nodes recorded are the job's."""
    launched = {p["trial"]: p["handle"] for p in of(events, "trial_launched")}
    finished = of(events, "trial_finished")
    assert finished and {p["trial"] for p in finished} <= set(launched)
    for p in finished:
        handle = launched[p["trial"]]
        assert handle["backend"] == "slurm" and handle["job_id"] is not None
        job = slurm.show_job(handle["job_id"])
        elapsed = runtime_s(job["RunTime"])
        assert abs(p["device_seconds"] - elapsed * p["devices"]) <= 1.0, (p["trial"], job)
        if elapsed:
            assert p["nodes"] == [slurm.host], p


def jobs_under(slurm: Cluster, workdir: Path) -> Counter[str]:
    """How many Slurm jobs each trial directory of ``workdir`` was submitted as."""
    trials = str((workdir / "trials").resolve())
    return Counter(Path(j["comment"]).name for j in slurm.jobs() if j["comment"].startswith(trials))


def when_running(slurm: Cluster, name: str, done: threading.Event) -> str | None:
    """The id of job ``name`` once it has run for a second (None if the campaign ended)."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not done.is_set():
        running = [j for j in slurm.jobs() if j["name"] == name and j["state"] == "RUNNING"]
        if running:
            slurm.wait_held(int(running[0]["id"]), 1)  # it has run for a second
            return str(running[0]["id"])
        time.sleep(0.05)
    return None


def accidents(slurm: Cluster, workdir: Path, done: threading.Event, seen: dict[str, str]) -> None:
    """``attune stop`` while baseline-3 runs; the node DOWN while c1 runs, RESUME once over."""
    if when_running(slurm, "attune-baseline-3", done) is None:
        return
    assert main(["stop", str(workdir)]) == 0
    seen["stopped"] = "yes"
    job = when_running(slurm, "attune-c1", done)
    if job is None:
        return
    slurm.set_node("down", reason="attune test: node lost mid-trial")
    while slurm.show_job(int(job))["JobState"] in ("RUNNING", "COMPLETING"):
        time.sleep(0.1)
    seen["c1"] = slurm.show_job(int(job))["JobState"]
    slurm.set_node("resume")


def start_and_kill_during(recipe: Path, workdir: Path, log: Path, trial: str) -> int:
    """Run ``attune tune --backend slurm`` as its own process and SIGKILL it (no shutdown:
    the job must outlive the bot) once ``trial`` is a submitted job; the job's id."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "bot.cli", "tune", str(recipe), "--workdir", str(workdir)]
    with log.open("ab") as out:
        bot = subprocess.Popen(
            [*argv, *TUNE, "--max-trials", "2"], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert bot.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"{trial} never launched"
            if (workdir / "ledger.db").exists():
                launched = of(events_of(workdir), "trial_launched", trial)
                if launched:
                    os.kill(bot.pid, signal.SIGKILL)
                    bot.wait(timeout=30)
                    return int(launched[0]["handle"]["job_id"])
            time.sleep(0.05)
    finally:
        if bot.poll() is None:
            bot.kill()
            bot.wait()


def test_a_campaign_survives_a_killed_bot_and_a_lost_node(
    slurm_env: Cluster, tmp_path: Path, write_recipe: RecipeWriter
) -> None:
    recipe = write_recipe(tmp_path, "ported", **SMALL_CONFIG)
    workdir = tmp_path / "campaign"
    job_id = start_and_kill_during(recipe, workdir, tmp_path / "bot.log", "baseline-2")
    assert slurm_env.show_job(job_id)["JobState"] in ("PENDING", "RUNNING")
    assert not of(events_of(workdir), "trial_finished", "baseline-2")

    # resumed: it waits for baseline-2's job; `attune stop` while baseline-3 runs stops it;
    # resumed again, the node goes DOWN in the middle of c1
    done, seen = threading.Event(), dict[str, str]()
    watcher = threading.Thread(target=accidents, args=(slurm_env, workdir, done, seen))
    watcher.start()
    try:
        assert main(["tune", "--resume", str(workdir)]) == 0
        assert seen.get("stopped") == "yes"
        assert of(events_of(workdir), "campaign_stopped")[-1]["reason"] == "requested"
        assert main(["tune", "--resume", str(workdir)]) == 0
    finally:
        done.set()
        watcher.join()
    events = events_of(workdir)

    (reattached,) = of(events, "trial_finished", "baseline-2")
    assert reattached["reconciled"] is True and reattached["status"] == "ok"
    assert of(events, "trial_launched", "baseline-2")[0]["handle"]["job_id"] == job_id
    submitted = jobs_under(slurm_env, workdir)  # one job per trial: nothing submitted twice
    assert submitted["baseline-2"] == 1 and set(submitted.values()) == {1}, dict(submitted)
    assert len(submitted) == len(of(events, "trial_launched"))

    (stopped,) = of(events, "trial_finished", "baseline-3")
    assert stopped["interrupted"] is True and "cancelled by attune (stop)" in stopped["error"]
    assert of(events, "campaign_resumed")  # the stop request was withdrawn
    (noise,) = of(events, "noise_calibrated")  # five runs that were not interrupted
    assert noise["runs"] == 5 and of(events, "trial_finished", "baseline-6")

    assert seen.get("c1") == "NODE_FAIL", seen
    (c1,) = of(events, "trial_finished", "c1")
    assert c1["status"] == "failed" and "NODE_FAIL (NodeDown" in c1["error"]
    assert c1["interrupted"] is True and c1["device_seconds"] >= 1  # charged for what it held
    (judged,) = of(events, "trial_judged", "c1")
    assert judged["decision"] == "close"
    assert judged["reason"].startswith("not measured: its run was interrupted (Slurm job")
    # the campaign went on: the next candidate ran once the node was back
    assert of(events, "trial_finished", "c2") and of(events, "campaign_stopped")
    assert slurm_env.node_state() == "idle"
    assert_every_charge_is_slurms(slurm_env, events)


def test_bad_credentials_fail_before_anything_is_written(
    slurm_env: Cluster,
    tmp_path: Path,
    write_recipe: RecipeWriter,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    recipe = write_recipe(tmp_path, "ported", **SMALL_CONFIG)
    forged = slurm_env.token[:-4] + ("AAAA" if not slurm_env.token.endswith("AAAA") else "BBBB")
    monkeypatch.delenv("ATTUNE_SLURM_TOKEN_FILE")
    monkeypatch.setenv("ATTUNE_SLURM_TOKEN", forged)
    jobs = len(slurm_env.jobs())
    workdir = tmp_path / "campaign"
    assert main(["tune", str(recipe), "--workdir", str(workdir), *TUNE]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attune: error: cannot ping slurmctld: GET /slurm/v0.0.38/ping")
    assert "check ATTUNE_SLURM_USER, the token and its key" in err and forged not in err
    assert not workdir.exists() and len(slurm_env.jobs()) == jobs
    monkeypatch.delenv("ATTUNE_SLURM_TOKEN")
    assert main(["bench", str(recipe), "--workdir", str(tmp_path / "b"), "--backend", "slurm"]) == 2
    assert "set exactly one of ATTUNE_SLURM_TOKEN and ATTUNE_SLURM_TOKEN_FILE" in (
        capsys.readouterr().err
    )
