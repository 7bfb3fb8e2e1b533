"""The default agent: deterministic rules from the profile and the trial history.

It names the bottleneck from the incumbent's profile (the largest of compute, communication,
CPU-side work and idle), picks ONE layout lever that addresses it (or one coupled parallel
split, declared as such), and writes the hypothesis with the registry's source line for the
lever. It asks for a profile when it has none for the incumbent, never proposes a
configuration already launched, backs off a direction that crashed or ran out of memory, and
stops when the budget cannot cover another trial or when every lever it knows is ruled out,
listing why for each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.interfaces import (
    AgentView,
    FingerprintOf,
    HistoryItem,
    ProfileRequest,
    Proposal,
    Stop,
)

FAILED = ("failed", "oom", "timeout", "nan")


@dataclass(frozen=True)
class Move:
    """A lever move the agent knows, with what it addresses and why."""

    changes: dict[str, Any]
    bottlenecks: tuple[str, ...]
    mechanism: str
    expected_gain_pct: float
    coupled: bool = False


def embedded_moves(v: dict[str, Any], cores: int) -> list[Move]:
    """Moves for the embedded workload from its effective values ``v``."""
    moves: list[Move] = []
    threads, ranks = int(v["threads"]), int(v["data_parallel_size"])
    if threads * ranks < cores:
        moves.append(
            Move(
                {"threads": min(cores // ranks, threads * 2)},
                ("compute",),
                f"each operator runs on {threads} thread(s) while {cores} cores are free; "
                "intra-op threads split every matmul across them",
                40.0,
            )
        )
    if ranks > 1:
        moves.append(
            Move(
                {"data_parallel_size": ranks // 2, "threads": threads * 2},
                ("communication", "idle"),
                f"{ranks} ranks wait on each other in the gradient all-reduce; half the ranks "
                "with twice the threads keeps the cores busy without the collective",
                15.0,
                coupled=True,
            )
        )
    if v["activation_checkpointing"]:
        moves.append(
            Move(
                {"activation_checkpointing": False},
                ("compute",),
                "recompute runs every block's forward a second time in backward; memory is "
                "not the limit here, so storing activations removes that work",
                25.0,
            )
        )
    micro, per_rank = int(v["micro_batch_size"]), int(v["global_batch_size"]) // ranks
    if per_rank % (micro * 2) == 0:
        moves.append(
            Move(
                {"micro_batch_size": micro * 2},
                ("cpu", "compute"),
                f"micro-batch {micro} means {per_rank // micro} small forward/backward passes "
                "per step; fewer, larger ones amortise per-operator overhead and feed bigger "
                "matmuls (the pinned global batch is unchanged)",
                12.0,
            )
        )
    if v["attention"] == "math":
        moves.append(
            Move(
                {"attention": "sdpa"},
                ("compute",),
                "explicit attention materialises the [t, t] score matrix and runs softmax "
                "separately; fused SDPA does it in one kernel",
                6.0,
            )
        )
    if not v["compile"]:
        moves.append(
            Move(
                {"compile": True},
                ("cpu", "compute"),
                "torch.compile fuses elementwise operators and removes Python dispatch per op",
                10.0,
            )
        )
    impl = v["optimizer_impl"]
    if impl != "fused":
        target = "foreach" if impl == "for_loop" else "fused"
        moves.append(
            Move(
                {"optimizer_impl": target},
                ("cpu",),
                f"the {impl} optimizer launches kernels per parameter; {target} batches them",
                3.0,
            )
        )
    return moves


MOVES = {"embedded": embedded_moves}


def bottleneck(view: AgentView) -> str:
    assert view.profile is not None
    p = view.profile
    fractions = {"compute": p.compute, "communication": p.communication, "cpu": p.cpu}
    fractions["idle"] = p.idle
    return max(fractions, key=lambda k: fractions[k])


def _direction(old: object, new: object) -> str:
    if isinstance(old, int | float) and isinstance(new, int | float):
        return "up" if new > old else "down"
    return f"={new}"


def blocked_directions(history: list[HistoryItem]) -> dict[tuple[str, str], str]:
    """(key, direction) -> trial that failed that way: the agent backs off these."""
    blocked = {}
    for item in history:
        if item.status in FAILED:
            for key, (old, new) in item.changes.items():
                blocked[(key, _direction(old, new))] = item.trial
    return blocked


class RulesAgent:
    name = "rules"

    def decide(
        self, view: AgentView, fingerprint_of: FingerprintOf, tried: set[str]
    ) -> Proposal | ProfileRequest | Stop:
        if view.forecast_s > view.budget_left_s:
            return Stop(
                reason="budget",
                evidence=[
                    f"the next trial is forecast at {view.forecast_s:.0f} device-seconds and "
                    f"{view.budget_left_s:.0f} are left"
                ],
            )
        if view.profile is None:
            return ProfileRequest(
                reason=f"no profile of the incumbent ({view.incumbent}): the bottleneck is unclear"
            )
        neck = bottleneck(view)
        make = MOVES.get(view.framework)
        if make is None:
            return Stop(reason="exhausted", evidence=[f"no rules for {view.framework}"])
        moves = make(dict(view.incumbent_values), view.cores)
        # the bottleneck's moves first, each group by expected gain
        moves.sort(key=lambda m: (neck not in m.bottlenecks, -m.expected_gain_pct))
        blocked = blocked_directions(view.history)
        lost = {
            (k, repr(new)): item
            for item in view.history
            if item.decision == "close"
            for k, (_, new) in item.changes.items()
        }
        evidence = []
        for move in moves:
            label = ", ".join(f"{k}={v}" for k, v in move.changes.items())
            old = {k: view.incumbent_values[k] for k in move.changes}
            why = self._ruled_out(move, old, blocked, lost, fingerprint_of, tried, view)
            if why:
                evidence.append(f"{label}: {why}")
                continue
            return Proposal(
                lever=list(move.changes),
                changes={k: (old[k], v) for k, v in move.changes.items()},
                coupled=move.coupled,
                bottleneck=neck,
                mechanism=f"{neck} is {getattr(view.profile, neck):.0%} of the step; "
                + move.mechanism,
                expected_gain_pct=move.expected_gain_pct,
                sources=[view.layout_sources.get(k, "-") for k in move.changes],
            )
        if not moves:
            evidence.append("every lever is already at its fastest known setting")
        return Stop(reason="exhausted", evidence=evidence)

    @staticmethod
    def _ruled_out(
        move: Move,
        old: dict[str, Any],
        blocked: dict[tuple[str, str], str],
        lost: dict[tuple[str, str], HistoryItem],
        fingerprint_of: FingerprintOf,
        tried: set[str],
        view: AgentView,
    ) -> str | None:
        for key, new in move.changes.items():
            if key not in view.layout_sources:
                return "not a layout key in the registry"
            trial = blocked.get((key, _direction(old[key], new)))
            if trial:
                return f"{trial} failed moving {key} this way; backing off"
            item = lost.get((key, repr(new)))
            if item is not None:
                return f"already tried in {item.trial}: {item.reason}"
        fingerprint = fingerprint_of(dict(move.changes))
        if fingerprint is None:
            return "the framework's validation rejects it"
        if fingerprint in tried:
            return "this effective configuration was already run"
        return None
