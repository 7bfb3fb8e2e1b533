"""Run one trial of a recipe and turn its output into a ``TrialResult``.

    attune bench examples/ported-gpt.yaml --steps 16 --warmup 4 --out result.json

This is what a self-hosted runner executes; it never touches the ledger.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from pathlib import Path

from gate.errors import AttuneError
from gate.events import LaunchRecord
from gate.models import EffectiveConfig, Recipe, TrialResult
from gate.postlaunch import first_loss
from gate.prelaunch import Machine, resource_problem
from gate.throughput import tokens_per_second_per_device
from runners.adapters import get_adapter
from runners.embedded.config import WorkloadConfig, rank_memory_bytes
from runners.local import Backend, LocalBackend, RunHandle, RunOutcome
from runners.profile_trace import breakdown_from_traces
from runners.run_outcome import classify, output_lines
from runners.supervise import alive

DEFAULT_STEPS = 12
DEFAULT_WARMUP = 3
"""Benchmark length: the warm-up steps (allocator, caches, compilation) are never scored."""

MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""The longest wall-clock limit a benchmark run may be given (a week)."""


def check_run_length(steps: int, warmup: int) -> None:
    """A run needs at least one scored step after its warm-up; else an AttuneError (checked
    before any directory is made or anything launched)."""
    if steps < 1 or warmup < 0 or steps <= warmup:
        raise AttuneError(
            f"--steps must exceed --warmup (at least one scored step) and --warmup must be 0 "
            f"or more, got --steps {steps} and --warmup {warmup}"
        )


def check_timeout(timeout_s: float) -> None:
    """A wall-clock limit is a positive, finite number of seconds, at most ``MAX_TIMEOUT_S``."""
    if not math.isfinite(timeout_s) or timeout_s <= 0 or timeout_s > MAX_TIMEOUT_S:
        raise AttuneError(
            f"--timeout must be positive seconds, at most {MAX_TIMEOUT_S:.0f}, got {timeout_s}"
        )


Launch = LaunchRecord
"""A started benchmark, stored beside the run and in the ledger (``gate.events.LaunchRecord``)."""


