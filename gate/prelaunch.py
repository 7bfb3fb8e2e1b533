"""Pre-launch gate: diff two effective configs and judge every changed key by the registry."""

from __future__ import annotations

from gate.env_allowlist import EnvRefused
from gate.errors import AttuneError, FrameworkRefusal
from gate.models import ConfigChange, EffectiveConfig, Finding, GateReport, Verdict
from gate.registry import Registry
from gate.validation_warnings import warning_findings

_MISSING = object()


def diff(baseline: EffectiveConfig, candidate: EffectiveConfig) -> list[ConfigChange]:
    """Keys whose effective value differs (environment included), sorted by key."""
    base, cand = baseline.flat(), candidate.flat()
    changes = []
    for key in sorted(base.keys() | cand.keys()):
        b, c = base.get(key, _MISSING), cand.get(key, _MISSING)
        if b != c or type(b) is not type(c):
            changes.append(
                ConfigChange(
                    key=key,
                    baseline=None if b is _MISSING else b,
                    candidate=None if c is _MISSING else c,
                )
            )
    return changes


def judge(baseline: EffectiveConfig, candidate: EffectiveConfig, registry: Registry) -> GateReport:
    """semantic or known_bug anywhere -> reject; else unknown anywhere -> review; else allow.

    Besides the changed keys, the warnings the candidate's validation introduces are judged
    (``gate.validation_warnings``): one about numerical stability or correctness is a finding."""
    if baseline.framework != candidate.framework:
        raise AttuneError(
            f"cannot compare a {baseline.framework} recipe with a {candidate.framework} one"
        )
    findings = []
    for change in diff(baseline, candidate):
        c = registry.classify(change.key, baseline, candidate)
        findings.append(
            Finding(
                key=change.key,
                baseline=change.baseline,
                candidate=change.candidate,
                key_class=c.key_class,
                reason=c.reason,
                source=c.source,
                derived=change.key not in candidate.explicit,
            )
        )
    findings += warning_findings(baseline, candidate, registry)
    findings += _unchanged_env_refusals(baseline, candidate, registry, findings)
    classes = {f.key_class for f in findings}
    verdict: Verdict = "allow"
    if classes & {"semantic", "known_bug", "invalid"}:
        verdict = "reject"
    elif "unknown" in classes:
        verdict = "review"
    return GateReport(verdict=verdict, findings=findings)


def _unchanged_env_refusals(
    baseline: EffectiveConfig,
    candidate: EffectiveConfig,
    registry: Registry,
    findings: list[Finding],
) -> list[Finding]:
    """An ``invalid`` finding for each variable a recipe sets that the registry's allow-list
    refuses and that no finding names yet (the same in both recipes, so not in the diff): the
    baseline is as untrusted as the candidate."""
    named = {f.key for f in findings}
    out = []
    for config in (baseline, candidate):
        for name in sorted(config.env):
            key = f"env.{name}"
            if key in named or key not in config.explicit:
                continue
            problem = registry.env_allowlist.name_problem(name)
            if problem is not None:
                named.add(key)
                value = config.env[name]
                out.append(
                    Finding(
                        key=key,
                        baseline=baseline.env.get(name),
                        candidate=candidate.env.get(name, value),
                        key_class="invalid",
                        reason=problem,
                        source="-",
                    )
                )
    return out


def env_refused(refusal: EnvRefused) -> GateReport:
    """The verdict on a pair where a recipe sets a variable its framework's allow-list does
    not hold (or a value that is not one line of bounded text): reject, one ``invalid``
    finding per variable, naming the recipe. Nothing was resolved or run."""
    where = refusal.recipe_path or "the recipe"
    findings = [
        Finding(
            key=key,
            baseline=None,
            candidate=None,
            key_class="invalid",
            reason=f"{where}: {why}" + (f"; {refusal.allowed}" if refusal.allowed else ""),
            source="-",
        )
        for key, why in refusal.problems
    ]
    return GateReport(verdict="reject", findings=findings)


def refused(refusal: FrameworkRefusal) -> GateReport:
    """The verdict on a candidate the framework's own validation refuses: reject, with one
    ``invalid`` finding quoting the framework's message and the line that raised it."""
    who = refusal.framework or "the framework"
    at = f" {refusal.version}" if refusal.version else ""
    finding = Finding(
        key=refusal.key or "-",
        baseline=None,
        candidate=None,
        key_class="invalid",
        reason=f"{who}{at} refuses this configuration: {refusal.message}",
        source=refusal.source or "-",
    )
    return GateReport(verdict="reject", findings=[finding])
