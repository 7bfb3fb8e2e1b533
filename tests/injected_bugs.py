"""Runs of the embedded workload for the injected-bug suite, in a process of their own.

    python -m tests.injected_bugs OUT.json

For two settings -- fine-tuning a checkpoint this script trains first, and training from the
seeded random init -- it runs the baseline twice, its layout-only variants
(``bot.campaign.layout_variants``) and the baseline with each silent bug of
``runners/embedded/faults.py`` switched on, CHECK_STEPS real training steps each, and writes
every run's step records. ``tests/test_injected_bugs.py`` calibrates the post-launch reference
from them and asserts which check catches which bug.

Every run is the workload's own ``train.main`` in a forked child (two children, rendezvous over
gloo on 127.0.0.1, for two ranks): this process imports torch once, so a run costs its steps,
not an interpreter start (about 0.3 s against 5 s or more).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from bot.campaign.layout_variants import layout_variants
from gate.models import EffectiveConfig, StepRecord
from gate.postlaunch_reference import CHECK_STEPS
from runners.embedded import train
from runners.embedded.config import WORKLOAD_VERSION, validate_and_derive
from runners.embedded.faults import FAULT_ENV

CONFIG: dict[str, Any] = {
    "vocab_size": 64,
    "n_layer": 2,
    "n_head": 2,
    "d_model": 32,
    "seq_len": 32,
    "global_batch_size": 8,
    "micro_batch_size": 2,
    "threads": 1,
}
"""The baseline: one rank, accumulation 4."""
PRETRAIN_STEPS = 150
"""Steps that train the fine-tuning checkpoint (its loss falls from 4.17 to about 2.3)."""
BUGS: dict[str, dict[str, Any]] = {
    "misload_layers": {},
    "misshard_mlp": {"data_parallel_size": 2},
    "drop_grad_reduce": {"data_parallel_size": 2},
    "shift_labels": {},
    "optimizer_subset": {},
    "label_noise": {},
}
"""Each silent bug and the layout it needs (two ranks for the sharding and reduction bugs)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(rank: int, world: int, port: int, fault: str, argv: list[str]) -> None:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # rank 0's step lines go to --metrics
    os.environ.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    os.environ.pop(FAULT_ENV, None)
    if fault:
        os.environ[FAULT_ENV] = fault
    code = 1
    try:
        code = train.main(argv)
    finally:
        os._exit(code)


def run(
    workdir: Path, name: str, config: dict[str, Any], steps: int, fault: str = ""
) -> list[StepRecord]:
    """``steps`` real training steps of ``config`` (with ``fault`` switched on)."""
    cfg = validate_and_derive(config, {})
    run_dir = workdir / name
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(cfg.model_dump_json())
    metrics = run_dir / "steps.jsonl"
    argv = ["--config", str(run_dir / "config.json"), "--steps", str(steps)]
    argv += ["--metrics", str(metrics)]
    if name == "pretrain":
        argv += ["--save-checkpoint", str(workdir / "checkpoint.pt")]
    fork = multiprocessing.get_context("fork")
    port, world = _free_port(), cfg.data_parallel_size
    ranks = [fork.Process(target=_rank, args=(r, world, port, fault, argv)) for r in range(world)]
    for p in ranks:
        p.start()
    for p in ranks:
        p.join(120)
    codes = [p.exitcode for p in ranks]
    if codes != [0] * world:
        for p in ranks:
            p.kill()
        raise RuntimeError(f"{name}: ranks exited {codes}")
    return [StepRecord.model_validate_json(line) for line in metrics.read_text().splitlines()]


def setting(workdir: Path, base: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The baseline twice, its layout variants and every bug (misloading needs a checkpoint)."""
    cfg = validate_and_derive(base, {})
    effective = EffectiveConfig(
        framework="embedded",
        framework_version=WORKLOAD_VERSION,
        values=cfg.model_dump(),
        devices=cfg.data_parallel_size,
    )
    out: dict[str, dict[str, list[dict[str, Any]]]] = {"baseline": {}, "variants": {}, "bugs": {}}
    for i in (1, 2):
        out["baseline"][f"baseline-{i}"] = _dump(run(workdir, f"baseline-{i}", base, CHECK_STEPS))
    for i, variant in enumerate(layout_variants(effective, cores=2), 1):
        steps = run(workdir, f"layout-{i}", {**base, **variant.changes}, CHECK_STEPS)
        out["variants"][variant.description] = _dump(steps)
    for fault, layout in BUGS.items():
        if fault == "misload_layers" and "init_from" not in base:
            continue
        steps = run(workdir, fault, {**base, **layout}, CHECK_STEPS, fault)
        out["bugs"][fault] = _dump(steps)
    return out


def _dump(steps: list[StepRecord]) -> list[dict[str, Any]]:
    return [s.model_dump() for s in steps]


def main(out: Path) -> None:
    # torch.optim imports dynamo on first use (seconds): once here, not in every forked run
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        pretrain = run(workdir, "pretrain", {**CONFIG, "micro_batch_size": 8}, PRETRAIN_STEPS)
        results = {
            "pretrain_losses": [pretrain[0].loss, pretrain[-1].loss],
            "fine_tune": setting(
                workdir / "fine_tune", {**CONFIG, "init_from": str(workdir / "checkpoint.pt")}
            ),
            "scratch": setting(workdir / "scratch", dict(CONFIG)),
        }
    out.write_text(json.dumps(results))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