def this_machine() -> Machine:
    """The cores this process may use and the physical memory of this machine."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        memory: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    return Machine(cores=cores, memory_bytes=memory)


def resource_refusal(
    effective: EffectiveConfig, backend: Backend | None, machine: Machine | None = None
) -> str | None:
    """Why ``effective`` cannot run on the local backend's machine (threads x ranks beyond its
    cores, batch x sequence beyond its memory); None when it fits, or when it runs elsewhere
    (a cluster backend's scheduler refuses what its nodes cannot hold)."""
    if backend is not None and not isinstance(backend, LocalBackend):
        return None
    if effective.framework != "embedded":
        return None  # GPU frameworks: the memory model and the device count decide
    cfg = WorkloadConfig.model_validate(effective.values)
    problem = resource_problem(
        ranks=effective.devices,
        cores_per_rank=cfg.threads or 1,
        bytes_per_rank=rank_memory_bytes(cfg),
        machine=machine or this_machine(),
    )
    return f"too big for this machine: {problem}" if problem else None


def start_bench(
    recipe: Recipe,
    *,
    steps: int,
    warmup: int,
    workdir: Path,
    profile: bool = False,
    timeout_s: float = 600.0,
    effective: EffectiveConfig | None = None,
    backend: Backend | None = None,
    avoid_nodes: list[str] | None = None,
) -> Launch:
    """Resolve and launch one benchmark trial; returns at once. Bad input raises AttuneError.
    ``avoid_nodes``: nodes earlier runs used, which a multi-node backend steers clear of."""
    check_run_length(steps, warmup)
    check_timeout(timeout_s)
    adapter = get_adapter(recipe.framework, path=recipe.path)
    floor = int(getattr(adapter, "min_warmup", 0))
    if warmup < floor:
        raise AttuneError(
            f"{recipe.framework} needs at least {floor} warm-up steps (its first logged step "
            f"times are not steady); got --warmup {warmup}",
            path=recipe.path,
        )
    effective = effective or adapter.resolve(recipe)
    problem = resource_refusal(effective, backend)
    if problem:
        raise AttuneError(f"{problem}; refused before launch", path=recipe.path)
    # the launch runs with cwd=workdir, so paths the adapter writes into argv must be absolute
    workdir = workdir.resolve()
    # a simulated backend builds its own launch (no framework checkout, no torchrun)
    build = getattr(backend, "launch_spec", None)
    if build is not None:
        spec = build(adapter, recipe, effective, steps=steps, workdir=workdir, profile=profile)
    else:
        spec = adapter.launch(recipe, effective, steps=steps, workdir=workdir, profile=profile)
    if avoid_nodes:
        spec = spec.model_copy(update={"avoid_nodes": list(avoid_nodes)})
    handle = (backend or LocalBackend()).start(spec, workdir=workdir, timeout_s=timeout_s)
    return Launch(
        recipe=recipe.name,
        framework=recipe.framework,
        fingerprint=effective.fingerprint(),
        steps=steps,
        warmup=warmup,
        devices=spec.devices,
        profile_trace=spec.profile_trace,
        handle=handle,
        metrics_context=spec.metrics_context,
        harness=spec.harness,
        overridden=spec.overridden,
    )


def collect(launch: Launch, outcome: RunOutcome) -> TrialResult:
    """Parse a finished launch's output into its result."""
    adapter = get_adapter(launch.framework)
    lines = output_lines(outcome)
    logged = adapter.parse_metrics(lines, launch.metrics_context)
    nonfinite = any(not r.finite() for r in logged)
    records = [r for r in logged if r.step <= launch.steps]  # later steps were profiled ones
    status, error = classify(
        outcome,
        steps_logged=len(records),
        steps_wanted=launch.steps,
        nonfinite=nonfinite,
        lines=lines,
    )
    score = None
    if status == "ok":
        score = tokens_per_second_per_device(records, warmup=launch.warmup, devices=launch.devices)
    breakdown = None
    if status == "ok" and launch.profile_trace and Path(launch.profile_trace).exists():
        # one trace file (the embedded workload), or a folder of one per rank (GPU frameworks)
        try:
            breakdown = breakdown_from_traces(Path(launch.profile_trace))
        except (ValueError, OSError) as exc:  # a broken trace loses the profile, not the run
            error = f"profile unreadable: {exc}"
    step1 = first_loss(records)
    return TrialResult(
        recipe=launch.recipe,
        fingerprint=launch.fingerprint,
        status=status,
        error=error,
        steps=records,
        warmup=launch.warmup,
        score=score if score is None or math.isfinite(score) else None,
        step1_loss=step1,
        has_nonfinite=nonfinite,
        allocated_at=outcome.allocated_at,
        released_at=outcome.released_at,
        devices=outcome.devices or launch.devices,
        log_path=outcome.log_path,
        profile=breakdown,
        nodes=outcome.nodes,
        interrupted=outcome.interrupted,
    )


def run_bench(
    recipe: Recipe,
    *,
    steps: int,
    warmup: int,
    workdir: Path,
    profile: bool = False,
    timeout_s: float = 600.0,
    effective: EffectiveConfig | None = None,
    backend: Backend | None = None,
) -> TrialResult:
    """Resolve, launch, wait, parse: one benchmark trial from allocation to release."""
    backend = backend or LocalBackend()
    launch = start_bench(
        recipe,
        steps=steps,
        warmup=warmup,
        workdir=workdir,
        profile=profile,
        timeout_s=timeout_s,
        effective=effective,
        backend=backend,
    )
    try:
        outcome = backend.wait(launch.handle)
    except KeyboardInterrupt:  # Ctrl-C: the run goes with the command, not up to its timeout
        if isinstance(backend, LocalBackend):
            stop_local(backend, launch.handle)
        raise
    return collect(launch, outcome)


def stop_local(backend: LocalBackend, handle: RunHandle, grace_s: float = 30.0) -> None:
    """End a local launch now: SIGTERM to its supervisor, which kills the launch's whole
    process tree (every rank) and records the release; then wait for that, ``grace_s`` at
    most. The supervisor runs in a session of its own (so that a campaign's runs outlive a
    restarted bot), which is why Ctrl-C does not reach it by itself."""
    try:
        os.killpg(handle.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while alive(handle.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.waitpid(handle.pid, os.WNOHANG)  # reap it: our own child
