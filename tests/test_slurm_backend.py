"""The Slurm backend against a real Slurm (slurmctld, slurmd, slurmrestd, munged on loopback,
``tests/slurm_cluster.py``): real jobs of the embedded workload, and what the ledger would
charge for each checked against Slurm's own elapsed time (``scontrol show job``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import LocalExecutor
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.models import Recipe, TrialResult
from runners.adapter import LaunchSpec
from runners.backends import make_backend
from runners.bench import Launch, collect, start_bench
from runners.slurm.backend import SlurmBackend
from runners.slurm.settings import SlurmSettings
from tests.conftest import ROOT, SMALL_CONFIG
from tests.slurm_cluster import runtime_s

pytestmark = pytest.mark.slurm  # a real Slurm started by tests/slurm_cluster.py

Cluster = Any  # tests.slurm_cluster.SlurmCluster


def assert_charged_as_slurm(slurm: Cluster, launch: Launch, result: TrialResult) -> dict[str, str]:
    """The charge equals Slurm's own elapsed x devices, within one second."""
    assert launch.handle.job_id is not None
    job: dict[str, str] = slurm.show_job(launch.handle.job_id)
    slurm_charge = runtime_s(job["RunTime"]) * result.devices
    assert abs(result.device_seconds - slurm_charge) <= 1.0, (job["RunTime"], result)
    return job


def wait_running(backend: SlurmBackend, launch: Launch, timeout_s: float = 30) -> None:
    assert launch.handle.job_id is not None
    deadline = time.monotonic() + timeout_s
    while not backend.client.job(launch.handle.job_id).running:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.1)


def bench(
    backend: SlurmBackend, recipe: Recipe, workdir: Path, *, steps: int = 4, timeout_s: float = 120
) -> Launch:
    return start_bench(
        recipe, steps=steps, warmup=1, workdir=workdir, timeout_s=timeout_s, backend=backend
    )


