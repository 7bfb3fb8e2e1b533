"""The tuner benchmark: its pure computations (device-hours to X% of the optimum, medians,
ratios, the table), the optimum table and its per-machine cache, the sweep's bookkeeping, and
one tiny end-to-end run of ``benchmarks/tuner.py`` over a table of invented numbers (TEST
DOUBLE: ``invented_table``; every campaign step but the run itself is real)."""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks import demo_optimum, optimum, tuner
from benchmarks.optimum_table import Machine, Measurement, OptimumTable, load, save
from benchmarks.table_executor import noise_factor
from benchmarks.tuner_metrics import (
    CampaignResult,
    agent_row,
    hours_to_reach,
    median,
    ratio,
    step_value,
    table,
)
from bot.agents.levers.layout_space import embedded_layouts, layout_key
from bot.state.fold import fold
from gate import budget
from gate.ledger import Ledger
from gate.models import ProfileBreakdown, StepRecord, TrialResult
from gate.recipe import load_recipe

CONFIG = {
    "n_layer": 1,
    "d_model": 16,
    "n_head": 2,
    "seq_len": 8,
    "global_batch_size": 2,
    "threads": 1,
    "micro_batch_size": 1,
    "activation_checkpointing": True,
    "attention": "math",
    "compile": False,
    "optimizer_impl": "for_loop",
}
BASELINE = {k: CONFIG[k] for k in ("threads", "micro_batch_size", "activation_checkpointing")}
BASELINE.update(data_parallel_size=1, attention="math", compile=False, optimizer_impl="for_loop")
MACHINE = Machine(
    cpu_model="Test CPU", cores=1, torch="2.13.0", workload_version="1", recipe="abc",
    steps=6, warmup=2,
)  # fmt: skip


PROFILE = ProfileBreakdown(compute=0.7, communication=0.0, cpu=0.25, idle=0.05, step_seconds=0.1,
                           steps=2)  # fmt: skip


STEPS = [StepRecord(step=i, loss=5.5 - 0.1 * i, grad_norm=1.0, tokens=16, step_seconds=0.1,
                    peak_memory_bytes=1 << 20) for i in range(1, 7)]  # fmt: skip


def speed(layout: dict[str, Any]) -> float:
    """TEST DOUBLE: invented tokens/s of a layout."""
    s = 1000.0 * (1.3 if layout["micro_batch_size"] == 2 else 1.0)
    s *= 0.8 if layout["activation_checkpointing"] else 1.0
    s *= 1.05 if layout["attention"] == "sdpa" else 1.0
    s *= 0.98 if layout["compile"] else 1.0
    return s * {"for_loop": 1.0, "foreach": 1.03, "fused": 1.04}[layout["optimizer_impl"]]


def invented_table() -> OptimumTable:
    """TEST DOUBLE: every compile=false layout of the 1-core space, one compile twin, and three
    runs of the baseline's layout for the noise; device-seconds are 10 per run."""
    tab = OptimumTable(machine=MACHINE, baseline=BASELINE)
    for layout in embedded_layouts(CONFIG, 1):
        if layout["compile"] and layout != {**BASELINE, "compile": True}:
            continue
        spread = (0.99, 1.0, 1.01) if layout == BASELINE else (1.0,)
        scores = [speed(layout) * f for f in spread]
        tab.put(Measurement(layout=layout, scores=scores, device_seconds=[10.0] * len(spread),
                            step1_loss=5.5, profile=PROFILE, profile_seconds=12.0,
                            steps=STEPS if layout == BASELINE else []))  # fmt: skip
    return tab


# --- pure computations ---


def test_hours_to_reach_and_step_values() -> None:
    curve = [(0.01, 1.0), (0.02, 1.5), (0.03, 1.5), (0.03, 1.9), (0.05, 2.0)]
    assert hours_to_reach(curve, 1.9) == 0.03
    assert hours_to_reach(curve, 0.95 * 2.0) == 0.03
    assert hours_to_reach(curve, 2.01) is None
    assert step_value(curve, 0.0) == 1.0
    assert step_value(curve, 0.025) == 1.5
    assert step_value(curve, 1.0) == 2.0


def test_medians_count_never_as_late() -> None:
    assert median([0.1, None, 0.3]) == 0.3
    assert median([0.1, None, None]) is None
    assert median([0.2, 0.4]) == pytest.approx(0.3)


