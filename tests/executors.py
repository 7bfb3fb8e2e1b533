"""A ``LocalExecutor`` on a test's own ledger: campaign ``run``, trial folders under
``root/work``; each test names the run length, budget and timeout it is about."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.campaign.executor import LocalExecutor
from gate.ledger import Ledger
from gate.registry import Registry


def local_executor(
    ledger: Ledger, root: Path, registry: Registry, *, steps: int, warmup: int, **options: Any
) -> LocalExecutor:
    return LocalExecutor(
        ledger=ledger,
        campaign="run",
        registry=registry,
        workdir=root / "work",
        steps=steps,
        warmup=warmup,
        **options,
    )
