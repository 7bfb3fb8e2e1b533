"""Pre-launch gate: diff two effective configs and judge every changed key by the registry."""

from __future__ import annotations

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
    classes = {f.key_class for f in findings}
    verdict: Verdict = "allow"
    if classes & {"semantic", "known_bug", "invalid"}:
        verdict = "reject"
    elif "unknown" in classes:
        verdict = "review"
    return GateReport(verdict=verdict, findings=findings)


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