def test_agent_rows_ratios_and_table() -> None:
    def result(agent: str, curve: list[tuple[float, float]]) -> CampaignResult:
        return CampaignResult(agent=agent, seed=0, curve=curve, reported_speedup=None, trials=4)

    rules = [result("rules", [(0.01, 1.0), (0.02, 1.96)]), result("rules", [(0.03, 2.0)])]
    rules.append(result("rules", [(0.01, 1.0), (0.05, 1.5)]))
    rand = [result("random", [(0.06, 1.9), (0.09, 2.0)]) for _ in range(3)]
    slow = [result("tpe", [(0.1, 1.2)]) for _ in range(3)]
    r_row, x_row, t_row = (agent_row(a, rs, 2.0) for a, rs in
                           (("rules", rules), ("random", rand), ("tpe", slow)))  # fmt: skip
    assert r_row.final_speedup == 1.96 and r_row.fraction == pytest.approx(0.98)
    assert r_row.hours_to[0.95] == 0.03 and r_row.reached[0.95] == 2
    assert x_row.hours_to[0.90] == 0.06 and x_row.hours_to[0.95] == 0.06
    assert t_row.hours_to[0.95] is None and t_row.reached[0.95] == 0
    assert ratio(r_row, x_row, 0.95, 0.1) == "0.50"
    assert ratio(r_row, t_row, 0.95, 0.1).startswith("<= 0.30 (tpe did not reach it")
    text = table([r_row, x_row, t_row], optimum=2.0, budget_h=0.1)
    assert "| rules | 3 | 1.96x | 98.0% | 0.0300 (2/3) | 0.0300 (2/3) |" in text
    assert "| tpe | 3 | 1.20x | 60.0% | not reached (0/3) | not reached (0/3) |" in text
    assert "rules / random device-hours to 95% of the optimum: 0.50 (target <= 0.33)" in text


# --- the table and its cache ---


def test_table_optimum_noise_and_compile_estimate() -> None:
    tab = invented_table()
    best = tab.best()
    assert best.layout["micro_batch_size"] == 2 and best.layout["optimizer_impl"] == "fused"
    assert not best.layout["activation_checkpointing"] and best.layout["attention"] == "sdpa"
    assert tab.baseline_score() == pytest.approx(1000 * 0.8 * 1.01)  # its fastest run
    assert tab.noise_cv() == pytest.approx(0.01, rel=0.01)  # three runs of 0.99, 1.0, 1.01
    score_ratio, cost_ratio = tab.compile_factor() or (0.0, 0.0)
    assert score_ratio == pytest.approx(0.98 / 1.01) and cost_ratio == 1.0
    unmeasured = {**best.layout, "compile": True}
    found = tab.lookup(unmeasured)
    assert found is not None and found[1] is True
    assert found[0].score == pytest.approx((best.score or 0) * 0.98 / 1.01)
    assert tab.lookup(best.layout) == (best, False)


def test_cache_hits_the_same_machine_only(tmp_path: Path) -> None:
    tab = invented_table()
    path = save(tab, tmp_path)
    assert path.parent == tmp_path and path.name == f"{MACHINE.key()}.json"
    again = load(MACHINE, tmp_path)
    assert again is not None and again.entries.keys() == tab.entries.keys()
    for change in ({"torch": "2.14.0"}, {"cores": 2}, {"cpu_model": "Other"}, {"recipe": "x"}):
        assert load(MACHINE.model_copy(update=change), tmp_path) is None


def test_sweep_measures_everything_once_and_resumes(tmp_path: Path) -> None:
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({"framework": "embedded", "name": "tiny", "config": CONFIG},
                                     sort_keys=False))  # fmt: skip
    ran: list[str] = []

    def runner(layout: dict[str, Any]) -> Measurement:  # TEST DOUBLE of a real run
        ran.append(layout_key(layout))
        return Measurement(layout=layout, scores=[speed(layout)], device_seconds=[10.0])

    base = load_recipe(recipe)
    tab = optimum.sweep(base, cores=1, top=2, repeats=3, compile_top=1, root=tmp_path,
                        run=runner, say=lambda _: None)  # fmt: skip
    plain = [lay for lay in embedded_layouts(CONFIG, 1) if not lay["compile"]]
    assert len(plain) == 24
    assert all(len(tab.get(lay).scores) >= 1 for lay in plain)  # type: ignore[union-attr]
    leaders = [m.layout for m in tab.ranked()[:2]]
    assert all(len(tab.get(lay).scores) == 3 for lay in [*leaders, BASELINE])  # type: ignore[union-attr]
    compiled = [m.layout for m in tab.entries.values() if m.layout["compile"]]
    assert len(compiled) == 2  # the leader's twin and the baseline's
    assert len(ran) == 24 + 3 * 2 + 2  # each once, 3 layouts twice more, 2 compiled twins
    assert load(tab.machine, tmp_path) is not None
    ran.clear()
    optimum.sweep(base, cores=1, top=2, repeats=3, compile_top=1, root=tmp_path, run=runner,
                  say=lambda _: None)  # fmt: skip
    assert ran == []  # cached: nothing measured again
    optimum.sweep(base, cores=1, top=2, repeats=3, compile_top=1, root=tmp_path, run=runner,
                  say=lambda _: None, passes=2)  # fmt: skip
    assert len(ran) == 24 - 3  # a second pass: every layout not yet run twice, once more
    assert len(set(ran)) == len(ran)


# --- end to end, tiny ---


