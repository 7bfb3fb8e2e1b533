"""``attune bench``: run one benchmark trial and write its result JSON."""

from __future__ import annotations

import os
from pathlib import Path

from bot.commands.preflight import DoctorFailed, preflight, refused_result
from bot.commands.stop import sigterm_interrupts
from bot.console import console
from bot.render import trial_line
from gate.errors import AttuneError, RunFailed
from gate.recipe import load_recipe
from runners.adapters import get_adapter
from runners.backends import make_backend
from runners.bench import check_run_length, check_timeout, run_bench


def check_out(out: Path) -> None:
    """The result file can be written: not a directory, its folder made (or makeable) and
    writable. Raises AttuneError otherwise, before anything runs."""
    if out.is_dir():
        raise AttuneError("is a directory; --out takes the result file's path", path=str(out))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AttuneError(
            f"cannot make the result's folder ({exc.strerror})", path=str(out.parent)
        ) from None
    if not os.access(out.parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise AttuneError("the result file cannot be written here (permission)", path=str(out))


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
    """Exit 0 when the run finished cleanly, 1 when it finished with NaN/Inf, 4 (``RunFailed``)
    when it did not finish: crashed, ran out of memory, hung, timed out or lost a rank. The
    result JSON is written in every case; bad input (exit 2) is refused before the run. A
    Megatron-LM or torchtitan recipe on the local backend is checked by ``attune doctor``
    first (``bot.commands.preflight``): a failed check is exit 2 with nothing run, and a
    ``failed`` result holding the doctor's words is written to ``out``."""
    check_run_length(steps, warmup)
    check_timeout(timeout_s)
    recipe = load_recipe(recipe_path)
    workdir = workdir or Path("runs") / "bench" / recipe.name
    out = out or workdir / "result.json"
    check_out(out)  # before the run: a result that cannot be written would be lost
    try:
        preflight(recipe, backend=backend, workdir=workdir)  # attune doctor, for a GPU recipe
    except DoctorFailed as refused:
        # the bench action uploads this result: the doctor's words reach the bot and the PR
        effective = get_adapter(recipe.framework, path=recipe.path).resolve(recipe)
        result = refused_result(recipe, str(refused), warmup=warmup, devices=effective.devices)
        result.fingerprint, result.trial, result.sha = effective.fingerprint(), trial, sha
        out.write_text(result.model_dump_json(indent=2))
        raise
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
    if result.status not in ("ok", "nan"):
        last = (result.error or "").strip().splitlines()[-1:] or ["no output"]
        raise RunFailed(
            f"workload {result.status}: {last[0].strip()} (log: {result.log_path})",
            path=str(recipe_path),
        )
    return 0 if result.status == "ok" else 1
