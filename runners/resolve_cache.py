"""Resolved recipes, remembered: one resolver process per distinct recipe, not one per call.

A campaign asks for the same recipe's effective config many times (every gate, every judgement,
every agent probe), and a Megatron-LM resolution is a framework import in a subprocess. The
answer depends only on what the worker is sent (the recipe's arguments, world size,
architecture and environment), the framework installed, and attune's resolver code; the key
hashes all of them. Answers live in memory for the process and on disk
(``$ATTUNE_CACHE_DIR/resolve``, default ``~/.cache/attune/resolve``), so a second ``attune gate
check`` of the same pair starts no resolver at all. A framework checkout named by the adapter's
path variable is part of the key only by path, so its answers are kept in memory only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from gate.models import canonical_json

CACHE_DIR_VAR = "ATTUNE_CACHE_DIR"
_RUNNERS = Path(__file__).resolve().parent


@cache
def _code_digest(worker: str) -> str:
    """attune's resolver code: every module of the worker's package (the worker imports its
    recipe model and derivations from there) and the shared worker plumbing, so an upgraded
    attune never reads an answer its older resolver gave."""
    package = _RUNNERS.parent / Path(*worker.split(".")[:-1])
    files = sorted(package.glob("*.py"))
    files += [_RUNNERS / "worker_support.py", _RUNNERS / "resolve_process.py"]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _installed(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


class ResolveCache:
    """Worker answers per request item, in memory and (unless a checkout is used) on disk."""

    def __init__(self, worker: str, distribution: str, path_var: str) -> None:
        self.worker, self.distribution, self.path_var = worker, distribution, path_var
        self._memory: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def key(self, item: dict[str, Any]) -> str:
        context = {
            "worker": self.worker,
            "code": _code_digest(self.worker),
            "framework": _installed(self.distribution),
            "checkout": os.environ.get(self.path_var, ""),
            "item": item,
        }
        return hashlib.sha256(canonical_json(context).encode()).hexdigest()

    def _dir(self) -> Path | None:
        if os.environ.get(self.path_var):
            return None  # a checkout can change under the same path: memory only
        root = os.environ.get(CACHE_DIR_VAR) or Path.home() / ".cache" / "attune"
        return Path(root) / "resolve"

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._memory:
                return self._memory[key]
        folder = self._dir()
        if folder is None:
            return None
        try:
            found: dict[str, Any] = json.loads((folder / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        with self._lock:
            self._memory[key] = found
        return found

    def put(self, key: str, answer: dict[str, Any]) -> None:
        """``answer``: ``{"version": ..., "result": ...}`` (a result or an error)."""
        with self._lock:
            self._memory[key] = answer
        folder = self._dir()
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as f:
                json.dump(answer, f)
            os.replace(f.name, folder / f"{key}.json")
        except OSError:
            pass  # an unwritable cache only costs the next process a resolution
