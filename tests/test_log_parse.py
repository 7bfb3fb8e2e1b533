"""``attune log parse`` on the committed logs: every status a campaign reports, read by the same
functions a campaign reads a launch with (``runners.log_failures.run_status``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.cli import main
from bot.commands.log import read_log
from gate.models import TrialStatus
from runners.log_failures import RunEnd, run_status

LOGS = Path(__file__).parent / "fixtures" / "logs"
MEGATRON = ["--framework", "megatron", "--seq-length", "4096", "--world-size", "8"]
TITAN = ["--framework", "torchtitan", "--seq-length", "8192", "--global-batch-size", "8"]


@pytest.mark.parametrize(
    ("log", "options", "status", "decided_by"),
    [
        ("megatron/healthy_single_node.log", ["--exit-code", "0", "--steps", "6"], "ok", None),
        ("megatron/nan_exit0_early.log", ["--exit-code", "0", "--steps", "10"], "nan", "NaN/Inf"),
        ("megatron/nan_unchecked.log", ["--exit-code", "0"], "nan", "NaN/Inf"),
        ("megatron/nan_rerun.log", ["--exit-code", "16"], "nan", "Unexpected result nan"),
        ("megatron/nccl_timeout.log", [], "comm_timeout", "Watchdog caught collective"),
        ("megatron/rank_died.log", ["--exit-code", "1"], "rank_died", "Signal 9 (SIGKILL)"),
        ("megatron/hang.log", ["--ended", "hang", "--steps", "100"], "hang", "killed: no output"),
        ("megatron/hang.log", ["--exit-code", "1", "--steps", "100"], "failed", "exit status 1"),
        ("megatron/hang.log", ["--steps", "100"], "failed", "the log ends after 4 of 100"),
        ("megatron/hang.log", ["--ended", "timeout"], "timeout", "wall-clock limit"),
    ],
)
def test_every_status_of_a_megatron_log(
    log: str,
    options: list[str],
    status: TrialStatus,
    decided_by: str | None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["log", "parse", str(LOGS / log), *MEGATRON, "--warmup", "1", *options, "--json"]
    code = main(argv)
    reading = json.loads(capsys.readouterr().out)
    assert (code, reading["status"]) == (0 if status == "ok" else 1, status), reading
    if decided_by is None:
        assert reading["decided_by"] is None
    else:
        assert decided_by in reading["decided_by"]


def test_a_healthy_megatron_log_gives_what_a_campaign_scores(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["log", "parse", str(LOGS / "megatron/healthy_single_node.log"), *MEGATRON]) == 0
    out = capsys.readouterr().out
    assert re.search(r"status\s+ok", out) and re.search(r"steps parsed\s+6", out)
    assert re.search(r"step-1 loss\s+11\.04", out) and re.search(r"peak memory\s+58\.71 GiB", out)
    assert re.search(r"tokens/s/device\s+[0-9,]+", out)


def test_a_nan_run_that_exits_0_early_is_nan_not_failed() -> None:
    """The run stopped itself after 4 of 10 iterations with exit status 0; iteration 4 logged a
    NaN grad norm. Before, the missing steps were checked first and the run was ``failed``."""
    reading = read_log(
        LOGS / "megatron/nan_exit0_early.log",
        framework="megatron",
        world_size=8,
        seq_length=4096,
        steps=10,
        exit_code=0,
    )
    assert reading.status == "nan" and reading.steps_parsed == 4
    assert reading.tokens_per_second_per_device is None


def test_nan_wins_over_a_timeout_a_hang_and_a_crash_but_not_over_an_oom() -> None:
    oom = ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    for end in (RunEnd(timed_out=True), RunEnd(hung=True), RunEnd(returncode=1), RunEnd()):
        status, _ = run_status(end, steps_logged=3, steps_wanted=10, nonfinite=True, lines=[])
        assert status == "nan", end
    status, _ = run_status(
        RunEnd(returncode=1), steps_logged=3, steps_wanted=10, nonfinite=True, lines=oom
    )
    assert status == "oom"


@pytest.mark.parametrize(
    ("log", "status"),
    [
        ("torchtitan/healthy_single_node.log", "ok"),
        ("torchtitan/nan.log", "nan"),
        ("torchtitan/oom.log", "oom"),
    ],
)
def test_torchtitan_logs(log: str, status: TrialStatus, capsys: pytest.CaptureFixture[str]) -> None:
    main(["log", "parse", str(LOGS / log), *TITAN, "--world-size", "8", "--json"])
    assert json.loads(capsys.readouterr().out)["status"] == status


def test_the_exit_record_beside_the_log_says_how_the_run_ended(tmp_path: Path) -> None:
    (tmp_path / "stdout.log").write_bytes((LOGS / "megatron/hang.log").read_bytes())
    (tmp_path / "exit.json").write_text(json.dumps({"returncode": -9, "hung": True}))
    reading = read_log(tmp_path / "stdout.log", framework="megatron", seq_length=4096)
    assert reading.status == "hang"


def test_a_torchtitan_pipeline_run_reads_the_loss_of_the_last_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PP 2 x FSDP 2 with torchrun's per-rank prefixes: stage 0 (ranks 0-1) logs torchtitan's
    placeholder loss -1.0. The loss read is the last stage's, with or without the prefixes."""
    log = LOGS / "torchtitan/pp_prefixed.log"
    pp = [*TITAN, "--world-size", "4", "--pipeline-parallel", "2", "--json"]
    assert main(["log", "parse", str(log), *pp]) == 0
    reading = json.loads(capsys.readouterr().out)
    assert reading["step1_loss"] == pytest.approx(12.2654) and reading["steps_parsed"] == 8
    bare = tmp_path / "unprefixed.log"
    bare.write_text(re.sub(r"(?m)^\[rank\d\]:", "", log.read_text()))
    assert main(["log", "parse", str(bare), *pp]) == 0
    assert json.loads(capsys.readouterr().out)["step1_loss"] == pytest.approx(12.2654)
    # read as if it had no pipeline: rank 0's placeholder, which the post-launch check rejects
    main(["log", "parse", str(log), *TITAN, "--world-size", "4", "--json"])
    assert json.loads(capsys.readouterr().out)["step1_loss"] == -1.0
