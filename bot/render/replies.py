"""Every reply the GitHub App posts on a pull request: what happened, why, and what to do next.

Module constants and small functions, reviewed like code; the app and the campaign service
only choose which one to post.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.render.text import noise_line
from bot.render.words import count
from bot.state.model import CampaignState

NO_CAMPAIGN = "No attune campaign on this pull request yet: `/attune tune` starts one."
BEING_STARTED = "A campaign is being started here: `/attune status` shows it."
ALREADY_RUNNING = "A campaign is already running here: `/attune status` shows it."
NOT_RUNNING = "No campaign is running on this pull request."
NOTHING_TO_RESUME = "Nothing to resume: `/attune tune` starts a campaign."


def needs_write(user: str, verb: str, permission: str) -> str:
    return (
        f"Sorry @{user}, `/attune {verb}` needs write, maintain or admin permission on this "
        f"repository (yours: {permission}). `/attune status` and `/attune help` are open to "
        "everyone."
    )


def fork_refused(user: str) -> str:
    return (
        f"Sorry @{user}, attune never benchmarks pull requests from forks: their code would run "
        "on the self-hosted GPU runners. Push the branch to this repository and open the pull "
        "request from there."
    )


def malformed(user: str, problem: str) -> str:
    return f"@{user} {problem}"


def already_running(status: str) -> str:
    return f"A campaign is already running here.\n\n{status}"


def started_by_this_comment(campaign: str) -> str:
    return f"Campaign `{campaign}` was started by this comment already."


def guarded_paths(paths: Sequence[str]) -> str:
    return (
        "Refused: this pull request changes "
        + ", ".join(f"`{p}`" for p in paths)
        + ". attune never benchmarks changes to the gate, the registry or the workflows; they "
        "go through CODEOWNERS review on their own."
    )


def broken_config(problem: str) -> str:
    return f"attune's configuration is broken: {problem}"


def not_one_recipe(recipes: Sequence[str], patterns: Sequence[str], config_path: str) -> str:
    found = ", ".join(f"`{r}`" for r in recipes) or "none"
    globs = ", ".join(f"`{p}`" for p in patterns)
    return (
        "`/attune tune` tunes the one recipe a pull request changes; this one changes "
        f"{count(len(recipes), 'recipe file')} ({found}). Recipes are the files matching {globs} "
        f"(`{config_path}` on the default branch)."
    )


def is_a_directory(path: str) -> str:
    return f"`{path}` is a directory."


def moved_while_screening(head: str, now: str) -> str:
    return (
        f"The head of this pull request moved while attune screened it ({head[:7]} -> "
        f"{now[:7]}); nothing was started. Comment `/attune tune` again."
    )


def agent_unavailable(agent: str, problem: str) -> str:
    return f"`agent={agent}` cannot tune on this bot: {problem}. Nothing was started."


def not_a_recipe(path: str, head: str, problem: str) -> str:
    return f"`{path}` at {head[:7]} is not a recipe attune can tune: {problem}"


def started(campaign: str, path: str, head: str, budget: float, steps: int) -> str:
    return (
        f"Started campaign `{campaign}` on `{path}` at {head[:7]}: budget {budget:g} GPU-hours, "
        f"{steps} steps per trial. Candidates arrive as pull requests into this branch; one "
        "comment here keeps the trials table, noise model and budget up to date."
    )


def stopping(campaign: str) -> str:
    return f"Stopping `{campaign}` after its current trial."


def finished(campaign: str, reason: str) -> str:
    return f"`{campaign}` finished ({reason}); `/attune tune` starts a new campaign."


def resuming(campaign: str) -> str:
    return f"Resuming `{campaign}` from the ledger."


def campaign_stopped(campaign: str, problem: str, *, resumable: bool) -> str:
    then = (
        "`/attune resume` continues it."
        if resumable
        else "`/attune tune` starts a new campaign on the current head."
    )
    return f"attune campaign `{campaign}` stopped: {problem}\n\n{then}"


def status(state: CampaignState, *, running: bool) -> str:
    """``/attune status``: the campaign from the one fold, its speedup the one every surface
    prints."""
    budget = state.params.budget_device_hours if state.params else 0.0
    lines = [f"**attune campaign `{state.campaign}`**: {'running' if running else 'not running'}"]
    if state.stopped:
        lines.append(f"stopped: {state.stopped.reason}")
    lines.append(
        f"{count(len(state.candidates), 'candidate')}, {count(len(state.trials), 'trial')}; "
        f"{state.spent_device_seconds / 3600:.4f} of {budget:.4f} GPU-hours spent"
    )
    if state.noise:
        lines.append(f"noise: {noise_line(state.noise)}")
    if state.speedup is not None:
        lines.append(f"incumbent: {state.incumbent}, {state.speedup:.2f}x the baseline")
    return "\n\n".join(lines)
