"""What the Slurm backend adds to a trial, on a real single-node Slurm on loopback.

    python benchmarks/slurm_latency.py [--jobs 10] [--sleep 1.0]

Starts the test cluster (``tests/slurm_cluster.py``: slurmctld, slurmd, slurmrestd, munged),
then runs ``--jobs`` trivial launches one after another through ``SlurmBackend`` as a campaign
would (submit, poll, outcome). Each launch prints the time it started and the time it ended,
so the backend's overhead is measured outside Slurm's one-second timestamps:

- submit-to-start: from the submit call to the launch's first instruction (scheduling, the
  batch step, ``srun``'s job step, the interpreter's start);
- end-to-record: from the launch's last instruction to the outcome in the backend's hands
  (the step and job ending, the next poll, reading the job back);
- overhead: the whole trial's wall time minus the launch's own.

Target: under 3 s of overhead per trial beyond the job itself.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runners.adapter import LaunchSpec  # noqa: E402
from runners.slurm.backend import SlurmBackend  # noqa: E402
from runners.slurm.settings import SlurmSettings  # noqa: E402
from tests.slurm_cluster import ClusterUnavailable, SlurmCluster, ensure_packages  # noqa: E402

TARGET_S = 3.0
PROBE = "import sys, time; print(time.time(), flush=True); time.sleep(float(sys.argv[1])); " + (
    "print(time.time(), flush=True)"
)


def one(backend: SlurmBackend, workdir: Path, sleep_s: float) -> tuple[float, float, float]:
    """(submit-to-start, end-to-record, overhead) of one launch, in seconds."""
    spec = LaunchSpec(argv=[sys.executable, "-c", PROBE, str(sleep_s)], devices=1)
    submitted = time.time()
    handle = backend.start(spec, workdir=workdir, timeout_s=120)
    outcome = backend.wait(handle)
    recorded = time.time()
    if outcome.returncode != 0:
        raise SystemExit(f"the probe job failed: {outcome.failure or outcome.returncode}")
    began, ended = (float(x) for x in Path(outcome.stdout_path).read_text().split())
    return began - submitted, recorded - ended, (recorded - submitted) - (ended - began)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--sleep", type=float, default=1.0, help="each job's own run time (s)")
    parser.add_argument("--poll", type=float, default=0.25, help="ATTUNE_SLURM_POLL_S")
    args = parser.parse_args()
    try:
        ensure_packages()
    except ClusterUnavailable as exc:
        print(f"slurm latency: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    cluster = SlurmCluster().start()
    print(f"loopback Slurm up in {time.monotonic() - started:.1f} s ({cluster.host})")
    try:
        env = cluster.settings(ATTUNE_SLURM_POLL_S=str(args.poll))
        backend = SlurmBackend(SlurmSettings.from_env(env))
        version = backend.check()
        print(f"slurmrestd {backend.client.release}, API {version}, poll every {args.poll} s")
        rows = [one(backend, cluster.dir / f"job-{i}", args.sleep) for i in range(args.jobs)]
    finally:
        cluster.stop()
    print(f"{'per trial (s)':<18}{'median':>8}{'max':>8}")
    for i, name in enumerate(("submit-to-start", "end-to-record", "overhead")):
        values = [r[i] for r in rows]
        print(f"{name:<18}{statistics.median(values):>8.2f}{max(values):>8.2f}")
    worst = max(r[2] for r in rows)
    verdict = "meets" if worst < TARGET_S else "MISSES"
    print(f"{args.jobs} jobs of {args.sleep:g} s: {verdict} the {TARGET_S:g} s overhead target")
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
