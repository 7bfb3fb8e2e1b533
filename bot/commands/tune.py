"""``attune tune``: run a tuning campaign on the embedded default; ``--resume`` continues one.

attune tune examples/ported-gpt.yaml --budget 0.2
attune tune --resume runs/tune-ported-gpt-20261129-101500
attune report runs/tune-ported-gpt-20261129-101500
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from rich.live import Live

from bot.campaign.executor import campaign_executor
from bot.campaign.lock import own_campaign_dir
from bot.campaign.setup import (
    agent_problem,
    build_campaign,
    check_pairs,
    check_request,
    open_campaign,
)
from bot.commands.preflight import preflight
from bot.commands.stop import sigterm_interrupts, stop_requested, withdraw
from bot.commands.tune_console import LiveProgress, summarize
from bot.console import console
from bot.forges.local import LocalForge
from bot.interfaces import Agent
from bot.report.build import write_report
from bot.state.fold import campaign_state
from bot.state.model import CampaignParams, CampaignState
from gate import sequential
from gate.budget import check_budget_hours, check_buys_a_candidate, new_campaign_floor
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.recipe import load_recipe
from runners.adapters import get_adapter
from runners.backends import make_backend, simulation_params

Pairs = tuple[int | None, int | None]
"""``--max-pairs`` and ``--confirm-pairs`` as given (None: the default)."""


def open_new(
    workdir: Path,
    *,
    recipe_path: Path | None,
    budget_hours: float | None,
    agent: str,
    steps: int,
    warmup: int,
    max_trials: int,
    calibration_runs: int,
    backend: str = "local",
    lessons: bool = True,
    pairs: Pairs = (None, None),
) -> None:
    """Create the work directory and open the campaign in its ledger. A cluster backend is
    reached first: bad settings or credentials fail here, with nothing written. ``lessons``
    False (``--no-lessons``): the agent does not read the experience bank. ``pairs``: the A/B
    cap and the confirmation's pairs (``--max-pairs``, ``--confirm-pairs``; None: default)."""
    if recipe_path is None or budget_hours is None:
        raise AttuneError("a new campaign needs RECIPE and --budget (or --resume DIR)")
    check_budget_hours(budget_hours)
    check_request(budget_hours, steps, warmup)  # before the work directory is made
    max_pairs = sequential.MAX_PAIRS if pairs[0] is None else pairs[0]
    confirm_pairs = sequential.CONFIRM_PAIRS if pairs[1] is None else pairs[1]
    check_pairs(max_pairs, confirm_pairs)
    problem = agent_problem(agent)  # the claude agent without its key says how to set one
    if problem:
        raise AttuneError(problem)
    recipe = load_recipe(recipe_path)  # an unreadable or malformed file names itself here
    effective = get_adapter(recipe.framework, path=recipe.path).resolve(recipe)
    floor = new_campaign_floor(devices=effective.devices, calibration_runs=calibration_runs)
    check_buys_a_candidate(budget_hours, floor)  # calibration alone must not spend it all
    if (workdir / "ledger.db").exists() and holds_campaign(workdir / "ledger.db"):
        raise AttuneError("already holds a campaign; use --resume", path=str(workdir))
    make_backend(backend)
    preflight(recipe, backend=backend, workdir=workdir)  # attune doctor: before anything is made
    workdir.mkdir(parents=True, exist_ok=True)
    with Ledger(workdir / "ledger.db") as ledger:
        open_campaign(
            ledger,
            git_safe(workdir.name),  # it names the candidates' branches
            recipe_text=recipe_path.read_text(),
            recipe_path=f"recipes/{git_safe(recipe_path.stem)}{recipe_path.suffix}",
            budget_hours=budget_hours,
            steps=steps,
            warmup=warmup,
            agent=agent,
            calibration_runs=calibration_runs,
            max_trials=max_trials,
            backend=None if backend == "local" else backend,
            lessons=lessons,
            max_pairs=max_pairs,
            confirm_pairs=confirm_pairs,
            origin=_simulation_origin(backend),
        )


def _simulation_origin(backend: str) -> dict[str, object] | None:
    """``--backend sim``: the simulated cluster's parameters, recorded in the ledger."""
    simulation = simulation_params(backend)
    return None if simulation is None else {"simulation": simulation}


