"""The simulated backend (``--backend sim``): launches no training.

``launch_spec`` builds the launch as for a real cluster (the harness's arguments, the profile's
folder, the metrics context) but with ``attune-sim`` as its program; ``start`` asks the truth
(``runners.sim.truth``) how the run goes and writes, at once, what the framework would have
written (``runners.sim.logs``): Megatron's iteration and memory lines on stdout, torchtitan's
metrics lines on stderr, a CUDA out-of-memory error, an NCCL crash, a silence that the hang
watchdog ends, and one trace per rank when profiling is asked. ``wait`` returns the outcome.

Nothing sleeps: the run's times are on a SIMULATED clock. A run is allocated at the later of
the real time and the previous simulated run's release, and released after its simulated wall
time (start-up + its steps, or its limit); that is what the ledger's ``allocated_at`` and
``released_at`` hold and what the run is charged (simulated wall time x devices). The run's
real duration is kept beside it in ``sim-run.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gate.errors import AttuneError
from gate.models import EffectiveConfig, Recipe
from perfmodel import Part, part, part_for
from runners.adapter import LaunchSpec
from runners.harness import PROFILE_EXTRA_STEPS
from runners.local import RunHandle, RunOutcome
from runners.runner_settings import RunnerSettings
from runners.sim import logs
from runners.sim.truth import SimParams, TrueRun, true_layout, true_run

PROGRAM = "attune-sim"
"""The launch's program name: what a simulated launch records instead of torchrun."""
RUN_FILE = "sim-run.json"
LABEL = "SIMULATED"


def recipe_hardware(recipe: Recipe) -> tuple[Part, float | None]:
    """The part a recipe runs on (``hardware:``, else ``gpu_arch`` and
    ``device_memory_gib``) and its stated memory (None: the part's)."""
    body = recipe.body if isinstance(recipe.body, dict) else {}
    memory = body.get("device_memory_gib")
    memory_gib = None if memory is None else float(memory)
    if body.get("hardware"):
        return part(str(body["hardware"])), memory_gib
    return part_for(body.get("gpu_arch") or "sm90", memory_gib), memory_gib


@dataclass
class _Pending:
    effective: EffectiveConfig
    hardware: Part
    memory_gib: float | None
    total_steps: int