def test_tuner_quick_run_prints_the_table_and_writes_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_live_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the table covers every run: nothing may run live")

    monkeypatch.setattr(optimum, "run_layout", no_live_run)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({"framework": "embedded", "name": "tiny", "config": CONFIG},
                                     sort_keys=False))  # fmt: skip
    table_path = tmp_path / "table.json"
    table_path.write_text(invented_table().model_dump_json())
    out, plot = tmp_path / "bench", tmp_path / "plot.png"
    rc = tuner.main(["--quick", "--budget", "0.05", "--table", str(table_path), "--recipe",
                     str(recipe), "--out", str(out), "--plot", str(plot)])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0
    for agent in ("rules", "model", "random", "tpe"):
        assert f"| {agent} | 1 |" in text
        assert (out / f"{agent}-0" / "ledger.db").exists()
    assert "rules / random device-hours to 95% of the optimum" in text
    assert "runs replayed from the measured table" in text
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert (out / "tuner-bench.md").read_text().startswith("| agent |")
    # what each campaign spent is what its ledger charged: 10 s a run (12 s a profile run),
    # calibration's 5 runs included, within the budget
    spent = {line.split("|")[1].strip(): float(line.split("|")[7]) for line in text.splitlines()
             if line.startswith(("| rules |", "| model |", "| random |", "| tpe |"))}  # fmt: skip
    for agent, hours in spent.items():
        with Ledger(out / f"{agent}-0" / "ledger.db") as ledger:
            charged = budget.spent_device_seconds(ledger.events(f"{agent}-0"))
        assert hours == pytest.approx(charged / 3600, abs=1e-4)
        assert 50 / 3600 < hours <= 0.05
    # a replayed run reports the baseline's real step records, timed to its replayed score
    result = TrialResult.model_validate_json(
        (out / "random-0" / "trials" / "baseline-1" / "result.json").read_text()
    )
    assert [s.loss for s in result.steps] == [s.loss for s in STEPS]
    assert result.score == pytest.approx(800.0, rel=0.05)  # the table's 800, cv 1%
    assert result.device_seconds == pytest.approx(10.0)


def test_replayed_noise_is_positive_with_the_asked_spread() -> None:
    draws = [random.Random(i).gauss(0.0, 1.0) for i in range(4000)]
    for cv in (0.03, 0.6):
        factors = [noise_factor(cv, z) for z in draws]
        assert min(factors) > 0
        assert statistics.fmean(factors) == pytest.approx(1.0, abs=0.05)
        assert statistics.stdev(factors) == pytest.approx(cv, rel=0.15)


def test_a_campaign_against_the_optimum_from_the_table_and_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``benchmarks/demo_optimum.py`` on a finished campaign: its winner's layout against the
    table's optimum, then side by side (TEST DOUBLE: the side-by-side runs return the invented
    speeds, so the paired ratio is known)."""
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text(yaml.safe_dump({"framework": "embedded", "name": "tiny", "config": CONFIG},
                                     sort_keys=False))  # fmt: skip
    table_path = tmp_path / "table.json"
    tab = invented_table()
    table_path.write_text(tab.model_dump_json())
    out = tmp_path / "bench"
    quick = ["--quick", "--agents", "rules", "--budget", "0.05", "--table", str(table_path)]
    assert tuner.main([*quick, "--recipe", str(recipe), "--out", str(out)]) == 0
    capsys.readouterr()

    def invented_run(base: object, layout: dict[str, Any], **kw: object) -> Measurement:
        return Measurement(layout=dict(layout), scores=[speed(layout)], device_seconds=[10.0])

    monkeypatch.setattr(optimum, "run_layout", invented_run)
    args = [str(out / "rules-0"), "--table", str(table_path), "--pairs", "2"]
    assert demo_optimum.main(args) == 0
    text = capsys.readouterr().out
    with Ledger(out / "rules-0" / "ledger.db") as ledger:
        state = fold("rules-0", ledger.events("rules-0"))
    winner = demo_optimum.layout_from_text(state.incumbent_recipe_text)
    expected = (tab.lookup(winner) or (None, False))[0]
    assert expected is not None and expected.score is not None
    share = expected.score / (tab.best().score or 1.0)
    assert f"from the table: {share:.1%} of the optimum" in text
    assert f"optimum {tab.best().score:9,.0f}" in text
    if winner != tab.best().layout:  # the invented runs have no noise: the ratio is exact
        assert f"side by side: {speed(winner) / speed(tab.best().layout):.1%}" in text
    # no ledger, or no table for this machine: a clear error, exit 2
    assert demo_optimum.main([str(tmp_path)]) == 2
    assert "no ledger here" in capsys.readouterr().err
    monkeypatch.setenv("ATTUNE_CACHE_DIR", str(tmp_path / "empty-cache"))
    assert demo_optimum.main([str(out / "rules-0")]) == 2
    assert "python -m benchmarks.optimum --recipe" in capsys.readouterr().err
