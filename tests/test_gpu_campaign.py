"""Whole campaigns on the Megatron-LM and torchtitan examples, launched through the real launch
path with a TEST DOUBLE of torchrun (``tests/replay_launcher.py``) that replays recorded
framework logs: the real parsers, scoring, profiles, memory checks, post-launch gate, forge
and report."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bot.cli import main
from bot.forges.local import LocalForge
from bot.state.fold import fold
from gate.ledger import Ledger
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # real training runs or whole campaigns

FIXTURES = ROOT / "tests" / "fixtures"


def replaying_runner(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, log: str, capacity_gib: float = 80.0
) -> None:
    """The runner's settings: a Megatron-LM checkout and the test double as the launcher."""
    checkout = tmp_path / "Megatron-LM"
    checkout.mkdir()
    (checkout / "pretrain_gpt.py").write_text("# never run: the launcher is a test double\n")
    monkeypatch.setenv("ATTUNE_MEGATRON_PATH", str(checkout))
    launcher = [
        sys.executable,
        "-m",
        "tests.replay_launcher",
        "--log",
        str(FIXTURES / "logs" / log),
        "--capacity-gib",
        str(capacity_gib),
        "--compute-traces",
        str(FIXTURES / "traces" / "compute_bound_2rank"),
        "--comm-traces",
        str(FIXTURES / "traces" / "comm_bound"),
    ]
    monkeypatch.setenv("ATTUNE_LAUNCHER", " ".join(launcher))
    monkeypatch.setenv("ATTUNE_SKIP_DOCTOR", "1")  # the ranks are replayed, not on this machine


def tune(recipe: str, workdir: Path, *extra: str) -> int:
    args = ["tune", str(ROOT / recipe), "--budget", "2", "--workdir", str(workdir)]
    args += ["--max-pairs", "0", "--confirm-pairs", "0"]  # the launch is under test, not judgement
    return main([*args, "--steps", "8", "--warmup", "2", "--max-trials", "6", *extra])


@pytest.mark.slow
def test_a_megatron_recipe_is_tuned_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replaying_runner(monkeypatch, tmp_path, "megatron/healthy_single_node.log")
    work = tmp_path / "run"
    assert tune("examples/megatron/llama3-8b.yaml", work) == 0
    with Ledger(work / "ledger.db") as ledger:
        events = ledger.events()
    state = fold(events[0].campaign, events)
    calibration = state.role_trials("calibration")
    assert [t.finished.status for t in calibration if t.finished] == ["ok"] * 5
    # every run: the harness's arguments recorded, the recipe's own replaced ones named
    harness, overridden = state.harness
    assert harness[:2] == ["--train-samples", str(8 * 128)]
    assert "--log-throughput" in harness and "--train-samples 1953125000" in overridden
    first = calibration[0].finished
    assert first is not None and first.peak_memory_bytes is not None
    assert first.peak_memory_bytes > 40 * 2**30
    assert first.step1_loss == pytest.approx(11.03568)
    # the profile of a GPU run, per rank
    profile = state.profiles["baseline"]
    assert profile.ranks is not None and len(profile.ranks) == 8
    # a candidate: one lever, its registry source, predicted memory, gated, run, judged
    c1 = state.candidates[0]
    assert c1.proposal is not None and c1.proposal.lever == ["micro_batch_size"]
    assert c1.proposal.sources[0].startswith("megatron/training/")
    assert c1.predicted_peak_bytes and c1.gate_verdict == "allow"
    assert c1.judged is not None and c1.judged.decision == "merge" and c1.merged_sha
    assert state.speedup is not None and state.speedup > 1.03
    # the pull request and the report show the harness
    with LocalForge(work / "forge", create=False) as forge:
        assert "Benchmark harness (every trial" in forge.get(c1.pr or 0).body
    report = (work / "report.md").read_text()
    assert "## Benchmark harness" in report and f"{state.speedup:.2f}x" in report
    # the campaign stopped on evidence that names the memory model
    assert state.stopped is not None
    assert any("does not fit" in e for e in state.stopped.evidence)


