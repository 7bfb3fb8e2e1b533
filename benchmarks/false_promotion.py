"""How often the judgement promotes a recipe that is not faster: A/A comparisons.

    python benchmarks/false_promotion.py simulate [--comparisons 20000] [--cv 0.024]
    python benchmarks/false_promotion.py real [--comparisons 20] [--steps 6] [--warmup 2]
        [--tiny] [--in-process]

Both drive the campaign's own decisions (``gate.sequential``: the one-run bar, one confirming
pair beyond it, then the A/B pairs and the paired rule) with a candidate identical to the
incumbent, so every promotion is a false one.

``simulate``: each comparison calibrates the noise from ``--calibration-runs`` scores, runs the
candidate once, confirms it with one pair beyond the bar and re-measures it A/B when its gain
lands in (0, bar] (or the pair does not confirm it), every score drawn
independently as mean x (1 + N(0, cv)) (``--cv``: the run-to-run noise measured on the machine;
0.024 is what the 2-core demo machine measured), optionally with a shared slow drift
(``--drift``: an AR(1) load factor that moves consecutive runs together). No process runs.

``real``: the embedded workload's example recipe (``examples/ported-gpt.yaml``, or ``--tiny``),
benchmarked for real: the noise is calibrated from five runs, then each comparison runs the
same recipe as the candidate and re-measures it A/B when the campaign would. Each run is
launched as a campaign's trial is, or with ``--in-process`` runs the training loop in this
process (the score counts only the steps after warm-up either way; what it saves is the start-up
of an interpreter and torch per run). Prints each comparison, the totals and the wall time.
The numbers depend on what else the machine runs.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gate import noise, sequential
from gate.models import NoiseModel

ROOT = Path(__file__).resolve().parent.parent
DEMO_CV = 0.024
"""Run-to-run noise of the demo on a 2-core machine (its 7.2% threshold is 3 x cv)."""


class Comparison(BaseModel):
    """One A/A comparison's outcome."""

    decision: str
    """merge (a false promotion) or close."""
    phase: str
    """one-run (a close), confirmed (beyond the one-run bar, and one pair beyond it too) or
    paired: what decided it."""
    runs: int
    """Candidate and incumbent runs it took after calibration (1 + 2 x pairs)."""
    gain: float
    """The first run's gain over the incumbent's score."""
    pairs: int = 0


def compare(
    draw: Callable[[], float],
    model: NoiseModel,
    incumbent_runs: int,
    *,
    candidate: Callable[[], float] | None = None,
    max_pairs: int = sequential.MAX_PAIRS,
    pooled: bool = True,
) -> Comparison:
    """One comparison against a calibrated incumbent, with ``draw`` giving the incumbent's run
    scores and ``candidate`` the candidate's (default: ``draw``, an A/A comparison).
    ``pooled=False`` judges the pairs by their own spread alone (the rule without the
    calibration pooled in, for comparison)."""
    candidate = candidate or draw
    gain = noise.relative_gain(candidate(), model.mean)
    bar = sequential.one_run_bar(model, incumbent_runs)
    first = sequential.first_run(gain, bar)
    if first == "close":
        return Comparison(decision=first, phase="one-run", runs=1, gain=gain)
    pairs: list[tuple[float, float]] = []
    while True:
        pairs.append((draw(), candidate()))  # A (incumbent) then B (candidate)
        if first == "merge" and len(pairs) == 1 and sequential.differences(pairs)[0] > bar:
            # beyond the one-run bar, and one interleaved pair confirms it
            # (bot/campaign/judgement.py)
            return Comparison(decision="merge", phase="confirmed", runs=3, gain=gain, pairs=1)
        verdict = sequential.decide(pairs, max_pairs=max_pairs, noise=model if pooled else None)
        if verdict.decision != "more":
            return Comparison(
                decision=verdict.decision,
                phase="paired",
                runs=1 + 2 * len(pairs),
                gain=gain,
                pairs=len(pairs),
            )


def simulate(
    comparisons: int,
    *,
    cv: float = DEMO_CV,
    calibration_runs: int = noise.MIN_RUNS,
    drift: float = 0.0,
    seed: int = 0,
    gain: float = 0.0,
    candidate_cv: float | None = None,
    max_pairs: int = sequential.MAX_PAIRS,
    pooled: bool = True,
) -> list[Comparison]:
    """``comparisons`` independent comparisons, each with its own calibration. The candidate
    is ``gain`` faster than the incumbent (0: A/A, every merge a false promotion) with run
    noise ``candidate_cv`` (default: the incumbent's ``cv``)."""
    rng = random.Random(seed)
    load = [0.0]
    b_cv = cv if candidate_cv is None else candidate_cv

    def run(mean: float, run_cv: float) -> float:
        # AR(1) machine load shared by consecutive runs (0.9 memory), on top of run noise
        load[0] = 0.9 * load[0] + drift * math.sqrt(1 - 0.81) * rng.gauss(0.0, 1.0)
        return mean * (1.0 + load[0]) * (1.0 + rng.gauss(0.0, run_cv))

    def draw() -> float:
        return run(1000.0, cv)

    def candidate() -> float:
        return run(1000.0 * (1.0 + gain), b_cv)

    out = []
    for _ in range(comparisons):
        model = noise.calibrate([draw() for _ in range(calibration_runs)])
        out.append(
            compare(
                draw,
                model,
                calibration_runs,
                candidate=candidate,
                max_pairs=max_pairs,
                pooled=pooled,
            )
        )
    return out


