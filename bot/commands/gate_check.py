"""``attune gate check``: judge a candidate recipe against a baseline before any launch."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bot.console import console
from bot.render import gate_summary, gate_table, verdict_line
from gate.env_allowlist import EnvRefused
from gate.errors import AttuneError, FrameworkRefusal
from gate.models import EffectiveConfig, GateReport
from gate.prelaunch import env_refused, judge, refused
from gate.recipe import load_recipe, refuse_env
from gate.registry import load_registry
from runners.adapters import get_adapter


def resolve_pair(
    baseline_path: Path, candidate_path: Path
) -> tuple[EffectiveConfig, EffectiveConfig | FrameworkRefusal]:
    """Both recipes resolved by one adapter call (one framework import for the pair).

    A candidate the framework refuses comes back as its refusal (a verdict, not an error); a
    baseline it refuses is bad input: there is nothing to compare against."""
    baseline, candidate = load_recipe(baseline_path), load_recipe(candidate_path)
    adapter = get_adapter(baseline.framework, path=baseline.path)
    get_adapter(candidate.framework, path=candidate.path)  # an unknown name is its own error
    if baseline.framework != candidate.framework:
        raise AttuneError(
            f"framework {candidate.framework!r} differs from the baseline's {baseline.framework!r}",
            path=str(candidate_path),
            key="framework",
        )
    try:
        base, cand = adapter.resolve_many([baseline, candidate])
    except FrameworkRefusal as exc:
        # resolve_many raises the first refusal: the candidate's means the baseline resolved
        if exc.path != candidate.path or baseline.path == candidate.path:
            raise AttuneError(f"invalid baseline, nothing to compare against: {exc}") from None
        return adapter.resolve(baseline), exc
    return base, cand


def judge_pair(
    baseline_path: Path, candidate_path: Path, registry_dir: Path | None = None
) -> tuple[EffectiveConfig, GateReport]:
    """The baseline's effective config and the gate's report on the candidate."""
    baseline, candidate = resolve_pair(baseline_path, candidate_path)
    if isinstance(candidate, FrameworkRefusal):
        return baseline, refused(candidate)
    registry = load_registry(baseline.framework, baseline.framework_version, registry_dir)
    return baseline, judge(baseline, candidate, registry)


def env_report(
    baseline_path: Path, candidate_path: Path, registry_dir: Path | None = None
) -> tuple[str, GateReport] | None:
    """(framework, reject) when either recipe sets a variable its framework's allow-list
    refuses, checked before anything is resolved (a resolver would see the environment); the
    baseline is as untrusted as the candidate. None when both are clean."""
    findings = []
    framework = ""
    for path in (baseline_path, candidate_path):
        recipe = load_recipe(path, check_env=False)
        framework = framework or recipe.framework
        try:
            refuse_env(recipe, registry_dir)
        except EnvRefused as exc:
            findings += env_refused(exc).findings
    return (framework, GateReport(verdict="reject", findings=findings)) if findings else None


def gate_check(
    baseline_path: Path,
    candidate_path: Path,
    *,
    as_json: bool,
    registry_dir: Path | None,
    markdown: bool = False,
) -> int:
    """Exit 0 for allow and review, 1 for reject (a candidate the framework refuses included);
    attune's own bad input (an unreadable file, a recipe that is not one, an invalid baseline)
    raises AttuneError (exit 2)."""
    refusal = env_report(baseline_path, candidate_path, registry_dir)
    if refusal is not None:
        framework, report = refusal
        resolved_by = {"framework": framework, "framework_version": None}
    else:
        baseline, report = judge_pair(baseline_path, candidate_path, registry_dir)
        framework = f"{baseline.framework} {baseline.framework_version}"
        resolved_by = {
            "framework": baseline.framework,
            "framework_version": baseline.framework_version,
        }
    if as_json:
        sys.stdout.write(json.dumps({**report.to_json(), **resolved_by}, indent=2) + "\n")
    elif markdown:
        sys.stdout.write(gate_summary(report) + "\n")
    else:
        if report.findings:
            console.print(gate_table(report))
        console.print(verdict_line(report))
        if refusal is None:
            console.print(f"resolved by {framework}")
    return 1 if report.verdict == "reject" else 0
