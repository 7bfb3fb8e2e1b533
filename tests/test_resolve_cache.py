"""A Megatron-LM campaign starts one resolver process per distinct recipe, not one per call."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gate.recipe import load_recipe
from runners import worker_adapter
from runners.megatron.adapter import MegatronAdapter

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "megatron"

pytest.importorskip("megatron.core")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[int]:
    """Each resolver process started, with how many recipes it was asked; a cache of its own."""
    monkeypatch.setenv("ATTUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(worker_adapter, "_CACHES", {})
    asked: list[int] = []
    real = MegatronAdapter._ask

    def ask(self: MegatronAdapter, request: dict[str, object]) -> dict[str, object]:
        asked.append(len(request.get("recipes") or []))  # type: ignore[arg-type]
        return real(self, request)

    monkeypatch.setattr(MegatronAdapter, "_ask", ask)
    return asked


def test_one_resolver_per_distinct_recipe(counted: list[int]) -> None:
    base = load_recipe(EXAMPLES / "llama3-8b.yaml")
    cand = load_recipe(EXAMPLES / "candidates" / "llama3-8b-micro-batch-2.yaml")
    first = MegatronAdapter().resolve_many([base, cand, base])
    assert counted == [2]  # the duplicate is asked once
    again = [MegatronAdapter().resolve(base) for _ in range(5)]
    assert counted == [2]  # a new adapter instance, same process: no resolver
    assert all(a == first[0] for a in again)
    assert first[1].fingerprint() != first[0].fingerprint()


def test_a_new_process_reads_the_disk_cache(counted: list[int]) -> None:
    base = load_recipe(EXAMPLES / "llama3-8b.yaml")
    resolved = MegatronAdapter().resolve(base)
    worker_adapter._CACHES.clear()  # as a new process would start
    assert MegatronAdapter().resolve(base) == resolved
    assert counted == [1]
    files = list(Path(os.environ["ATTUNE_CACHE_DIR"], "resolve").glob("*.json"))
    assert len(files) == 1


def test_another_recipe_or_environment_is_resolved_again(
    counted: list[int], tmp_path: Path
) -> None:
    text = (EXAMPLES / "llama3-8b.yaml").read_text()
    base = load_recipe(EXAMPLES / "llama3-8b.yaml")
    MegatronAdapter().resolve(base)
    env_changed = tmp_path / "env.yaml"
    env_changed.write_text(text.replace("env:", "env:\n  NCCL_DEBUG: INFO", 1))
    assert "NCCL_DEBUG" in env_changed.read_text()
    MegatronAdapter().resolve(load_recipe(env_changed))
    assert counted == [1, 1]


def test_the_key_follows_the_whole_resolver_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A module the worker imports (not only the worker itself) is part of the code digest."""
    from runners import resolve_cache

    real = Path(resolve_cache.__file__).parent
    copy = tmp_path / "runners"
    shutil.copytree(real / "megatron", copy / "megatron", ignore=shutil.ignore_patterns("__py*"))
    for name in ("worker_support.py", "resolve_process.py"):
        shutil.copy(real / name, copy / name)
    monkeypatch.setattr(resolve_cache, "_RUNNERS", copy)
    resolve_cache._code_digest.cache_clear()
    try:
        before = resolve_cache._code_digest("runners.megatron.resolve_worker")
        with (copy / "megatron" / "recipe.py").open("a") as f:
            f.write("\n# changed\n")
        resolve_cache._code_digest.cache_clear()
        assert resolve_cache._code_digest("runners.megatron.resolve_worker") != before
    finally:
        resolve_cache._code_digest.cache_clear()
