"""Run a framework's resolve worker in a subprocess whose environment holds no secrets.

Frameworks (Megatron-LM, torchtitan) are never imported by the bot: each adapter sends a JSON
request to ``python -m <worker module>`` and reads one JSON answer. One process resolves any
number of recipes, so the framework's import cost is paid once per gate check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.errors import AttuneError

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL")
"""The only variables of the caller's environment a worker sees (besides PYTHONPATH)."""

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKER_TIMEOUT_S = 300.0


def worker_env(
    extra_path_vars: Sequence[str] = (), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The worker's environment: PATH, HOME, LANG, LC_ALL and PYTHONPATH, nothing else.

    PYTHONPATH is the directories named by ``extra_path_vars`` (a framework checkout the user
    configured, when set), then this repository, then the caller's PYTHONPATH. Tokens, keys and
    cloud credentials stay behind.
    """
    source = os.environ if environ is None else environ
    env = {k: source[k] for k in PASSED_ENV if k in source}
    paths = [source[var] for var in extra_path_vars if source.get(var)]
    paths.append(str(REPO_ROOT))
    if source.get("PYTHONPATH"):
        paths.append(source["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def run_worker(
    module: str,
    request: dict[str, Any],
    *,
    label: str,
    missing_module: str,
    install_hint: str,
    extra_path_vars: Sequence[str] = (),
) -> dict[str, Any]:
    """Send ``request`` to ``python -m module`` and return its JSON answer.

    A worker that cannot import ``missing_module`` is an AttuneError carrying ``install_hint``;
    any other failure is an AttuneError with the last line of the worker's stderr.
    """
    try:
        proc = subprocess.run(
            [sys.executable, "-m", module],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=worker_env(extra_path_vars),
            cwd=REPO_ROOT,
            timeout=WORKER_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise AttuneError(
            f"{label} resolve worker timed out after {WORKER_TIMEOUT_S:g} s"
        ) from None
    if proc.returncode != 0:
        if f"No module named '{missing_module}" in proc.stderr:
            raise AttuneError(f"{label} is not importable: {install_hint}")
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise AttuneError(f"{label} resolve worker failed: {tail[0]}")
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer
