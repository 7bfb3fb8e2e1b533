"""Which nodes a run should stay off, so calibration measures the cluster, not one node.

Calibration's baseline runs estimate the noise the candidates will be judged against; on a
cluster that noise includes node-to-node differences, which five runs on one node never see.
Each baseline run therefore avoids the nodes the earlier ones ran on, as long as enough other
usable nodes remain; on a cluster smaller than that it avoids as many as it can, most recent
first (a single-node cluster avoids none).
"""

from __future__ import annotations

from collections.abc import Sequence

from runners.slurm.api import SlurmNode


def exclude_nodes(
    nodes: Sequence[SlurmNode],
    avoid: Sequence[str],
    *,
    needed: int,
    partition: str | None = None,
) -> list[str]:
    """Node names to exclude from a job of ``needed`` nodes in ``partition``.

    ``avoid`` lists the nodes earlier runs used, oldest first. The most recently used are
    excluded first, while at least ``needed`` usable nodes of the partition stay allowed.
    """
    usable = [
        n.name for n in nodes if n.usable and (partition is None or partition in n.partitions)
    ]
    recent_first = list(dict.fromkeys(reversed([a for a in avoid if a in usable])))
    spare = len(usable) - needed
    return sorted(recent_first[: max(0, spare)])