class SimBackend:
    """A simulated GPU cluster of ``params``; see the module docstring."""

    name = "sim"
    simulated = True

    def __init__(self, params: SimParams | None = None) -> None:
        self.params = params or SimParams()
        self._pending: dict[str, _Pending] = {}
        self._clock = 0.0
        """The simulated release of the latest run (Unix seconds)."""

    def launch_spec(
        self,
        adapter: Any,
        recipe: Recipe,
        effective: EffectiveConfig,
        *,
        steps: int,
        workdir: Path,
        profile: bool,
    ) -> LaunchSpec:
        """The launch of ``recipe`` as the framework's adapter builds it, ``attune-sim`` for
        torchrun and the framework's entry point (nothing of it is executed)."""
        if effective.framework not in ("megatron", "torchtitan"):
            raise AttuneError(
                f"--backend sim simulates GPU clusters for Megatron-LM and torchtitan recipes; "
                f"this {effective.framework} recipe runs for real on this machine: use "
                "--backend local",
                path=recipe.path,
            )
        body = adapter._body(recipe)
        workdir.mkdir(parents=True, exist_ok=True)
        harness = adapter.harness(body, effective, steps=steps, workdir=workdir, profile=profile)
        hardware, memory_gib = recipe_hardware(recipe)
        self._pending[str(workdir.resolve())] = _Pending(
            effective=effective,
            hardware=hardware,
            memory_gib=memory_gib,
            total_steps=steps + (PROFILE_EXTRA_STEPS if profile else 0),
        )
        return LaunchSpec(
            argv=[PROGRAM, effective.framework, *harness.argv],
            env=dict(body.env),
            framework=effective.framework,
            devices=body.total_devices,
            nodes=body.nodes or 1,
            profile_trace=harness.profile_trace,
            hang_timeout_s=RunnerSettings.from_env().hang_timeout_s,
            metrics_context=adapter.metrics_context(effective),
            harness=harness.harness,
            overridden=harness.overridden,
        )

    def start(self, spec: LaunchSpec, *, workdir: Path, timeout_s: float) -> RunHandle:
        real_start = time.time()
        workdir = workdir.resolve()
        pending = self._pending.pop(str(workdir), None)
        if pending is None:
            raise AttuneError(
                "the simulated backend runs launches it built itself (launch_spec), through "
                "attune's benchmark (runners.bench.start_bench)"
            )
        layout = true_layout(
            pending.effective, pending.hardware, self.params, device_memory_gib=pending.memory_gib
        )
        run = true_run(layout, self.params, run_key=str(workdir.name), steps=pending.total_steps)
        allocated_at = max(real_start, self._clock)
        hang_s = spec.hang_timeout_s or 300.0
        steps, wall, ended = _timeline(run, layout.step_time_s, timeout_s, hang_s)
        first = datetime.fromtimestamp(allocated_at + run.startup_s, UTC).replace(tzinfo=None)
        stdout, stderr = workdir / "stdout.jsonl", workdir / "launch.log"
        with stdout.open("w") as out, stderr.open("w") as err:
            err.write(
                f"attune-sim: {LABEL} run on {spec.devices} x {pending.hardware.name} "
                f"(seed {self.params.seed}, spread {self.params.spread}, cv {self.params.cv}): "
                "no training was launched\n"
            )
            if pending.effective.framework == "megatron":
                logs.megatron_lines(
                    out,
                    step_seconds=steps,
                    total=pending.total_steps,
                    global_batch=int(pending.effective.values["global_batch_size"]),
                    tflops_per_step=layout.model_flops_per_step,
                    devices=spec.devices,
                    peak_bytes=run.peak_memory_bytes,
                    start=first,
                )
            else:
                logs.torchtitan_lines(
                    err,
                    step_seconds=steps,
                    tokens_per_step=layout.tokens_per_step,
                    tflops_per_step=layout.model_flops_per_step,
                    peak_flops=layout.peak_flops_per_device,
                    devices=spec.devices,
                    peak_bytes=run.peak_memory_bytes,
                    capacity_bytes=layout.capacity_bytes,
                    start=first,
                )
            if ended == "oom":
                logs.oom_lines(
                    err, peak_bytes=run.peak_memory_bytes, capacity_bytes=layout.capacity_bytes
                )
            elif ended == "crash":
                logs.crash_lines(err)
        if ended == "ok" and spec.profile_trace:
            name = (
                "rank-{rank}.json.gz"
                if spec.framework == "megatron"
                else "rank{rank}_trace.json.gz"
            )
            logs.write_traces(
                Path(spec.profile_trace),
                ranks=min(spec.devices, logs.LOG_RANKS),
                step_seconds=steps[-2:],
                shares=layout.shares,
                name=name,
            )
        released_at = allocated_at + wall
        self._clock = released_at
        record = {
            "simulated": True,
            "end": ended,
            "returncode": {"ok": 0, "oom": 1, "crash": 1}.get(ended, -9),
            "timed_out": ended == "timeout",
            "hung": ended == "hang",
            "allocated_at": allocated_at,
            "released_at": released_at,
            "simulated_wall_s": wall,
            "real_s": time.time() - real_start,
            "devices": spec.devices,
            "hardware": pending.hardware.name,
            "params": self.params.model_dump(),
        }
        (workdir / RUN_FILE).write_text(json.dumps(record, indent=2))
        return RunHandle(backend=self.name, pid=0, workdir=str(workdir), allocated_at=allocated_at)

    def wait(self, handle: RunHandle) -> RunOutcome:
        """The outcome ``start`` wrote (also for a handle from an earlier bot process)."""
        workdir = Path(handle.workdir)
        path = workdir / RUN_FILE
        if not path.exists():
            return RunOutcome(
                returncode=None,
                timed_out=False,
                allocated_at=handle.allocated_at,
                released_at=handle.allocated_at,
                stdout_path=str(workdir / "stdout.jsonl"),
                log_path=str(workdir / "launch.log"),
                failure="the simulated run left no record",
                interrupted=True,
            )
        record = json.loads(path.read_text())
        return RunOutcome(
            returncode=record["returncode"],
            timed_out=record["timed_out"],
            hung=record["hung"],
            allocated_at=record["allocated_at"],
            released_at=record["released_at"],
            stdout_path=str(workdir / "stdout.jsonl"),
            log_path=str(workdir / "launch.log"),
            devices=record["devices"],
        )


def _timeline(
    run: TrueRun, steady_s: float, timeout_s: float, hang_s: float
) -> tuple[list[float], float, str]:
    """The steps logged, the simulated wall time and how the run ended: its own end, or the
    wall-clock limit (``timeout``) when that comes first."""
    steps: list[float] = []
    clock = run.startup_s
    if run.end == "oom":  # dies in the first step's forward/backward
        clock += 3 * steady_s
        return ([], clock, "oom") if clock <= timeout_s else ([], timeout_s, "timeout")
    for seconds in run.step_seconds:
        if clock + seconds > timeout_s:
            return steps, timeout_s, "timeout"
        clock += seconds
        steps.append(seconds)
    if run.end == "hang":
        clock += hang_s  # the watchdog kills it after this long without output
    elif run.end == "crash":
        clock += 1.0
    if clock > timeout_s:
        return steps, timeout_s, "timeout"
    return steps, clock, run.end
