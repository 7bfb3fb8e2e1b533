"""GitHub mode with the bot's settings naming a Slurm cluster: a campaign's trials are jobs the
bot submits itself (a real Slurm, ``tests/slurm_cluster.py``), and whoever the campaign acts
for must still have write permission before each launch."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.campaign.executor import LocalExecutor
from bot.campaign.setup import build_campaign, open_campaign
from bot.github.campaign_thread import Running, make_executor
from bot.github.executor import ActionsExecutor
from bot.github.permissions import PermissionLost
from bot.github.settings import Settings
from bot.state.fold import fold
from bot.state.model import CampaignParams
from gate.ledger import Ledger
from gate.registry import Registry, load_registry
from runners.slurm.backend import SlurmBackend
from tests.conftest import RecipeWriter

pytestmark = pytest.mark.slurm  # a real Slurm started by tests/slurm_cluster.py


def settings(tmp_path: Path, **over: Any) -> Settings:
    return Settings(
        app_id=1,
        private_key_path=tmp_path / "unused.pem",
        webhook_secret="s",
        ledger_path=tmp_path / "ledger.db",
        state_dir=tmp_path / "state",
        forecast_seconds=5.0,
        **over,
    )


def executor_for(
    s: Settings, ledger: Ledger, params: CampaignParams, authorize: Callable[[str], None]
) -> Any:
    return make_executor(
        s,
        repo=None,  # type: ignore[arg-type]  # the cluster path never asks GitHub
        running=Running(campaign="c"),
        authorize=authorize,
        bot_login=lambda: "attune[bot]",
        ledger=ledger,
        campaign="c",
        registry=load_registry("embedded", "1"),
        params=params,
    )


def test_the_bench_workflow_runs_trials_unless_a_cluster_is_named(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        params = CampaignParams(
            baseline="b",
            recipe_path="r.yaml",
            recipe_text="",
            framework="embedded",
            budget_device_hours=1.0,
            steps=4,
            warmup=1,
            agent="rules",
            calibration_runs=5,
            max_trials=3,
        )
        chosen = executor_for(settings(tmp_path), ledger, params, lambda _action: None)
    assert isinstance(chosen, ActionsExecutor)


def test_a_campaign_on_a_pull_request_runs_its_trials_on_slurm(
    slurm_env: Any, tmp_path: Path, write_recipe: RecipeWriter
) -> None:
    recipe = write_recipe(tmp_path, "gpt")
    authorized: list[str] = []
    allowed = threading.Event()
    allowed.set()

    def authorize(action: str) -> None:
        authorized.append(action)
        if not allowed.is_set():
            raise PermissionLost("@maintainer no longer has write permission")

    s = settings(tmp_path, slurm_url=slurm_env.url)
    with Ledger(s.ledger_path) as ledger:
        open_campaign(
            ledger,
            "c",
            recipe_text=recipe.read_text(),
            recipe_path="recipes/r.yaml",
            budget_hours=0.5,
            steps=3,
            warmup=1,
            max_trials=1,
        )

        def executor(registry: Registry, params: CampaignParams) -> Any:
            made = executor_for(s, ledger, params, authorize)
            assert not isinstance(made, ActionsExecutor) and isinstance(made, LocalExecutor)
            assert isinstance(made.backend, SlurmBackend)
            return made

        campaign = build_campaign(ledger, "c", forge=local_forge(tmp_path), executor=executor)
        campaign.calibrate()
        state = fold("c", ledger.events("c"))
        assert state.noise is not None and len(state.calibration_scores) == 5
        jobs = [t.launch.handle.job_id for t in state.role_trials("calibration") if t.launch]
        assert len(jobs) == 5 and all(jobs)  # each a Slurm job
        assert authorized == ["launch a benchmark"] * 5
        # permission lost: the next launch is refused before anything is submitted
        allowed.clear()
        before, jobs_before = len(ledger.events("c")), len(slurm_env.jobs())
        with pytest.raises(PermissionLost):
            campaign.ctx.bench("profile-x", "profile", campaign.ctx.recipe(recipe.read_text(), "x"))
        new = [e.kind for e in ledger.events("c")[before:]]
        assert "trial_launched" not in new and "trial_finished" not in new, new
        assert len(slurm_env.jobs()) == jobs_before  # nothing reached the cluster


def local_forge(tmp_path: Path) -> Any:
    from bot.forges.local import LocalForge

    return LocalForge(tmp_path / "forge")
