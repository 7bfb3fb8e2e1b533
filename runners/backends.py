"""The backends a trial can run on, by name (``attune tune --backend``, ``attune bench
--backend``): ``local`` (this machine, ``runners/local.py``) and ``slurm`` (a cluster through
slurmrestd, ``runners/slurm/``, settings from ``ATTUNE_SLURM_*``)."""

from __future__ import annotations

from collections.abc import Callable

from gate.errors import AttuneError
from runners.local import Backend, LocalBackend

BACKENDS = ("local", "slurm")


def make_backend(name: str, *, should_stop: Callable[[], bool] | None = None) -> Backend:
    """The backend ``name``, ready: a Slurm backend has reached slurmctld with its settings'
    credentials (a bad setting or token fails here, before anything is written or run).
    ``should_stop`` is polled while a cluster job runs; True cancels it."""
    if name == "local":
        return LocalBackend()
    if name == "slurm":
        from runners.slurm.backend import SlurmBackend
        from runners.slurm.settings import SlurmSettings

        backend = SlurmBackend(SlurmSettings.from_env(), should_stop=should_stop)
        backend.check()
        return backend
    raise AttuneError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
