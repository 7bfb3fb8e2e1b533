"""The simulated GPU cluster (``--backend sim``): runs that launch no training write the
framework's own lines, which attune's real parsers, checks and charge read; its truth is hidden
from every agent; it is refused on GitHub's bench path."""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import pytest

from bot.cli import main
from gate.errors import AttuneError
from gate.recipe import load_recipe
from perfmodel import workload_of
from runners.adapters import get_adapter
from runners.backends import make_backend, simulation_params
from runners.bench import run_bench
from runners.sim.backend import RUN_FILE, SimBackend, recipe_hardware
from runners.sim.truth import SimParams, log_deviation, true_layout
from tests.test_layering import import_graph

ROOT = Path(__file__).resolve().parent.parent
MEGATRON = ROOT / "examples" / "megatron" / "llama3-8b.yaml"
TITAN = ROOT / "examples" / "torchtitan" / "llama3-8b.yaml"


def _variant(tmp_path: Path, source: Path, old: str, new: str) -> Path:
    text = source.read_text()
    assert old in text
    path = tmp_path / source.name
    path.write_text(text.replace(old, new))
    return path


def test_no_agent_can_reach_the_truth() -> None:
    """No module under bot/agents/ imports runners.sim, directly or through anything else
    (function-level imports included): agents learn the simulated cluster only from runs."""
    graph = import_graph(("bot", "runners", "gate", "perfmodel"))
    agents = [m for m in graph if m == "bot.agents" or m.startswith("bot.agents.")]
    assert agents
    seen, stack = set(agents), list(agents)
    while stack:
        for dep in graph.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    assert not {m for m in seen if m == "runners.sim" or m.startswith("runners.sim.")}
    assert "runners.bench" in seen  # the benchmark is reachable; the truth is not behind it


def test_a_megatron_run_is_parsed_checked_and_charged_on_the_simulated_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = load_recipe(MEGATRON)
    backend = SimBackend(SimParams(seed=3))
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)
    result = run_bench(
        recipe, steps=8, warmup=3, workdir=tmp_path / "t", profile=True, backend=backend
    )
    assert sum(slept) < 1.0  # nothing sleeps for simulated time (a wall-clock bound is load-bound)
    assert result.status == "ok" and len(result.steps) == 8
    effective = get_adapter("megatron").resolve(recipe)
    hardware, memory = recipe_hardware(recipe)
    truth = true_layout(effective, hardware, backend.params, device_memory_gib=memory)
    assert result.score == pytest.approx(truth.tokens_per_s_per_device, rel=0.12)
    assert result.step1_loss is not None and result.steps[-1].peak_memory_bytes > 40 * 2**30
    record = json.loads((tmp_path / "t" / RUN_FILE).read_text())
    assert record["simulated"] is True and record["params"]["seed"] == 3
    # charged like a real run: the simulated wall time (start-up + every step) x devices
    wall = result.released_at - result.allocated_at
    assert wall == pytest.approx(record["simulated_wall_s"])
    assert wall > 60 + sum(r.step_seconds for r in result.steps) and result.devices == 8
    # the profile's traces read by the real GPU profile rules
    assert result.profile is not None and result.profile.compute > 0.5
    assert result.profile.ranks is not None and len(result.profile.ranks) == 8
    assert result.log_path is not None and "SIMULATED" in Path(result.log_path).read_text()


def test_runs_of_one_layout_differ_by_noise_and_the_same_run_repeats(tmp_path: Path) -> None:
    recipe = load_recipe(TITAN)
    backend = SimBackend(SimParams(seed=5, cv=0.03))
    scores = [
        run_bench(recipe, steps=6, warmup=2, workdir=tmp_path / f"r{i}", backend=backend).score
        for i in range(6)
    ]
    assert all(s is not None for s in scores)
    cv = statistics.stdev(s for s in scores if s) / statistics.mean(s for s in scores if s)
    assert 0.003 < cv < 0.1
    again = run_bench(recipe, steps=6, warmup=2, workdir=tmp_path / "x" / "r0", backend=backend)
    assert again.score == pytest.approx(scores[0])  # same seed, same run name: same run


def test_a_layout_beyond_the_device_dies_of_out_of_memory(tmp_path: Path) -> None:
    path = _variant(
        tmp_path, MEGATRON, '- --micro-batch-size\n  - "1"', '- --micro-batch-size\n  - "8"'
    )
    result = run_bench(
        load_recipe(path), steps=6, warmup=2, workdir=tmp_path / "t", backend=SimBackend()
    )
    assert result.status == "oom" and "CUDA out of memory" in (result.error or "")
    assert result.released_at - result.allocated_at > 60  # the start-up was paid


