"""The backends a trial can run on, by name (``attune tune --backend``, ``attune bench
--backend``): ``local`` (this machine, ``runners/local.py``), ``slurm`` (a cluster through
slurmrestd, ``runners/slurm/``, settings from ``ATTUNE_SLURM_*``) and ``sim`` (a SIMULATED GPU
cluster that runs no training, ``runners/sim/``, settings from ``ATTUNE_SIM_*`` when a campaign
opens, then the campaign's own, recorded in its ledger)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from gate.errors import AttuneError
from runners.local import Backend, LocalBackend

BACKENDS = ("local", "slurm", "sim")
SIMULATED = frozenset({"sim"})
"""Backends whose results are simulated, never measurements."""


def simulation_params(name: str, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The simulated cluster's parameters a campaign on ``name`` records when it opens
    (``campaign_opened``'s ``simulation``), from ``ATTUNE_SIM_*``; None for a real backend."""
    if name not in SIMULATED:
        return None
    from runners.sim.truth import SimParams

    return SimParams.from_env(os.environ if environ is None else environ).model_dump()


def make_backend(
    name: str,
    *,
    should_stop: Callable[[], bool] | None = None,
    simulation: Mapping[str, Any] | None = None,
) -> Backend:
    """The backend ``name``, ready: a Slurm backend has reached slurmctld with its settings'
    credentials (a bad setting or token fails here, before anything is written or run).
    ``should_stop`` is polled while a cluster job runs; True cancels it. ``simulation``: the
    simulated cluster's parameters (a campaign's recorded ones; default ``ATTUNE_SIM_*``).
    The simulated backend is refused inside a GitHub Actions job (``GITHUB_ACTIONS``): a
    bench there reports to a pull request as a measurement."""
    if name == "local":
        return LocalBackend()
    if name == "slurm":
        from runners.slurm.backend import SlurmBackend
        from runners.slurm.settings import SlurmSettings

        backend = SlurmBackend(SlurmSettings.from_env(), should_stop=should_stop)
        backend.check()
        return backend
    if name == "sim":
        if os.environ.get("GITHUB_ACTIONS") == "true":
            raise AttuneError(
                "--backend sim is refused in a GitHub Actions job: a simulated run must never "
                "be reported to a pull request as a measurement"
            )
        from runners.sim.backend import SimBackend
        from runners.sim.truth import SimParams

        params = (
            SimParams.model_validate(dict(simulation))
            if simulation is not None
            else SimParams.from_env(os.environ)
        )
        return SimBackend(params)
    raise AttuneError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
