"""The ``attune`` command line's arguments: every subcommand, its options and their types
(``bot/commands/args.py``); ``bot/cli.py`` parses with it and dispatches."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.commands.args import directory, ledger_file, port, pr_number
from runners.backends import BACKENDS
from runners.bench import DEFAULT_STEPS, DEFAULT_WARMUP

DEFAULT_LEDGER = Path(".attune") / "ledger.db"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attune", description="Tune training recipes safely.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="tune the embedded example end to end (about 3 min)")
    demo.add_argument("--workdir", type=directory, help="default: runs/demo-<time>")
    demo.add_argument(
        "--long",
        action="store_true",
        help="the long campaign (about 11 min on 2 cores): 12-step runs, 12 candidates, A/B "
        "re-measurement and a confirmation",
    )
    demo.add_argument("--steps", type=int, help="steps per run (default: 6; --long: 12)")
    demo.add_argument("--warmup", type=int, help="steps not scored (default: 2; --long: 3)")
    demo.add_argument("--budget", type=float, help="device-hours (default: 0.15; --long: 0.25)")
    demo.add_argument("--max-trials", type=int, help="candidates at most (default: 3; --long: 12)")
    demo.add_argument(
        "--max-pairs", type=int, help="A/B pairs at most per candidate (default: 0; --long: 3)"
    )
    demo.add_argument(
        "--confirm-pairs", type=int, help="final confirmation pairs (default: 0; --long: 1)"
    )

    tune = sub.add_parser("tune", help="run a tuning campaign (or --resume one)")
    tune.add_argument("recipe", type=Path, nargs="?")
    tune.add_argument(
        "--budget",
        type=float,
        help="device-hours the campaign may spend (no default: a new campaign needs one; one "
        "that buys no candidate is refused with the minimum)",
    )
    tune.add_argument(
        "--agent",
        default="rules",
        help="who proposes candidates: rules, model (the calibrated step-time model's search), "
        "claude (needs ANTHROPIC_API_KEY), or the baselines random and tpe (seed: "
        "ATTUNE_AGENT_SEED)",
    )
    tune.add_argument("--workdir", type=directory, help="default: runs/tune-<recipe>-<time>")
    tune.add_argument(
        "--resume", type=directory, metavar="DIR", help="continue the campaign in DIR"
    )
    tune.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="training steps per run")
    tune.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="first steps not scored")
    tune.add_argument("--max-trials", type=int, default=20, help="candidates at most")
    tune.add_argument("--calibration-runs", type=int, default=5, help="baseline runs (>= 5)")
    tune.add_argument(
        "--max-pairs",
        type=int,
        help="A/B re-measurement: pairs at most per candidate (default 6; 0: off, a first run "
        "within the one-run bar closes)",
    )
    tune.add_argument(
        "--confirm-pairs",
        type=int,
        help="pairs of the winner's final confirmation against the baseline (default 3; 0: none)",
    )
    tune.add_argument(
        "--no-lessons",
        action="store_true",
        help="the agent does not read the experience bank (registry/lessons/), for ablation",
    )
    tune.add_argument(
        "--backend",
        choices=BACKENDS,
        help="where trials run (default local; slurm: ATTUNE_SLURM_*)",
    )

    stop = sub.add_parser("stop", help="ask the campaign running in DIR to stop")
    stop.add_argument("workdir", type=directory)

    report = sub.add_parser("report", help="rebuild a campaign's report from its ledger")
    report.add_argument("workdir", type=directory)

    bench = sub.add_parser("bench", help="run one benchmark trial of a recipe")
    bench.add_argument("recipe", type=Path)
    bench.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="training steps")
    bench.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help="steps not scored")
    bench.add_argument("--out", type=Path, help="result JSON (default: WORKDIR/result.json)")
    bench.add_argument("--workdir", type=directory, help="logs and launch files")
    bench.add_argument("--profile", action="store_true", help="record and split a profile")
    bench.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit (s)")
    bench.add_argument("--trial", help="trial id the bot dispatched, echoed in the result")
    bench.add_argument("--sha", help="commit the recipe was read from, echoed in the result")
    bench.add_argument("--backend", choices=BACKENDS, default="local", help="where it runs")

    gate = sub.add_parser("gate", help="pre-launch gate")
    gate_sub = gate.add_subparsers(dest="gate_command", required=True)
    check = gate_sub.add_parser("check", help="judge CANDIDATE against BASELINE")
    check.add_argument("baseline", type=Path)
    check.add_argument("candidate", type=Path)
    fmt = check.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", dest="as_json")
    fmt.add_argument("--markdown", action="store_true", help="a table for a check-run summary")
    check.add_argument("--registry", type=Path, help="registry directory (default: registry/)")

    init = sub.add_parser(
        "init", help="write attune's workflows and config into a training repository"
    )
    init.add_argument("dest", type=Path, help="the training repository's checkout")
    init.add_argument(
        "--ref", help="attune commit to pin (40 hex; default: this attune checkout's HEAD)"
    )
    init.add_argument(
        "--action-repo",
        default="attune/attune",
        help="OWNER/NAME of the repository hosting attune's actions (default: %(default)s)",
    )
    init.add_argument(
        "--no-check",
        action="store_true",
        help="do not ask GitHub whether --action-repo has the --ref commit",
    )
    init.add_argument("--force", action="store_true", help="overwrite files that differ")

    env = sub.add_parser(
        "train-env", help="prepare the GPU training environment of a Megatron/torchtitan recipe"
    )
    env.add_argument("recipe", type=Path)
    for name in ("torch", "cuda", "megatron", "torchtitan", "transformer-engine", "python"):
        env.add_argument(f"--{name}", default="")
    env.add_argument("--cache", type=Path, required=True, help="the runner's tool cache")
    env.add_argument("--github-env", type=Path, help="append the settings to this file")

    doctor = sub.add_parser("doctor", help="check this machine runs a GPU recipe, before a run")
    doctor.add_argument("recipe", type=Path)
    doctor.add_argument("--workdir", type=Path, default=Path("."), help="where runs will write")
    doctor.add_argument("--json", action="store_true")
    predict = sub.add_parser("predict", help="predicted step time, throughput and memory")
    predict.add_argument("recipe", type=Path)
    predict.add_argument("--hardware", help="a part of registry/hardware/parts.yaml")
    predict.add_argument("--json", action="store_true")
    plan = sub.add_parser("plan", help="what a campaign would try and cost, before any launch")
    plan.add_argument("recipe", type=Path)
    plan.add_argument("--budget", type=float, help="device-hours to check the forecast against")
    plan.add_argument("--top", type=int, default=5, help="best predicted layouts shown")
    plan.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="training steps per run")
    plan.add_argument("--calibration-runs", type=int, default=5, help="baseline runs (>= 5)")
    plan.add_argument("--hardware", help="a part of registry/hardware/parts.yaml")
    plan.add_argument("--json", action="store_true")

    log = sub.add_parser("log", help="read a training run's log the way a campaign does")
    log_sub = log.add_subparsers(dest="log_command", required=True)
    parse = log_sub.add_parser("parse", help="status, step-1 loss, tokens/s/device, peak memory")
    parse.add_argument("log", type=Path)
    parse.add_argument("--framework", choices=("megatron", "torchtitan"), required=True)
    parse.add_argument("--world-size", type=int, default=1, help="devices (default 1)")
    parse.add_argument("--seq-length", type=int, help="tokens per sequence")
    parse.add_argument("--global-batch-size", type=int, help="torchtitan: sequences per step")
    parse.add_argument("--pipeline-parallel", type=int, default=1, help="torchtitan: PP degree")
    parse.add_argument("--steps", type=int, help="steps wanted (default: those logged)")
    parse.add_argument("--warmup", type=int, default=0, help="steps not scored")
    parse.add_argument("--exit-code", type=int, help="default: exit.json beside LOG, or unknown")
    parse.add_argument("--ended", choices=("timeout", "hang"), help="how the run was killed")
    parse.add_argument("--json", action="store_true")

    serve = sub.add_parser("serve", help="the GitHub App: webhook server (settings: ATTUNE_*)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=port, default=8000)

    registry = sub.add_parser("registry", help="the key registry")
    registry_sub = registry.add_subparsers(dest="registry_command", required=True)
    cov = registry_sub.add_parser(
        "coverage", help="parser keys the registry misses, and registry keys the parser lacks"
    )
    cov.add_argument("--framework", required=True, help="embedded, megatron or torchtitan")
    cov.add_argument("--registry", type=Path, help="registry directory (default: registry/)")
    cov.add_argument("--json", action="store_true", dest="as_json")

    ledger = sub.add_parser("ledger", help="the append-only cost ledger")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", required=True)
    for name, text in (("verify", "re-hash the chain"), ("show", "events and GPU-hours")):
        p = ledger_sub.add_parser(name, help=text)
        p.add_argument(
            "--ledger",
            type=ledger_file,
            help=f"default: ledger.db when the current directory is a campaign's, else "
            f"{DEFAULT_LEDGER} (the App's)",
        )
        if name == "show":
            p.add_argument("--campaign")
        else:  # SEQ:HASH heads copied from campaign comments or reports
            p.add_argument("--anchor", action="append", default=[], metavar="SEQ:HASH")

    lessons = sub.add_parser("lessons", help="the experience bank (registry/lessons/)")
    lessons_sub = lessons.add_subparsers(dest="lessons_command", required=True)
    audit = lessons_sub.add_parser("audit", help="re-check every lesson against its ledgers")
    audit.add_argument("--root", type=Path, help="cited ledgers' root (default: attune's)")
    for p in (lessons_sub.add_parser("list", help="every lesson, its status and scope"), audit):
        p.add_argument("--bank", type=Path, help="lesson directory (default: registry/lessons)")

    pr = sub.add_parser("pr", help="pull requests of the local forge (WORKDIR/forge)")
    pr_sub = pr.add_subparsers(dest="pr_command", required=True)
    pr_list = pr_sub.add_parser("list", help="every pull request, its state and checks")
    pr_show = pr_sub.add_parser("show", help="one pull request: body, diff, checks, comments")
    pr_show.add_argument("number", type=pr_number)
    for p in (pr_list, pr_show):
        p.add_argument("--workdir", type=directory, default=Path("."), help="default: .")
    show_defaults(parser)
    return parser


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Every option's default in ``--help``: appended to its help unless the help already
    says it (``default: ...``); flags (``store_true``) and options without one are left."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
            continue
        default = action.default
        if not action.option_strings or default in (None, False, argparse.SUPPRESS, []):
            continue
        if action.help and "default" in action.help:
            continue
        shown = str(default).replace("%", "%%")
        action.help = f"{action.help} (default: {shown})" if action.help else f"default: {shown}"