@pytest.mark.slow
def test_an_out_of_memory_candidate_is_closed_and_teaches_the_memory_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the device is smaller than the recipe declares: the first bigger micro-batch runs out
    replaying_runner(monkeypatch, tmp_path, "megatron/healthy_single_node.log", capacity_gib=50)
    work = tmp_path / "run"
    assert tune("examples/megatron/llama3-8b.yaml", work) == 0
    with Ledger(work / "ledger.db") as ledger:
        events = ledger.events()
    state = fold(events[0].campaign, events)
    c1 = state.candidates[0]
    assert c1.finished is not None and c1.finished.status == "oom"
    assert "CUDA out of memory" in (c1.finished.error or "")
    assert c1.judged is not None and c1.judged.decision == "close" and c1.closed
    assert state.speedup == pytest.approx(1.0)
    assert c1.finished.device_seconds > 0  # charged all the same
    # censored: the model now expects at least the capacity from that layout
    from bot.campaign.memory_guard import MemoryGuard

    with Ledger(work / "ledger.db") as ledger:
        calibration = MemoryGuard(ledger, state.campaign).calibration(state)
    assert calibration.ooms == 1 and calibration.oom_bound is not None
    assert calibration.factor >= calibration.oom_bound


@pytest.mark.slow
def test_a_torchtitan_recipe_is_tuned_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replaying_runner(monkeypatch, tmp_path, "torchtitan/healthy_single_node.log")
    work = tmp_path / "run"
    assert tune("examples/torchtitan/llama3-8b.yaml", work) == 0
    with Ledger(work / "ledger.db") as ledger:
        events = ledger.events()
    state = fold(events[0].campaign, events)
    assert state.harness[0][:4] == ["--training.steps", "8", "--metrics.log_freq", "1"]
    first = state.role_trials("calibration")[0].finished
    assert first is not None and first.status == "ok" and first.step1_loss == pytest.approx(12.2654)
    assert state.candidates, "the agent proposed nothing"
    levers = {k for t in state.candidates for k in (t.proposal.lever if t.proposal else [])}
    assert levers <= {
        "compile.enable",
        "activation_checkpoint",
        "training.local_batch_size",
        "parallelism.fsdp_reshard_after_forward",
        "parallelism.tensor_parallel_degree",
    }
    assert all(t.gate_verdict in ("allow", "review") for t in state.candidates)
    assert (work / "report.md").is_file()


@pytest.mark.slow
def test_a_candidate_predicted_not_to_fit_is_refused_before_launch(tmp_path: Path) -> None:
    """Straight through the executor, as a campaign's agent that ignored the memory model
    would get there: refused as predicted_oom, nothing started, nothing charged."""
    from bot.campaign.executor import LocalExecutor
    from bot.campaign.recipe_edit import apply_changes
    from bot.campaign.setup import open_campaign
    from gate.recipe import parse_recipe
    from gate.registry import load_registry
    from runners.adapters import get_adapter

    text = (ROOT / "examples/megatron/llama3-8b.yaml").read_text()
    with Ledger(tmp_path / "ledger.db") as ledger:
        open_campaign(
            ledger,
            "c",
            recipe_text=text,
            recipe_path="recipes/llama3-8b.yaml",
            budget_hours=1.0,
            steps=8,
            warmup=2,
            agent="rules",
            origin={},
        )
        ledger.append("c", "candidate_proposed", _proposal(text))
        executor = LocalExecutor(
            ledger=ledger,
            campaign="c",
            registry=load_registry("megatron", "0.19.2"),
            workdir=tmp_path,
            budget_device_seconds=3600.0,
            steps=8,
            warmup=2,
        )
        big = parse_recipe(apply_changes(text, {"micro_batch_size": 8}), path="c1.yaml")
        refusal = executor.admit("c1", get_adapter("megatron").resolve(big))
        kinds = [e.kind for e in ledger.events("c")]
    assert refusal is not None and refusal.reason == "predicted_oom"
    assert "exceeds" in refusal.message and "less a 10% margin" in refusal.message
    assert kinds[-1] == "launch_refused" and "trial_started" not in kinds


def _proposal(text: str) -> dict[str, object]:
    return {
        "trial": "c1",
        "n": 1,
        "title": "micro_batch_size: 1 -> 8",
        "lever": ["micro_batch_size"],
        "changes": {"micro_batch_size": [1, 8]},
        "coupled": False,
        "bottleneck": "compute",
        "mechanism": "bigger GEMMs",
        "expected_gain_pct": 8.0,
        "sources": [],
        "recipe_text": text,
    }