@pytest.mark.parametrize(
    ("rates", "status"), [({"hang_rate": 1.0}, "hang"), ({"crash_rate": 1.0}, "failed")]
)
def test_hangs_and_crashes_at_their_rates(
    tmp_path: Path, rates: dict[str, float], status: str
) -> None:
    result = run_bench(
        load_recipe(TITAN),
        steps=6,
        warmup=2,
        workdir=tmp_path / "t",
        backend=SimBackend(SimParams(**rates)),
    )
    assert result.status == status and len(result.steps) < 6
    if status == "failed":
        assert "NCCL error" in (result.error or "")


def test_the_deviation_is_seeded_structured_and_has_its_spread() -> None:
    effective = get_adapter("megatron").resolve(load_recipe(MEGATRON))
    base = workload_of(effective)
    layouts = [
        base.model_copy(update={"tp": tp, "micro_batch": mb, "recompute": rc, "cp": cp})
        for tp in (1, 2, 4, 8)
        for mb in (1, 2, 4)
        for rc in ("none", "selective", "full")
        for cp in (1, 2)
    ]
    params = SimParams(seed=11, spread=0.15)
    devs = [log_deviation(w, params) for w in layouts]
    assert devs == [log_deviation(w, params) for w in layouts]  # deterministic
    assert devs != [log_deviation(w, SimParams(seed=12, spread=0.15)) for w in layouts]
    assert 0.05 < statistics.pstdev(devs) < 0.3
    assert all(d == 0 for d in (log_deviation(w, SimParams(spread=0.0)) for w in layouts))
    # structured by lever: changing one lever moves every layout by a shared main effect
    one = [
        log_deviation(w.model_copy(update={"overlap_grad_reduce": True}), params) for w in layouts
    ]
    shifts = [a - b for a, b in zip(one, devs, strict=True)]
    assert statistics.pstdev(shifts) < statistics.pstdev(devs)
    assert all(math.isfinite(d) for d in devs)


def test_the_embedded_workload_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(AttuneError, match="runs for real on this machine"):
        run_bench(
            load_recipe(ROOT / "examples" / "ported-gpt.yaml"),
            steps=4,
            warmup=1,
            workdir=tmp_path / "t",
            backend=SimBackend(),
        )


def test_settings_come_from_attune_sim_variables() -> None:
    params = simulation_params("sim", {"ATTUNE_SIM_SEED": "7", "ATTUNE_SIM_SPREAD": "0.3"})
    assert params is not None and params["seed"] == 7 and params["spread"] == 0.3
    assert simulation_params("local", {}) is None
    with pytest.raises(AttuneError, match="ATTUNE_SIM_"):
        simulation_params("sim", {"ATTUNE_SIM_CV": "-1"})


def test_github_actions_bench_path_refuses_the_simulated_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The bench workflow on a self-hosted runner runs ``attune bench`` inside GitHub
    Actions: there a simulated run would reach a pull request as a measurement."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    code = main(["bench", str(MEGATRON), "--backend", "sim", "--workdir", str(tmp_path / "w")])
    assert code == 2 and "refused in a GitHub Actions job" in capsys.readouterr().err
    assert not (tmp_path / "w" / RUN_FILE).exists()
    with pytest.raises(AttuneError, match="GitHub Actions"):
        make_backend("sim")


def test_github_mode_refuses_a_simulated_campaign() -> None:
    """The GitHub App's executor is never the simulated cluster, whatever a ledger says."""
    from bot.github.campaign_thread import make_executor
    from gate.events_campaign import CampaignOpened as CampaignParams

    params = CampaignParams(
        baseline="llama3-8b",
        recipe_path="recipes/llama3-8b.yaml",
        recipe_text=MEGATRON.read_text(),
        framework="megatron",
        budget_device_hours=4.0,
        steps=8,
        warmup=3,
        agent="rules",
        calibration_runs=5,
        max_trials=4,
        backend="sim",
        simulation=SimParams().model_dump(),
    )
    with pytest.raises(AttuneError, match="no simulated campaign"):
        make_executor(
            None,  # type: ignore[arg-type]  # refused before the settings are read
            repo=None,  # type: ignore[arg-type]
            running=None,  # type: ignore[arg-type]
            authorize=lambda _action: None,
            bot_login=lambda: "attune[bot]",
            ledger=None,  # type: ignore[arg-type]
            campaign="c",
            registry=None,  # type: ignore[arg-type]
            params=params,
        )
