"""``attune bench``: run one benchmark trial and write its result JSON."""

from __future__ import annotations

from pathlib import Path

from bot.commands.stop import sigterm_interrupts
from bot.console import console
from bot.render import trial_line
from gate.errors import AttuneError
from gate.recipe import load_recipe
from runners.backends import make_backend
from runners.bench import run_bench


def bench(
    recipe_path: Path,
    *,
    steps: int,
    warmup: int,
    out: Path | None,
    workdir: Path | None,
    profile: bool,
    timeout_s: float,
    trial: str | None = None,
    sha: str | None = None,
    backend: str = "local",
) -> int:
    """Exit 0 when the run finished cleanly, 1 when it finished with NaN/Inf, 2 when the
    workload crashed, ran out of memory or hung (the result JSON is written in every case)."""
    recipe = load_recipe(recipe_path)
    workdir = workdir or Path("runs") / "bench" / recipe.name
    with sigterm_interrupts():  # a shutdown cancels a cluster job instead of orphaning it
        result = run_bench(
            recipe,
            steps=steps,
            warmup=warmup,
            workdir=workdir,
            profile=profile,
            timeout_s=timeout_s,
            backend=make_backend(backend),
        )
    result.trial, result.sha = trial, sha  # echoed: the bot adopts only what it dispatched
    out = out or workdir / "result.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(result.model_dump_json(indent=2))
    console.print(f"{recipe.name}: {trial_line(result)}")
    if result.profile is not None:
        p = result.profile
        console.print(
            f"profile over {p.steps} steps ({p.step_seconds * 1000:.0f} ms/step): "
            f"compute {p.compute:.1%}, communication {p.communication:.1%}, "
            f"cpu {p.cpu:.1%}, idle {p.idle:.1%}"
        )
    console.print(f"result: {out}")
    if result.status in ("failed", "oom", "timeout"):
        last = (result.error or "").strip().splitlines()[-1:] or ["no output"]
        raise AttuneError(
            f"workload {result.status}: {last[0].strip()} (log: {result.log_path})",
            path=str(recipe_path),
        )
    return 0 if result.status == "ok" else 1