def test_the_embedded_workload_on_one_and_two_ranks(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    # the server offers v0.0.37 and v0.0.38; attune speaks v0.0.38 of the two
    assert backend.client.version == "v0.0.38" and backend.client.release == "22.05.8"
    for ranks in (1, 2):
        recipe = small_recipe(tmp_path, f"dp{ranks}", data_parallel_size=ranks)
        launch = bench(backend, recipe, tmp_path / f"dp{ranks}")
        assert launch.handle.backend == "slurm" and launch.handle.pid == 0
        result = collect(launch, backend.wait(launch.handle))
        assert result.status == "ok", result.error
        assert result.devices == ranks and result.nodes == [slurm_env.host]
        assert len(result.steps) == 4 and result.score is not None and result.score > 0
        job = assert_charged_as_slurm(slurm_env, launch, result)
        assert job["JobState"] == "COMPLETED" and job["NodeList"] == slurm_env.host
        assert job["JobName"] == f"attune-dp{ranks}" and job["Requeue"] == "0"
        assert job["TimeLimit"] == "00:03:00"  # 120 s rounded up to minutes, plus a minute
        script = (tmp_path / f"dp{ranks}" / "slurm-job.sh").read_text()
        assert "exec srun --nodes=1 --ntasks=1 --ntasks-per-node=1" in script
        assert f"--cpus-per-task={ranks}" in script


def test_a_job_cancelled_in_slurm_is_a_failed_trial_charged_for_what_it_held(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    launch = bench(backend, small_recipe(tmp_path, "long"), tmp_path / "run", steps=5000)
    wait_running(backend, launch)
    assert launch.handle.job_id is not None
    slurm_env.wait_held(launch.handle.job_id, 1)  # it held its allocation a charged second
    slurm_env.run("scancel", str(launch.handle.job_id))  # an operator's cancel
    result = collect(launch, backend.wait(launch.handle))
    assert result.status == "failed"
    assert f"Slurm job {launch.handle.job_id} CANCELLED" in (result.error or "")
    assert result.device_seconds >= 1
    job = assert_charged_as_slurm(slurm_env, launch, result)
    assert job["JobState"] == "CANCELLED"


def test_a_stop_request_cancels_the_running_job(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    asked = threading.Event()
    backend = SlurmBackend(SlurmSettings.from_env(), should_stop=asked.is_set)
    launch = bench(backend, small_recipe(tmp_path, "long"), tmp_path / "run", steps=5000)
    wait_running(backend, launch)
    threading.Timer(1.0, asked.set).start()
    started = time.monotonic()
    result = collect(launch, backend.wait(launch.handle))
    assert time.monotonic() - started < 10
    assert result.status == "failed" and "cancelled by attune (stop)" in (result.error or "")
    assert_charged_as_slurm(slurm_env, launch, result)


def test_a_job_over_its_wall_clock_limit_is_cancelled_as_a_timeout(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    recipe = small_recipe(tmp_path, "long")
    launch = bench(backend, recipe, tmp_path / "run", steps=5000, timeout_s=4)
    result = collect(launch, backend.wait(launch.handle))
    assert result.status == "timeout", result.error
    assert 4 <= result.released_at - result.allocated_at <= 7
    job = assert_charged_as_slurm(slurm_env, launch, result)
    assert job["JobState"] == "CANCELLED" and job["TimeLimit"] == "00:02:00"


def test_slurmrestd_unreachable_retries_then_the_trial_fails_cleanly(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    backend.client.settings = backend.client.settings.model_copy(
        update={"retries": 2, "retry_wait_s": 0.2}
    )
    recipe = small_recipe(tmp_path, "r")
    before = len(slurm_env.jobs())
    slurm_env.stop_restd()
    try:
        started = time.monotonic()
        launch = bench(backend, recipe, tmp_path / "down")
        waited = time.monotonic() - started
        result = collect(launch, backend.wait(launch.handle))
    finally:
        slurm_env.start_restd()
    assert 0.6 <= waited < 5  # two retries after 0.2 s and 0.4 s
    assert launch.handle.job_id is None and len(slurm_env.jobs()) == before
    assert result.status == "failed" and result.device_seconds == 0 and result.interrupted
    error = result.error or ""
    assert "slurmrestd at http://127.0.0.1:" in error and "unreachable" in error
    assert "POST /slurm/v0.0.38/job/submit, 3 tries" in error
    assert slurm_env.token not in error


def test_a_short_slurmrestd_outage_during_a_job_is_ridden_out(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    launch = bench(backend, small_recipe(tmp_path, "r", n_layer=4), tmp_path / "run", steps=8)
    wait_running(backend, launch)
    slurm_env.stop_restd()
    threading.Timer(1.5, slurm_env.start_restd).start()
    result = collect(launch, backend.wait(launch.handle))
    assert result.status == "ok", result.error
    assert_charged_as_slurm(slurm_env, launch, result)


def test_bad_credentials_are_a_clear_error_and_nothing_runs(
    slurm_env: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = slurm_env.token[:-4] + ("AAAA" if not slurm_env.token.endswith("AAAA") else "BBBB")
    monkeypatch.delenv("ATTUNE_SLURM_TOKEN_FILE")
    monkeypatch.setenv("ATTUNE_SLURM_TOKEN", forged)
    before = len(slurm_env.jobs())
    with pytest.raises(AttuneError) as err:
        make_backend("slurm")
    message = str(err.value)
    assert "cannot ping slurmctld: GET /slurm/v0.0.38/ping answered HTTP 500" in message
    assert "check ATTUNE_SLURM_USER, the token and its key" in message
    assert forged not in message and len(slurm_env.jobs()) == before
    monkeypatch.setenv("ATTUNE_SLURM_TOKEN", slurm_env.make_token("nobody"))
    with pytest.raises(AttuneError, match="the token is for Slurm user 'nobody'"):
        make_backend("slurm")
    expiring = slurm_env.make_token(slurm_env.user, lifespan_s=1)
    monkeypatch.setenv("ATTUNE_SLURM_TOKEN", expiring)
    slurm_env.wait_expired(expiring)
    with pytest.raises(AttuneError, match="the token expired at"):
        make_backend("slurm")


def test_an_unknown_job_names_the_job_the_endpoint_and_slurms_message(slurm_env: Cluster) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    with pytest.raises(AttuneError) as err:
        backend.client.job(999999)
    assert str(err.value) == (
        "cannot read job 999999: GET /slurm/v0.0.38/job/999999 answered HTTP 500: Slurm says: "
        "Unable to find JobId=999999: Invalid job id specified (error 2017, slurm_load_job)"
    )


def test_a_job_submitted_while_every_node_is_down_is_queued_once(
    slurm_env: Cluster, tmp_path: Path, small_recipe: Callable[..., Recipe]
) -> None:
    """Slurm 22.05 answers such a submission with the new job's id AND an error ("Required
    node not available"): the job exists and waits; it must not be submitted again."""
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    slurm_env.set_node("down", reason="attune test: every node down")
    try:
        launch = bench(backend, small_recipe(tmp_path, "r"), tmp_path / "run")
        assert launch.handle.job_id is not None
        warned = (tmp_path / "run" / "slurm-submit-warnings.txt").read_text()
        assert "Required node not available (down, drained or reserved) (error 2068" in warned
        assert slurm_env.show_job(launch.handle.job_id)["JobState"] == "PENDING"
    finally:
        slurm_env.set_node("resume")
    result = collect(launch, backend.wait(launch.handle))
    assert result.status == "ok", result.error
    here = str((tmp_path / "run").resolve())
    assert [j["comment"] for j in slurm_env.jobs()].count(here) == 1
    assert_charged_as_slurm(slurm_env, launch, result)


def test_a_shutdown_cancels_the_running_job(
    slurm_env: Cluster, tmp_path: Path, write_recipe: Callable[..., Path]
) -> None:
    """SIGTERM to `attune bench --backend slurm` unwinds like Ctrl-C: the job is cancelled,
    not left holding its allocation behind a bot that is gone."""
    recipe = write_recipe(tmp_path, "long", **SMALL_CONFIG)
    workdir = (tmp_path / "run").resolve()
    argv = [sys.executable, "-m", "bot.cli", "bench", str(recipe), "--steps", "5000"]
    argv += ["--warmup", "1", "--backend", "slurm", "--workdir", str(workdir)]
    bot = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not [
            j for j in slurm_env.jobs() if j["comment"] == str(workdir) and j["state"] == "RUNNING"
        ]:
            assert bot.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        bot.send_signal(signal.SIGTERM)
        assert bot.wait(timeout=30) == 130
    finally:
        if bot.poll() is None:
            bot.kill()
    (job,) = [j for j in slurm_env.jobs() if j["comment"] == str(workdir)]
    assert job["state"] in ("CANCELLED", "COMPLETING")
    assert "shutdown" in (workdir / "slurm-cancel.json").read_text()


def test_gpus_are_requested_per_node_and_charged_as_allocated(
    slurm_env: Cluster, tmp_path: Path
) -> None:
    """The test node declares 4 GPUs (generic resources over character devices): a launch of
    2 GPUs is allocated 2, sees them as CUDA_VISIBLE_DEVICES and is charged for 2."""
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    probe = "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(1.5)"
    spec = LaunchSpec(argv=[sys.executable, "-c", probe], devices=2, device_kind="gpu")
    handle = backend.start(spec, workdir=tmp_path / "gpu", timeout_s=60)
    outcome = backend.wait(handle)
    assert outcome.returncode == 0 and outcome.devices == 2
    assert Path(outcome.stdout_path).read_text().strip() == "0,1"
    assert handle.job_id is not None
    job = slurm_env.show_job(handle.job_id)
    assert job["TresPerNode"] == "gres:gpu:2"  # devices: gres_detail while it ran
    charged = (outcome.released_at - outcome.allocated_at) * outcome.devices
    assert abs(charged - runtime_s(job["RunTime"]) * 2) <= 1.0
    assert "--gpus-per-node=2" in (tmp_path / "gpu" / "slurm-job.sh").read_text()


def test_a_trial_slurm_never_got_is_recorded_and_the_campaign_waits_for_a_resume(
    slurm_env: Cluster,
    tmp_path: Path,
    small_recipe: Callable[..., Recipe],
    resolve: Callable[[Recipe], Any],
    registry: Any,
) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    backend.client.settings = backend.client.settings.model_copy(
        update={"retries": 1, "retry_wait_s": 0.1}
    )
    recipe = small_recipe(tmp_path, "base")
    effective = resolve(recipe)
    with Ledger(tmp_path / "ledger.db") as ledger:
        executor = LocalExecutor(
            ledger=ledger,
            campaign="c",
            registry=registry,
            workdir=tmp_path / "work",
            budget_device_seconds=3600.0,
            steps=3,
            warmup=1,
            backend=backend,
        )
        slurm_env.stop_restd()
        try:
            launch = executor.launch("baseline-1", "calibration", recipe, effective)
            with pytest.raises(AttuneError, match="trial baseline-1 could not be submitted"):
                executor.finish("baseline-1", launch)
        finally:
            slurm_env.start_restd()
        (finished,) = [e.payload for e in ledger.events("c") if e.kind == "trial_finished"]
        assert finished["status"] == "failed" and finished["interrupted"] is True
        assert finished["device_seconds"] == 0 and "unreachable" in finished["error"]
        # it says nothing about the recipe: the same config may run once the cluster is back
        assert executor.admit("baseline-2", effective) is None


def test_a_silent_job_is_cancelled_as_hung(slurm_env: Cluster, tmp_path: Path) -> None:
    backend = make_backend("slurm")
    assert isinstance(backend, SlurmBackend)
    probe = "import time; print('step 1', flush=True); time.sleep(60)"
    spec = LaunchSpec(
        argv=[sys.executable, "-c", probe], devices=1, device_kind="cpu", hang_timeout_s=2.0
    )
    started = time.monotonic()
    handle = backend.start(spec, workdir=tmp_path / "quiet", timeout_s=120)
    outcome = backend.wait(handle)
    assert outcome.hung and not outcome.timed_out and time.monotonic() - started < 15
    assert handle.job_id is not None
    assert slurm_env.show_job(handle.job_id)["JobState"] == "CANCELLED"
