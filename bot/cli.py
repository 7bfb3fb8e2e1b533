"""The ``attune`` command line: parse arguments, call one command function, map errors.

attune demo
attune bench examples/ported-gpt.yaml --steps 16 --warmup 4 --out result.json
attune gate check examples/ported-gpt.yaml examples/candidates/threads-2.yaml --json
attune registry coverage --framework megatron
attune init ../models --ref 0123456789abcdef0123456789abcdef01234567
attune ledger verify --ledger runs/demo-.../ledger.db
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import traceback
from collections.abc import Sequence

from bot.commands.parser import build_parser
from gate.errors import AttuneError

log = logging.getLogger("attune")


def dispatch(args: argparse.Namespace) -> int:
    # imports are per command: `attune ledger` must not pay for torch
    if args.command == "demo":
        from bot.commands.demo import demo

        return demo(
            workdir=args.workdir,
            long=args.long,
            steps=args.steps,
            warmup=args.warmup,
            budget_hours=args.budget,
            max_trials=args.max_trials,
            pairs=(args.max_pairs, args.confirm_pairs),
        )
    if args.command == "tune":
        from bot.commands.tune import tune

        if args.calibration_runs < 5:
            raise AttuneError(f"--calibration-runs must be at least 5, got {args.calibration_runs}")
        return tune(
            args.recipe,
            budget_hours=args.budget,
            agent=args.agent,
            workdir=args.workdir,
            resume=args.resume,
            steps=args.steps,
            warmup=args.warmup,
            max_trials=args.max_trials,
            calibration_runs=args.calibration_runs,
            backend=args.backend,
            lessons=not args.no_lessons,
            pairs=(args.max_pairs, args.confirm_pairs),
        )
    if args.command == "stop":
        from bot.commands.stop import stop

        return stop(args.workdir)
    if args.command == "report":
        from bot.commands.tune import report

        return report(args.workdir)
    if args.command == "bench":
        from bot.commands.bench import bench

        return bench(
            args.recipe,
            steps=args.steps,
            warmup=args.warmup,
            out=args.out,
            workdir=args.workdir,
            profile=args.profile,
            timeout_s=args.timeout,
            trial=args.trial,
            sha=args.sha,
            backend=args.backend,
        )
    if args.command == "gate":
        from bot.commands.gate_check import gate_check

        return gate_check(
            args.baseline,
            args.candidate,
            as_json=args.as_json,
            markdown=args.markdown,
            registry_dir=args.registry,
        )
    if args.command == "init":
        from bot.commands.init import init

        return init(
            args.dest,
            ref=args.ref,
            force=args.force,
            action_repo=args.action_repo,
            check=not args.no_check,
        )
    if args.command == "train-env":
        from bot.commands.train_env import TrainEnvRequest, train_env

        request = TrainEnvRequest(
            torch=args.torch,
            cuda=args.cuda,
            megatron=args.megatron,
            torchtitan=args.torchtitan,
            transformer_engine=args.transformer_engine,
            python=args.python,
        )
        return train_env(args.recipe, request, cache=args.cache, github_env=args.github_env)
    if args.command == "doctor":
        from bot.commands.doctor import doctor

        return doctor(args.recipe, workdir=args.workdir, as_json=args.json)
    if args.command == "predict":
        from bot.commands.predict import predict

        return predict(args.recipe, hardware=args.hardware, as_json=args.json)
    if args.command == "plan":
        from bot.commands.plan import plan

        return plan(
            args.recipe,
            budget_h=args.budget,
            as_json=args.json,
            top=args.top,
            steps=args.steps,
            calibration_runs=args.calibration_runs,
            hardware=args.hardware,
        )
    if args.command == "log":
        from bot.commands.log import print_reading, read_log

        reading = read_log(
            args.log,
            framework=args.framework,
            world_size=args.world_size,
            seq_length=args.seq_length,
            global_batch_size=args.global_batch_size,
            pipeline_parallel=args.pipeline_parallel,
            steps=args.steps,
            warmup=args.warmup,
            exit_code=args.exit_code,
            ended=args.ended,
        )
        print_reading(reading, as_json=args.json)
        return 0 if reading.status == "ok" else 1
    if args.command == "serve":
        from bot.commands.serve import serve

        return serve(host=args.host, port=args.port)
    if args.command == "registry":
        from bot.commands.registry import registry_coverage

        return registry_coverage(args.framework, registry_dir=args.registry, as_json=args.as_json)
    if args.command == "lessons":
        from bot.commands.lessons import lessons_audit, lessons_list

        if args.lessons_command == "list":
            return lessons_list(args.bank)
        return lessons_audit(args.bank, args.root)
    if args.command == "pr":
        from bot.commands.pr import pr_list, pr_show

        if args.pr_command == "list":
            return pr_list(args.workdir)
        return pr_show(args.workdir, args.number)
    from bot.commands.ledger import default_ledger, ledger_show, ledger_verify

    path = args.ledger or default_ledger()
    if args.ledger_command == "verify":
        return ledger_verify(path, anchors=args.anchor)
    return ledger_show(path, campaign=args.campaign)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit codes (``docs/cli.md``): the command's own (0/1), an ``AttuneError``'s ``exit_code``
    (2 bad input, 4 a run that did not finish), 3 an unexpected error, 130 interrupted."""
    args = build_parser().parse_args(argv)
    try:
        return dispatch(args)
    except AttuneError as exc:
        # one plain line, never wrapped: scripts and CI logs grep it
        sys.stderr.write(f"attune: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt as exc:  # a campaign says what goes on and how to resume it
        sys.stderr.write(f"attune: interrupted: {exc}\n" if str(exc) else "attune: interrupted\n")
        return 130
    except Exception as exc:
        with tempfile.NamedTemporaryFile(
            "w", prefix="attune-crash-", suffix=".log", delete=False
        ) as f:
            traceback.print_exc(file=f)
        sys.stderr.write(
            f"attune: unexpected error: {type(exc).__name__}: {exc} (traceback: {f.name})\n"
        )
        return 3


if __name__ == "__main__":
    sys.exit(main())