def summary(results: list[Comparison], *, aa: bool = True) -> str:
    n = len(results)
    merged = [r for r in results if r.decision == "merge"]
    one = sum(r.phase == "confirmed" for r in merged)
    remeasured = sum(r.phase == "paired" for r in results)
    # exact (Clopper-Pearson) upper 95% bound would need a beta quantile; the rule of three
    # (k = 0) and the normal bound otherwise are enough to read the number
    rate = len(merged) / n
    upper = min(1.0, 3.0 / n if not merged else rate + 1.96 * math.sqrt(rate * (1 - rate) / n))
    runs = statistics.fmean(r.runs for r in results)
    return (
        f"{len(merged)} {'false promotions' if aa else 'promotions'} in {n} "
        f"{'A/A ' if aa else ''}comparisons ({rate:.2%}, 95% upper bound "
        f"{upper:.2%}): {one} beyond the one-run bar and confirmed by a pair, "
        f"{len(merged) - one} by the paired rule; "
        f"{remeasured} re-measured; {runs:.2f} runs per comparison"
    )


TINY = {
    "n_layer": 2,
    "n_head": 4,
    "d_model": 64,
    "seq_len": 32,
    "global_batch_size": 8,
    "micro_batch_size": 1,
    "threads": 1,
}
"""``--tiny``: a model whose runs are a few seconds, so 20 comparisons fit in minutes."""


def _recipe(args: argparse.Namespace, tmp: Path) -> Any:
    import yaml

    from gate.recipe import load_recipe

    if not args.tiny:
        return load_recipe(args.recipe)
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump({"framework": "embedded", "name": "tiny", "config": TINY}))
    return load_recipe(path)


def _in_process(recipe: Any, steps: int, warmup: int, workdir: Path) -> float:
    """One run of the embedded workload's training loop in this process (its step lines
    captured and scored as a launch's are): no interpreter and torch start-up per run."""
    import contextlib
    import io
    import json

    from gate.throughput import tokens_per_second_per_device
    from runners.adapters import get_adapter
    from runners.embedded import train

    adapter = get_adapter(recipe.framework)
    effective = adapter.resolve(recipe)
    workdir.mkdir(parents=True)
    config = workdir / "effective-config.json"
    config.write_text(json.dumps(effective.values, sort_keys=True))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        train.main(["--config", str(config), "--steps", str(steps)])
    records = adapter.parse_metrics(out.getvalue().splitlines(), {})
    return tokens_per_second_per_device(records, warmup=warmup, devices=effective.devices)


def real(args: argparse.Namespace) -> int:
    from runners.bench import run_bench

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="attune-aa-") as tmp:
        recipe = _recipe(args, Path(tmp))
        count = [0]

        def draw() -> float:
            count[0] += 1
            workdir = Path(tmp) / f"run-{count[0]}"
            if args.in_process:
                return _in_process(recipe, args.steps, args.warmup, workdir)
            result = run_bench(recipe, steps=args.steps, warmup=args.warmup, workdir=workdir)
            if result.status != "ok" or result.score is None:
                raise SystemExit(f"run {count[0]}: {result.status}: {result.error}")
            return float(result.score)

        calibration = [draw() for _ in range(noise.MIN_RUNS)]
        model = noise.calibrate(calibration)
        print(
            f"calibration: mean {model.mean:,.0f} tokens/s, cv {model.cv:.2%}, threshold "
            f"{model.threshold:.1%}, one-run bar "
            f"{sequential.one_run_bar(model, noise.MIN_RUNS):.1%}",
            flush=True,
        )
        results = []
        for i in range(args.comparisons):
            r = compare(draw, model, noise.MIN_RUNS)
            results.append(r)
            print(
                f"  A/A {i + 1:2d}: first run {r.gain:+.1%} -> {r.decision} ({r.phase}, "
                f"{r.pairs} pairs)",
                flush=True,
            )
    print(summary(results))
    how = "in this process" if args.in_process else "each launched like a campaign's trial"
    print(
        f"{count[0]} real runs ({how}), {time.monotonic() - started:.0f} s wall, "
        f"{args.steps} steps each ({args.warmup} warm-up)"
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("simulate")
    s.add_argument("--comparisons", type=int, default=20000)
    s.add_argument("--cv", type=float, default=DEMO_CV)
    s.add_argument("--drift", type=float, default=0.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--gain", type=float, default=0.0, help="the candidate's true gain (power)")
    s.add_argument("--candidate-cv", type=float, default=None, help="default: --cv")
    s.add_argument("--max-pairs", type=int, default=sequential.MAX_PAIRS)
    s.add_argument(
        "--pairs-only", action="store_true", help="judge pairs by their own spread alone"
    )
    r = sub.add_parser("real")
    r.add_argument("--recipe", type=Path, default=ROOT / "examples" / "ported-gpt.yaml")
    r.add_argument("--comparisons", type=int, default=20)
    r.add_argument("--steps", type=int, default=6)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--tiny", action="store_true", help="a 2-layer 64-wide model, not --recipe")
    r.add_argument(
        "--in-process", action="store_true", help="run the training loop here, not launched"
    )
    args = p.parse_args()
    if args.mode == "real":
        return real(args)
    results = simulate(
        args.comparisons,
        cv=args.cv,
        drift=args.drift,
        seed=args.seed,
        gain=args.gain,
        candidate_cv=args.candidate_cv,
        max_pairs=args.max_pairs,
        pooled=not args.pairs_only,
    )
    aa = args.gain == 0
    what = "A/A" if aa else f"true gain {args.gain:+.1%}"
    print(f"cv {args.cv:.2%}, drift {args.drift:.2%}, {what}: {summary(results, aa=aa)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
