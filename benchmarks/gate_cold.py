"""How long a cold ``attune gate check`` of a recipe pair takes, per framework.

    python benchmarks/gate_cold.py [--repeats 5] [--cores 2]

Each run is a fresh ``python -m bot.cli gate check BASE CAND --json`` process, so every import
(Megatron's included) is paid, as in CI. Pairs run interleaved so machine noise hits all alike.
Prints the median wall time of each pair, its ratio to the embedded pair's median measured in
the same run, and whether it is under the 30 s target for a Megatron pair on 2 cores. Each cold
run gets an empty resolution cache; right after it, the same pair runs warm (its resolutions
cached on disk, no resolver process): target under 1 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TARGET_S = 30.0
WARM_TARGET_S = 1.0

PAIRS: dict[str, tuple[Path, Path, int, str | None]] = {
    # name: (baseline, candidate, expected exit code, module the framework needs)
    "embedded": (EXAMPLES / "ported-gpt.yaml", EXAMPLES / "candidates" / "threads-2.yaml", 0, None),
    "megatron llama3-8b micro-batch-2": (
        EXAMPLES / "megatron" / "llama3-8b.yaml",
        EXAMPLES / "megatron" / "candidates" / "llama3-8b-micro-batch-2.yaml",
        0,
        "megatron.core",
    ),
    "megatron mixtral capacity-factor": (
        EXAMPLES / "megatron" / "mixtral-8x7b.yaml",
        EXAMPLES / "megatron" / "candidates" / "mixtral-8x7b-capacity-factor.yaml",
        1,
        "megatron.core",
    ),
    "torchtitan llama3-8b compile-tp2": (
        EXAMPLES / "torchtitan" / "llama3-8b.yaml",
        EXAMPLES / "torchtitan" / "candidates" / "llama3-8b-compile-tp2.yaml",
        0,
        "torchtitan",
    ),
}


def available(module: str | None, *paths: Path) -> bool:
    if not all(p.is_file() for p in paths):
        return False
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def gate_check(base: Path, cand: Path, cores: int | None, cache: Path) -> tuple[float, int]:
    argv = [sys.executable, "-m", "bot.cli", "gate", "check", str(base), str(cand), "--json"]
    if cores:
        argv = ["taskset", "-c", f"0-{cores - 1}", *argv]
    env = {**os.environ, "ATTUNE_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr)
    return elapsed, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cores", type=int, help="pin each run to this many cores (taskset)")
    args = p.parse_args()

    pairs = {name: spec for name, spec in PAIRS.items() if available(spec[3], spec[0], spec[1])}
    for name in PAIRS.keys() - pairs.keys():
        print(f"skipped {name}: framework or recipe not installed here")
    times: dict[str, list[float]] = {name: [] for name in pairs}
    warm: dict[str, list[float]] = {name: [] for name in pairs}
    with tempfile.TemporaryDirectory() as scratch:
        for i in range(args.repeats):
            for name, (base, cand, expected, _module) in pairs.items():
                cold_cache = Path(scratch) / f"cold-{i}-{len(times[name])}-{name}"
                elapsed, code = gate_check(base, cand, args.cores, cold_cache)
                if code != expected:
                    print(f"{name}: exit {code}, expected {expected}")
                    return 1
                times[name].append(elapsed)
                # warm: the same pair again, its resolutions in the cache the cold run left
                elapsed, code = gate_check(base, cand, args.cores, cold_cache)
                warm[name].append(elapsed)

    baseline = statistics.median(times["embedded"])
    cores = f", pinned to {args.cores} cores" if args.cores else ""
    print(f"cold gate check, median of {args.repeats} (fresh process each{cores}):")
    print(f"{'pair':36} {'median s':>9} {'min s':>7} {'max s':>7} {'vs embedded':>12}  target")
    for name, ts in times.items():
        median = statistics.median(ts)
        verdict = "" if name == "embedded" else ("ok" if median < TARGET_S else "OVER 30 s")
        print(
            f"{name:36} {median:9.2f} {min(ts):7.2f} {max(ts):7.2f} "
            f"{median / baseline:11.2f}x  {verdict}"
        )
    warm_base = statistics.median(warm["embedded"])
    print(f"warm gate check (resolutions cached by the cold run), median of {args.repeats}:")
    print(f"{'pair':36} {'median s':>9} {'vs embedded':>12}  target")
    for name, ts in warm.items():
        median = statistics.median(ts)
        verdict = "" if name == "embedded" else ("ok" if median < WARM_TARGET_S else "OVER 1 s")
        print(f"{name:36} {median:9.2f} {median / warm_base:11.2f}x  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
