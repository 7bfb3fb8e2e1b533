"""Pre-launch gate: diff two effective configs and judge every changed key by the registry."""

from __future__ import annotations

from pydantic import BaseModel

from gate.env_allowlist import EnvRefused
from gate.errors import AttuneError, FrameworkRefusal
from gate.models import ConfigChange, EffectiveConfig, Finding, GateReport, Verdict
from gate.registry import Registry
from gate.validation_warnings import warning_findings
from gate.words import count

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


class Machine(BaseModel):
    """What the machine a launch lands on offers (the local backend's own machine)."""

    cores: int
    """CPU cores this process may run on."""
    memory_bytes: int | None = None
    """Physical memory; None when unknown (the memory bound is then not checked)."""


def resource_problem(
    *, ranks: int, cores_per_rank: int, bytes_per_rank: int | None, machine: Machine
) -> str | None:
    """Why a launch of ``ranks`` processes, each running ``cores_per_rank`` threads and
    needing about ``bytes_per_rank`` of memory, cannot run on ``machine``; None when it fits.

    A launch beyond the machine does not fail fast: oversubscribed threads or a batch that
    cannot fit in memory run until the wall-clock limit, charged all the while, so it is
    refused before anything is started or charged."""
    wanted = ranks * cores_per_rank
    if wanted > machine.cores:
        return (
            f"needs {count(ranks, 'rank')} x {count(cores_per_rank, 'thread')} = {wanted} "
            f"cores; this machine has {machine.cores}"
        )
    if bytes_per_rank is not None and machine.memory_bytes is not None:
        total = ranks * bytes_per_rank
        if total > machine.memory_bytes:
            return (
                f"needs about {total / 2**30:,.1f} GiB of memory ({count(ranks, 'rank')} x "
                f"{bytes_per_rank / 2**30:,.1f} GiB for weights, optimizer state and one "
                f"micro-batch's activations); this machine has "
                f"{machine.memory_bytes / 2**30:,.1f} GiB"
            )
    return None