def git_safe(name: str) -> str:
    """``name`` as one component of a git branch name: a work directory or recipe file named
    with spaces or other characters git refuses in a ref (``my run``) becomes ``my-run``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)
    safe = re.sub(r"\.{2,}", ".", safe).strip(".-")
    return safe.removesuffix(".lock") or "campaign"


def holds_campaign(path: Path) -> bool:
    """Whether the ledger at ``path`` holds a campaign; an empty one (left by a request that
    was refused after it was made) may take a new campaign."""
    with Ledger(path) as ledger:
        return bool(ledger.campaigns())


def open_ledger(workdir: Path, action: str = "run the campaign") -> tuple[Ledger, str]:
    """The ledger of the campaign in ``workdir`` (a broken chain refused) and its name."""
    if not (workdir / "ledger.db").exists():
        raise AttuneError("no campaign here (no ledger.db)", path=str(workdir))
    with Ledger(workdir / "ledger.db") as checked:
        checked.require_intact(action)
    ledger = Ledger(workdir / "ledger.db")
    campaigns = ledger.campaigns()
    if not campaigns:
        ledger.close()
        raise AttuneError(
            "the ledger holds no campaign (a request refused after it was made); start one "
            "here with `attune tune RECIPE --budget H --workdir DIR`",
            path=str(workdir / "ledger.db"),
        )
    return ledger, campaigns[0]


def run_campaign(
    workdir: Path,
    *,
    live: bool = True,
    agent: Agent | None = None,
    lessons_dir: Path | None = None,
) -> Path:
    """Run or resume the campaign in ``workdir``; returns the report path. ``agent``
    replaces the one the campaign was opened with (for plugging in another implementation);
    ``lessons_dir`` the experience bank (default ``registry/lessons/``)."""
    ledger, name = open_ledger(workdir)
    params = campaign_state(ledger, name).params
    try:
        with ledger, own_campaign_dir(workdir), sigterm_interrupts():  # one process owns it
            state, report = _run_owned(
                workdir, ledger, name, params, live=live, agent=agent, lessons_dir=lessons_dir
            )
    except KeyboardInterrupt as exc:
        if str(exc):
            raise
        backend = (params.backend if params else None) or "local"
        raise KeyboardInterrupt(interrupted_note(workdir, backend)) from None
    summarize(state, report)
    return report


def interrupted_note(workdir: Path, backend: str) -> str:
    """What Ctrl-C (or SIGTERM) left behind and how to carry on: ``attune: interrupted: ...``."""
    if backend == "slurm":
        running = "its running Slurm job is cancelled and charged for what it held"
    elif backend == "local":
        running = "a run already launched goes on in the background and is charged when it ends"
    else:
        running = f"a run already launched on the {backend} backend is collected on resume"
    return (
        f"the campaign in {workdir} stopped; {running}; `attune tune --resume {workdir}` "
        "collects it and carries on"
    )


def _run_owned(
    workdir: Path,
    ledger: Ledger,
    name: str,
    params: CampaignParams | None,
    *,
    live: bool,
    agent: Agent | None,
    lessons_dir: Path | None,
) -> tuple[CampaignState, Path]:
    """``run_campaign`` once this process owns ``workdir``: the final state and the report."""
    backend = make_backend(
        (params.backend if params else None) or "local",
        should_stop=stop_requested(workdir),
        simulation=params.simulation if params else None,
    )
    local_executor = campaign_executor(ledger, name, workdir, backend=backend)
    with LocalForge(workdir / "forge") as forge:
        with Live(console=console, auto_refresh=False, transient=True) as display:
            progress = LiveProgress(display if live and console.is_terminal else None)
            campaign = build_campaign(
                ledger,
                name,
                forge=forge,
                executor=local_executor,
                progress=progress,
                agent=agent,
                stop_requested=stop_requested(workdir),
                lessons_dir=lessons_dir,
            )
            state = campaign.run()
        return state, write_report(ledger.events(name), workdir)


def tune(
    recipe_path: Path | None,
    *,
    budget_hours: float | None,
    agent: str,
    workdir: Path | None,
    resume: Path | None,
    steps: int,
    warmup: int,
    max_trials: int,
    calibration_runs: int,
    backend: str | None = None,
    lessons: bool = True,
    pairs: Pairs = (None, None),
) -> int:
    if resume is not None:
        if recipe_path is not None:
            raise AttuneError("--resume continues a campaign: give the directory, not a recipe")
        if not lessons:
            raise AttuneError("--no-lessons is chosen when a campaign opens; --resume keeps it")
        if pairs != (None, None):
            raise AttuneError("--max-pairs and --confirm-pairs are chosen when a campaign opens")
        resume_campaign(resume, backend)
        return 0
    if recipe_path is None:
        raise AttuneError("give a RECIPE to tune, or --resume DIR")
    stem = recipe_path.stem
    workdir = workdir or Path("runs") / time.strftime(f"tune-{stem}-%Y%m%d-%H%M%S")
    open_new(
        workdir,
        recipe_path=recipe_path,
        budget_hours=budget_hours,
        agent=agent,
        steps=steps,
        warmup=warmup,
        max_trials=max_trials,
        calibration_runs=calibration_runs,
        backend=backend or "local",
        lessons=lessons,
        pairs=pairs,
    )
    console.print(f"campaign {workdir.name}: work directory {workdir}")
    run_campaign(workdir)
    return 0


def resume_campaign(workdir: Path, backend: str | None) -> None:
    """``--resume DIR``: withdraw a stop request and run on with the campaign's backend."""
    with own_campaign_dir(workdir):  # owned from the withdrawal to the run's end
        ledger, name = open_ledger(workdir, "resume the campaign")
        with ledger:
            params = campaign_state(ledger, name).params
            opened_on = (params.backend if params else None) or "local"
            if backend is not None and backend != opened_on:
                raise AttuneError(
                    f"the campaign runs on the {opened_on} backend; --backend {backend} cannot "
                    "change that",
                    path=str(workdir),
                )
            withdraw(ledger, name, workdir)
        run_campaign(workdir)


def report(workdir: Path) -> int:
    """Rebuild the report from the ledger alone."""
    ledger, name = open_ledger(workdir, "write its report")
    with ledger:
        path = write_report(ledger.events(name), workdir)
    console.print(f"report: {path}")
    return 0
