"""slurmrestd's answers parsed, requests shaped, scripts rendered, nodes chosen: no cluster.

The v0.0.38 answers are recorded from a real slurmrestd 22.05.8 (``tests/fixtures/slurm/``,
trimmed to the fields attune reads, the temporary directory renamed). The v0.0.40-v0.0.42
answers are built here from the API description (``src/plugins/data_parser/v0.0.42/
parsers.c`` at slurm-24-11-7-1: ``job_state`` a list of ``JOB_STATE`` flags, 9028;
``exit_code`` ``PROCESS_EXIT_CODE_VERBOSE``, 9083; times ``TIMESTAMP_NO_VAL``, 7808/7884;
``{set, infinite, number}``, ``UINT32_NO_VAL_STRUCT``, 9276): there is no newer Slurm to
record them from on Debian 12.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest

from gate.errors import AttuneError
from runners.adapter import LaunchSpec
from runners.local import RunHandle
from runners.run_outcome import classify
from runners.runner_settings import RunnerSettings
from runners.slurm.api import (
    SlurmJob,
    SlurmNode,
    expand_hostlist,
    parse_errors,
    parse_job,
    parse_node,
    wait_status,
)
from runners.slurm.backend import job_outcome
from runners.slurm.client import offered_versions, pick_version
from runners.slurm.jobdesc import JobRequest
from runners.slurm.placement import exclude_nodes
from runners.slurm.script import command_line, job_environment, job_request, render_script
from runners.slurm.settings import SlurmSettings, check_token

FIXTURES = Path(__file__).parent / "fixtures" / "slurm" / "v0.0.38"


def recorded(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return body


def recorded_job(name: str) -> dict[str, Any]:
    job: dict[str, Any] = recorded(name)["jobs"][0]
    return job


# --- v0.0.38, recorded ---


def test_v0038_completed_and_failed_jobs() -> None:
    done = parse_job(recorded_job("job-completed"))
    assert done.state == "COMPLETED" and done.terminal and done.returncode == 0
    assert done.nodes == ["vm"] and done.cpus == 1 and done.gpus is None
    assert done.start_time is not None and done.end_time is not None
    failed = parse_job(recorded_job("job-failed"))  # `exit 3`: wait status 768
    assert failed.state == "FAILED" and failed.returncode == 3
    assert failed.reason == "NonZeroExitCode"
    killed = parse_job(recorded_job("job-signaled"))  # srun reports a SIGKILLed task as 137
    assert killed.returncode == 137


def test_v0038_running_completing_cancelled() -> None:
    running = parse_job(recorded_job("job-running"))
    assert running.running and not running.terminal
    # while running, end_time is the time limit's projection, never a release
    assert running.end_time is not None and running.start_time is not None
    assert running.end_time - running.start_time == 120
    completing = parse_job(recorded_job("job-completing"))
    assert completing.state == "" and completing.flags == ["COMPLETING"]
    assert not completing.terminal  # the flag hides the base state: not over yet
    cancelled = parse_job(recorded_job("job-cancelled"))
    assert cancelled.state == "CANCELLED" and cancelled.terminal
    assert cancelled.describe().startswith(f"Slurm job {cancelled.job_id} CANCELLED")


def test_v0038_node_failure() -> None:
    job = parse_job(recorded_job("job-node-fail"))
    assert job.state == "NODE_FAIL" and job.terminal and job.reason == "NodeDown"
    assert "NODE_FAIL (NodeDown) on vm" in job.describe()


def test_v0038_errors() -> None:
    (unknown,) = parse_errors(recorded("job-unknown"))
    assert unknown.number == 2017 and unknown.source == "slurm_load_job"
    assert unknown.text() == (
        "Unable to find JobId=999999: Invalid job id specified (error 2017, slurm_load_job)"
    )
    (refused,) = parse_errors(recorded("submit-bad-token"))  # spelled error_code on submit
    assert refused.number == 5005 and "Zero Bytes" in refused.error


def test_v0038_nodes() -> None:
    (node,) = [parse_node(n) for n in recorded("nodes")["nodes"]]
    assert node.name == "vm" and node.partitions == ["debug"]
    assert node.state == ["IDLE", "NOT_RESPONDING"] and not node.usable


# --- v0.0.40-v0.0.42, built from the API description ---


def unset() -> dict[str, Any]:
    return {"set": False, "infinite": False, "number": 0}


def num(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


def v0042_job(**over: Any) -> dict[str, Any]:
    job = {
        "job_id": 77,
        "name": "attune-baseline-1",
        "job_state": ["COMPLETED"],
        "state_reason": "None",
        "state_description": "",
        "exit_code": {"status": ["SUCCESS"], "return_code": num(0), "signal": {"id": unset()}},
        "start_time": num(1_700_000_000),
        "end_time": num(1_700_000_042),
        "nodes": "gpu[01-02]",
        "tres_alloc_str": "cpu=32,mem=200G,node=2,billing=32,gres/gpu=16,gres/gpu:h100=16",
    }
    job.update(over)
    return job


def test_v0042_completed_job() -> None:
    job = parse_job(v0042_job())
    assert job.terminal and job.returncode == 0 and job.gpus == 16 and job.cpus == 32
    assert job.nodes == ["gpu01", "gpu02"]
    assert job.end_time is not None and job.start_time is not None
    assert job.end_time - job.start_time == 42


def test_v0042_exit_codes_and_flags() -> None:
    error = {"status": ["ERROR"], "return_code": num(3), "signal": {"id": unset(), "name": ""}}
    assert parse_job(v0042_job(job_state=["FAILED"], exit_code=error)).returncode == 3
    signaled = {
        "status": ["SIGNALED"],
        "return_code": unset(),
        "signal": {"id": num(9), "name": "KILL"},
    }
    assert parse_job(v0042_job(job_state=["CANCELLED"], exit_code=signaled)).returncode == -9
    pending = {"status": ["PENDING"], "return_code": unset(), "signal": {"id": unset()}}
    completing = parse_job(v0042_job(job_state=["CANCELLED", "COMPLETING"], exit_code=pending))
    assert completing.state == "CANCELLED" and completing.flags == ["COMPLETING"]
    assert completing.returncode is None and not completing.terminal
    running = parse_job(
        v0042_job(job_state=["RUNNING"], end_time={"set": True, "infinite": True, "number": 0})
    )
    assert running.running and running.end_time is None
    queued = parse_job(v0042_job(job_state=["PENDING"], start_time=unset(), nodes=""))
    assert queued.start_time is None and queued.nodes == []
    assert parse_job(v0042_job(job_state=["NODE_FAIL"], state_reason="NodeDown")).terminal


def test_v0042_errors_and_nodes() -> None:
    body = {
        "errors": [
            {
                "description": "Unable to find JobId=5",
                "error_number": 2017,
                "error": "Invalid job id specified",
                "source": "_handle_job_get",
            }
        ],
        "warnings": [],
    }
    assert [e.number for e in parse_errors(body)] == [2017]
    node = parse_node({"name": "gpu01", "state": ["IDLE", "DRAIN"], "partitions": ["gpu"]})
    assert not node.usable
    assert parse_node({"name": "gpu02", "state": ["MIXED"], "partitions": ["gpu"]}).usable


# --- pieces ---


def test_hostlists_and_wait_status() -> None:
    assert expand_hostlist("vm") == ["vm"]
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert expand_hostlist("r[1-2]-n[1-2]") == ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
    assert expand_hostlist("") == []
    assert wait_status(768) == 3 and wait_status(9) == -9 and wait_status(0) == 0


def test_versions_discovered_from_the_paths() -> None:
    paths = ["/slurm/v0.0.37/ping", "/slurm/v0.0.38/job/submit", "/openapi/v3"]
    assert offered_versions(paths) == {"v0.0.37", "v0.0.38"}
    assert pick_version({"v0.0.37", "v0.0.38"}) == "v0.0.38"
    assert pick_version({"v0.0.39", "v0.0.40", "v0.0.41"}) == "v0.0.41"
    assert pick_version({"v0.0.36", "v0.0.37"}) is None


def request(**over: Any) -> JobRequest:
    base: dict[str, Any] = dict(
        name="attune-c1",
        script="#!/bin/bash\ntrue\n",
        workdir="/scratch/c1",
        stdout="/scratch/c1/stdout.jsonl",
        stderr="/scratch/c1/launch.log",
        environment={"PATH": "/usr/bin", "A": "1"},
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        time_limit_min=11,
        exclude=["gpu01", "gpu02"],
    )
    return JobRequest(**{**base, **over})


def test_request_bodies_per_version() -> None:
    old = request().body("v0.0.38")
    assert old["script"].startswith("#!/bin/bash") and "script" not in old["job"]
    job = old["job"]
    assert job["environment"] == {"PATH": "/usr/bin", "A": "1"} and job["nodes"] == "2"
    assert job["no_requeue"] is True and "requeue" not in job  # `requeue` would mean --requeue
    assert job["gpus_per_node"] == "8" and job["exclude_nodes"] == "gpu01,gpu02"
    assert job["time_limit"] == 11 and job["partition"] == "gpu"
    new = request().body("v0.0.42")
    assert set(new) == {"job"} and new["job"]["script"].startswith("#!/bin/bash")
    job = new["job"]
    assert job["environment"] == ["PATH=/usr/bin", "A=1"] and job["requeue"] is False
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 11}
    assert job["tres_per_node"] == "gres/gpu:8" and job["excluded_nodes"] == ["gpu01", "gpu02"]
    with pytest.raises(ValueError):
        request(environment={})  # slurmrestd refuses a job without an environment


def gpu_spec(nodes: int, per_node: int = 8) -> LaunchSpec:
    argv = RunnerSettings(python="/opt/train/bin/python").torchrun(
        nodes=nodes, gpus_per_node=per_node
    )
    return LaunchSpec(
        argv=[*argv, "/opt/megatron/pretrain_gpt.py", "--num-layers", "4"],
        env={"NCCL_DEBUG": "WARN"},
        framework="megatron",
        devices=nodes * per_node,
        nodes=nodes,
    )


def test_multi_node_torchrun_meets_on_the_first_node() -> None:
    script = render_script(gpu_spec(2), title="trial c1")
    assert 'ATTUNE_RDZV_HOST="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"' in (
        script
    )
    last = script.splitlines()[-1]
    assert last.startswith(
        "exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 "
        "--gpus-per-node=8 /opt/train/bin/python -m torch.distributed.run --nnodes=2 "
        '--rdzv-backend=c10d --rdzv-endpoint="$ATTUNE_RDZV_HOST":29500 '
        '--rdzv-id="$SLURM_JOB_ID" --nproc-per-node=8 /opt/megatron/pretrain_gpt.py'
    )
    assert "127.0.0.1" not in script  # the runner's local endpoint is replaced
    # one node: the launch as the adapter built it
    single = gpu_spec(1)
    assert command_line(single.argv, 1) == " ".join(single.argv)
    assert "--standalone" in render_script(single, title="t")
    other = ["replay", "--nnodes=2", "x"]  # not torchrun: left alone
    assert command_line(other, 2) == "replay --nnodes=2 x"
    spaced = ["torchrun", "--rdzv-endpoint", "10.0.0.1:6000", "--nnodes", "2", "train.py"]
    assert command_line(spaced, 2) == (
        'torchrun --nnodes=2 --rdzv-backend=c10d --rdzv-endpoint="$ATTUNE_RDZV_HOST":6000 '
        '--rdzv-id="$SLURM_JOB_ID" train.py'
    )


def test_job_request_from_a_launch(tmp_path: Path) -> None:
    spec = LaunchSpec(argv=["python", "-m", "x"], devices=2, device_kind="cpu", cpus_per_device=3)
    req = job_request(
        spec,
        workdir=tmp_path / "c3",
        timeout_s=600,
        partition=None,
        account="proj",
        margin_min=1,
        exclude=[],
    )
    assert req.time_limit_min == 11 and req.cpus_per_task == 6 and req.gpus_per_node is None
    assert req.stdout.endswith("c3/stdout.jsonl") and req.stderr.endswith("c3/launch.log")
    assert req.account == "proj" and req.name == "attune-c3"
    short = job_request(
        spec, workdir=tmp_path, timeout_s=5, partition=None, account=None, margin_min=0, exclude=[]
    )
    assert short.time_limit_min == 1
    with pytest.raises(AttuneError, match="do not split evenly"):
        render_script(gpu_spec(2).model_copy(update={"devices": 9}), title="t")


def test_the_job_sees_no_secret_of_the_bot() -> None:
    bot_env = {"PATH": "/usr/bin", "HOME": "/home/a", "ATTUNE_SLURM_TOKEN": "s3cret", "B": "x"}
    spec = LaunchSpec(argv=["true"], devices=1, env={"OMP_NUM_THREADS": "2"}, framework="embedded")
    env = job_environment(spec, bot_env)
    assert set(env) == {"OMP_NUM_THREADS", "PATH", "HOME", "PYTHONPATH"}
    assert env["OMP_NUM_THREADS"] == "2" and env["HOME"] == "/home/a"
    assert env["PATH"].endswith("/usr/bin")  # the runner's (its interpreter's bin first)


def nodes(*spec: str) -> list[SlurmNode]:
    out = []
    for item in spec:
        name, _, state = item.partition(":")
        out.append(SlurmNode(name=name, state=[state or "IDLE"], partitions=["p"]))
    return out


def test_calibration_spreads_over_nodes() -> None:
    four = nodes("a", "b", "c", "d")
    assert exclude_nodes(four, [], needed=1) == []
    assert exclude_nodes(four, ["a"], needed=1) == ["a"]
    assert exclude_nodes(four, ["a", "b", "c"], needed=1) == ["a", "b", "c"]
    # every node used: stay off the most recent ones, keep enough to run
    assert exclude_nodes(four, ["a", "b", "c", "d"], needed=1) == ["b", "c", "d"]
    assert exclude_nodes(four, ["a", "b", "a"], needed=3) == ["a"]
    # a node that is down cannot run it anyway; one that is not in the partition neither
    assert exclude_nodes(nodes("a", "b:DOWN"), ["a"], needed=1) == []
    assert exclude_nodes(four, ["a"], needed=1, partition="other") == []
    assert exclude_nodes(nodes("only"), ["only"], needed=1) == []  # one node: nothing to spread


def jwt_for(user: str, exp: float) -> str:
    return jwt.encode({"sun": user, "exp": int(exp), "iat": int(time.time())}, "k" * 32)


def test_settings_and_tokens(tmp_path: Path) -> None:
    with pytest.raises(AttuneError, match="ATTUNE_SLURM_URL: not set"):
        SlurmSettings.from_env({})
    with pytest.raises(AttuneError, match=r"ATTUNE_SLURM_URL: .*http"):
        SlurmSettings.from_env({"ATTUNE_SLURM_URL": "ctl:6820"})
    with pytest.raises(AttuneError, match="ATTUNE_SLURM_POLL_S"):
        SlurmSettings.from_env({"ATTUNE_SLURM_URL": "http://h:1", "ATTUNE_SLURM_POLL_S": "-1"})
    base = {"ATTUNE_SLURM_URL": "https://h:6820/", "ATTUNE_SLURM_USER": "ana"}
    settings = SlurmSettings.from_env(base)
    assert settings.url == "https://h:6820"
    with pytest.raises(AttuneError, match="exactly one of ATTUNE_SLURM_TOKEN"):
        settings.read_token()
    good = jwt_for("ana", time.time() + 600)
    token_file = tmp_path / "token"
    token_file.write_text(f"SLURM_JWT={good}\n")  # `scontrol token` output as is
    from_file = SlurmSettings.from_env({**base, "ATTUNE_SLURM_TOKEN_FILE": str(token_file)})
    assert from_file.read_token() == good
    assert good not in repr(SlurmSettings.from_env({**base, "ATTUNE_SLURM_TOKEN": good}))
    for token, why in (
        ("not-a-jwt", "not a JWT"),
        (jwt_for("bob", time.time() + 600), "for Slurm user 'bob', not 'ana'"),
        (jwt_for("ana", time.time() - 5), "expired"),
    ):
        with pytest.raises(AttuneError, match=why) as err:
            check_token(token, user="ana", source="ATTUNE_SLURM_TOKEN")
        assert token not in str(err.value)


@pytest.mark.parametrize(
    ("state", "reason", "status", "interrupted", "error"),
    [
        ("COMPLETED", None, "failed", False, "exited 0 after 0 of 4 steps"),
        ("FAILED", None, "failed", False, "exit status 3"),
        ("TIMEOUT", None, "timeout", False, "wall-clock limit"),
        ("CANCELLED", "timeout", "timeout", False, "wall-clock limit"),
        ("CANCELLED", "hang", "hang", False, "no output for too long"),
        ("CANCELLED", "stop", "failed", True, "CANCELLED on n1: cancelled by attune (stop)"),
        ("CANCELLED", None, "failed", True, "Slurm job 9 CANCELLED on n1"),
        ("NODE_FAIL", None, "failed", True, "Slurm job 9 NODE_FAIL (NodeDown) on n1"),
        ("PREEMPTED", None, "failed", True, "Slurm job 9 PREEMPTED on n1"),
        ("OUT_OF_MEMORY", None, "oom", False, "out of memory"),
    ],
)
def test_how_a_job_ends_is_how_the_trial_ends(
    tmp_path: Path,
    state: str,
    reason: str | None,
    status: str,
    interrupted: bool,
    error: str,
) -> None:
    handle = RunHandle(backend="slurm", pid=0, workdir=str(tmp_path), allocated_at=100.0, job_id=9)
    job = SlurmJob(
        job_id=9,
        state=state,
        reason="NodeDown" if state == "NODE_FAIL" else "",
        returncode=3 if state == "FAILED" else None,
        start_time=110.0,
        end_time=135.0,
        nodes=["n1"],
    )
    outcome = job_outcome(handle, job, reason)
    # charged from Slurm's own start to end, whatever the end
    assert (outcome.allocated_at, outcome.released_at, outcome.nodes) == (110.0, 135.0, ["n1"])
    got, text = classify(outcome, steps_logged=0, steps_wanted=4, nonfinite=False)
    assert got == status and error in (text or "") and outcome.interrupted is interrupted
    never = SlurmJob(job_id=9, state="CANCELLED", end_time=120.0)  # cancelled while queued
    held = job_outcome(handle, never, "stop")
    assert held.allocated_at == held.released_at == 120.0


def test_gpus_from_the_allocation() -> None:
    assert parse_job(v0042_job()).gpus == 16  # tres_alloc_str, where the cluster tracks GPUs
    held = v0042_job(tres_alloc_str="cpu=2,node=2", gres_detail=["gpu:h100:4(IDX:0-3)"] * 2)
    assert parse_job(held).gpus == 8  # else gres_detail, while the job holds them
    assert parse_job(v0042_job(tres_alloc_str="cpu=2,node=1", gres_detail=[])).gpus is None


def test_without_slurm_the_tests_fail_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import slurm_cluster

    monkeypatch.setattr(slurm_cluster, "_missing", lambda: ["slurmctld", "slurmrestd"])
    monkeypatch.setattr("tests.slurm_cluster.os.geteuid", lambda: 1000)
    with pytest.raises(slurm_cluster.ClusterUnavailable) as err:
        slurm_cluster.ensure_packages()
    assert str(err.value) == (
        "slurmctld, slurmrestd missing and not root; the Slurm tests need a real Slurm: as "
        "root, `apt-get update && apt-get install -y --no-install-recommends slurmctld slurmd "
        "slurm-client slurmrestd munge slurm-wlm-jwt-plugin` (Debian 12: Slurm 22.05)"
    )


def test_calibration_runs_avoid_the_nodes_earlier_ones_ran_on(
    tmp_path: Path, registry: Any
) -> None:
    """The executor hands each calibration run the nodes earlier calibration runs used (the
    ledger's ``trial_finished.nodes``), oldest first; other roles' nodes do not count."""
    from bot.campaign.executor import LocalExecutor
    from gate.ledger import Ledger
    from tests.events_factory import payload

    with Ledger(tmp_path / "ledger.db") as ledger:
        for trial, role, nodes in (
            ("baseline-1", "calibration", ["gpu03"]),
            ("c1", "candidate", ["gpu09"]),
            ("baseline-2", "calibration", ["gpu01", "gpu02"]),
        ):
            ledger.append("c", "trial_started", payload("trial_started", trial=trial, role=role))
            ledger.append(
                "c", "trial_finished", payload("trial_finished", trial=trial, nodes=nodes)
            )
        executor = LocalExecutor(
            ledger=ledger,
            campaign="c",
            registry=registry,
            workdir=tmp_path,
            budget_device_seconds=1.0,
            steps=3,
            warmup=1,
        )
        assert executor.nodes_used("calibration") == ["gpu03", "gpu01", "gpu02"]
        assert executor.nodes_used("profile") == []
