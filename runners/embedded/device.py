"""The embedded workload held to a device's memory, as a GPU run is held to its part's.

    python -m runners.embedded.device MIB --config effective.json --steps 20

Loads the workload (the interpreter, torch, the training module: its start-up), then lets the
process allocate ``MIB`` MiB more: the operating system refuses the rest (``RLIMIT_DATA``, heap
and private mappings, counted against ``VmData`` by Linux), so torch's allocator raises
``DefaultCPUAllocator: can't allocate memory`` where a GPU run would raise CUDA's out-of-memory
error. Then it trains exactly as ``python -m runners.embedded.train`` does. The adapter launches
this for a recipe with ``device_memory_mib`` (``runners/embedded/adapter.py``).
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

from runners.embedded import train


def held_bytes() -> int:
    """This process's ``VmData`` (Linux): what the data-segment limit is counted against."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("device_memory_mib needs Linux's /proc/self/status (VmData)")


def hold_to(mib: int) -> None:
    """Let this process allocate ``mib`` MiB beyond what it holds now, never beyond the hard
    limit it was given."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = held_bytes() + mib * 2**20
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def main(argv: list[str]) -> int:
    if not argv or not argv[0].isdigit() or int(argv[0]) < 1:
        raise SystemExit("usage: python -m runners.embedded.device MIB TRAIN-ARGS...")
    hold_to(int(argv[0]))
    return train.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
