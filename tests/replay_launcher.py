"""TEST DOUBLE: a stand-in for torchrun that replays recorded Megatron-LM / torchtitan logs.

No GPU here, so the campaign tests point the runner's ``ATTUNE_LAUNCHER`` at this module. It
receives exactly what attune would hand torchrun (launcher flags, the framework's entry point,
the recipe's arguments and the benchmark harness's), and writes what the framework would:

* the step lines of a recorded log (``--log``), one per step the harness asks for, in the
  framework's format and on its stream (Megatron: stdout; torchtitan: stderr), with the
  recorded losses and grad norms (the same for every layout, as a layout-only change keeps
  them), and a step time from a small cost model of the layout (below);
* Megatron's per-rank memory lines / torchtitan's ``memory:`` field from a small memory model,
  and a CUDA out-of-memory traceback and exit 1 when that model says the layout does not fit
  in ``--capacity-gib``;
* when the harness asks for a profile, the recorded GPU traces (``--comm-traces`` when the
  layout communicates a lot, else ``--compute-traces``) where the framework writes them.

The cost and memory models are the double's own, invented to make layouts differ; they are not
attune's predictions and prove nothing about real speed. What the tests prove with it is the
plumbing: the real launch command, the real parsers, scoring, the post-launch gate, memory
refusals, OOM handling, profiles and the report.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import re
import sys
from pathlib import Path

MEGATRON_LINE = re.compile(r"iteration\s+\d+/\s*\d+ \|")
TITAN_STEP = re.compile(r"step:\s*\d+\s")


def _last(tokens: list[str], flag: str, default: str | None = None) -> str | None:
    value = default
    for i, token in enumerate(tokens):
        if token == flag and i + 1 < len(tokens):
            value = tokens[i + 1]
        elif token.startswith(flag + "="):
            value = token.split("=", 1)[1]
    return value


def _has(tokens: list[str], flag: str) -> bool:
    return flag in tokens


def _jitter(seed: str) -> float:
    """A deterministic +-0.4% per run (from its working directory): runs are not identical."""
    digest = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    return 1.0 + ((digest % 801) - 400) / 100_000


def megatron_layout(t: list[str]) -> dict[str, float]:
    """(cost factor, memory GiB, profile kind) of a Megatron layout."""
    tp = int(_last(t, "--tensor-model-parallel-size", "1") or 1)
    pp = int(_last(t, "--pipeline-model-parallel-size", "1") or 1)
    mbs = int(_last(t, "--micro-batch-size", "1") or 1)
    recompute = _last(t, "--recompute-granularity")
    cost = (1 + 0.12 * (tp - 1)) * (1 + 0.15 * (pp - 1))
    cost *= {"full": 1.30, "selective": 1.05}.get(str(recompute), 1.0)
    cost *= 0.93 if _has(t, "--overlap-grad-reduce") else 1.0
    cost *= 1.0 - 0.04 * math.log2(mbs)
    activations = 18.0 * mbs * {"full": 0.2, "selective": 0.7}.get(str(recompute), 1.0)
    weights = 44.0 / tp / pp * (0.6 if _has(t, "--use-distributed-optimizer") else 1.0)
    return {"cost": cost, "memory": weights + activations, "comm": float(tp > 1 or pp > 1)}


def titan_layout(t: list[str]) -> dict[str, float]:
    tp = int(_last(t, "--parallelism.tensor_parallel_degree", "1") or 1)
    local = int(_last(t, "--training.local_batch_size", "1") or 1)
    modes = [x.split(":", 1)[1] for x in t if x.startswith("activation-checkpoint:")]
    mode = modes[-1] if modes else "selective"
    cost = (1 + 0.10 * (tp - 1)) * {"full": 1.30, "selective": 1.08}.get(mode, 1.0)
    cost *= 0.90 if _has(t, "--compile.enable") else 1.0
    cost *= 1.0 - 0.03 * math.log2(local)
    activations = 14.0 * local * {"full": 0.15, "selective": 0.6}.get(mode, 1.0)
    return {"cost": cost, "memory": 30.0 / tp + activations, "comm": float(tp > 1)}


def _oom(rank: int, gib: float, capacity: float) -> None:
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        f'[rank{rank}]:   File "train.py", line 1, in <module>\n'
        f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
        f"GPU {rank} has a total capacity of {capacity:.2f} GiB of which 1.02 GiB is free. "
        f"Including non-PyTorch memory, this process has {gib:.2f} GiB memory in use.\n"
    )


def _copy_traces(source: Path, target: Path, ranks: int, name: str) -> None:
    """One recorded trace per rank, cycled, each naming its own rank."""
    files = sorted(p for p in source.iterdir() if ".json" in p.name)
    target.mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        path = files[rank % len(files)]
        raw = path.read_bytes()
        trace = json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
        trace.setdefault("distributedInfo", {})["rank"] = rank
        (target / name.format(rank=rank)).write_bytes(gzip.compress(json.dumps(trace).encode()))


def replay_megatron(opts: argparse.Namespace, t: list[str], ranks: int) -> int:
    total = int(_last(t, "--train-iters", "0") or 0)
    gbs = int(_last(t, "--global-batch-size", "1") or 1)
    if not total:
        total = int(_last(t, "--train-samples", "0") or 0) // gbs
    layout = megatron_layout(t)
    recorded = [ln for ln in opts.log.read_text().splitlines() if MEGATRON_LINE.search(ln)]
    if layout["memory"] > opts.capacity_gib:
        _oom(0, layout["memory"], opts.capacity_gib)
        return 1
    jitter = _jitter(str(Path.cwd()))
    for step in range(1, total + 1):
        line = recorded[min(step, len(recorded)) - 1]
        base = float(re.search(r"elapsed time per iteration \(ms\): ([\d.]+)", line).group(1))  # type: ignore[union-attr]
        ms = base * layout["cost"] * jitter
        line = re.sub(r"iteration\s+\d+/\s*\d+", f"iteration {step:8d}/{total:8d}", line)
        line = re.sub(r"(elapsed time per iteration \(ms\): )[\d.]+", rf"\g<1>{ms:.1f}", line)
        line = re.sub(r"(global batch size:\s+)\d+", rf"\g<1>{gbs:5d}", line)
        print(line)
        if step == 1:
            peak = layout["memory"] * 1024
            for rank in range(ranks):
                print(
                    f"[Rank {rank}] (after 1 iterations) memory (MB) | allocated: {peak / 2:.2f} "
                    f"| max allocated: {peak:.2f} | reserved: {peak:.2f} | max reserved: {peak:.2f}"
                )
    if _has(t, "--profile"):
        tensorboard = Path(str(_last(t, "--tensorboard-dir")))
        source = opts.comm_traces if layout["comm"] else opts.compute_traces
        _copy_traces(source, tensorboard.parent / "torch_profile", ranks, "rank-{rank}.json.gz")
    return 0


def replay_torchtitan(opts: argparse.Namespace, t: list[str], ranks: int) -> int:
    total = int(_last(t, "--training.steps", "0") or 0)
    layout = titan_layout(t)
    lines = opts.log.read_text().splitlines()
    recorded = [ln for ln in lines if TITAN_STEP.search(ln) and "validate" not in ln]
    if layout["memory"] > opts.capacity_gib:
        _oom(0, layout["memory"], opts.capacity_gib)
        return 1
    clock, jitter = 12 * 3600.0, _jitter(str(Path.cwd()))
    for step in range(1, total + 1):
        line = recorded[min(step, len(recorded)) - 1]
        clock += 1.1 * layout["cost"] * jitter
        hour, minute = int(clock // 3600), int(clock % 3600 // 60)
        stamp = f"2025-06-01 {hour:02d}:{minute:02d}:{clock % 60:06.3f}".replace(".", ",")
        line = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", stamp, line)
        line = re.sub(r"(step:\s*)\d+", rf"\g<1>{step:2d}", line)
        line = re.sub(r"(memory:\s*)[\d.]+GiB", rf"\g<1>{layout['memory']:.2f}GiB", line)
        sys.stderr.write(line + "\n")
    if _has(t, "--profiler.enable-profiling"):
        dump = Path(str(_last(t, "--dump_folder")))
        target = dump / "profiling" / "traces" / f"iteration_{total}"
        source = opts.comm_traces if layout["comm"] else opts.compute_traces
        _copy_traces(source, target, ranks, "rank{rank}_trace.json.gz")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="TEST DOUBLE for torchrun (see the module docstring)")
    p.add_argument("--log", type=Path, required=True, help="a recorded healthy log to replay")
    p.add_argument("--capacity-gib", type=float, default=80.0)
    p.add_argument("--compute-traces", type=Path, required=True)
    p.add_argument("--comm-traces", type=Path, required=True)
    opts, rest = p.parse_known_args(argv)
    ranks = 1
    for token in rest:
        if token.startswith("--nproc-per-node="):
            ranks = int(token.split("=", 1)[1])
    if "torchtitan.train" in rest:
        return replay_torchtitan(opts, rest, ranks)
    if any(token.endswith("pretrain_gpt.py") for token in rest):
        return replay_megatron(opts, rest, ranks)
    sys.stderr.write(f"replay_launcher: no framework entry point in {rest}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
