"""Shared fixtures: small embedded-workload recipes written as real YAML files, the registry."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pluggy import Result

# pytest-xdist's workers start with COLUMNS=80; the suite renders as CI and pipes do (no terminal,
# no COLUMNS: 120 columns, bot/console.py), so a test's output does not depend on -n. Set before
# anything imports bot.console, which reads it once.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

from gate.models import EffectiveConfig, Recipe
from gate.recipe import load_recipe
from gate.registry import Registry, load_registry
from runners.adapters import get_adapter

ROOT = Path(__file__).resolve().parent.parent
"""The repository's root: the one every test names files from."""
ATTUNE = [sys.executable, "-m", "bot.cli"]
"""``attune`` in a subprocess of this interpreter: every test that runs the real command line."""

SMALL_CONFIG: dict[str, Any] = {
    "n_layer": 2,
    "n_head": 4,
    "d_model": 64,
    "seq_len": 32,
    "global_batch_size": 8,
    "micro_batch_size": 1,
    "threads": 1,
}
"""A model small enough that a run of a few steps costs ~2 s on one core, startup included."""

RecipeWriter = Callable[..., Path]


def _write_recipe(
    directory: Path, name: str, *, env: dict[str, str] | None = None, **config: Any
) -> Path:
    """Write ``directory/<name>.yaml``: an embedded recipe with exactly ``config`` (and ``env``)."""
    body: dict[str, Any] = {"framework": "embedded", "name": name, "config": config}
    if env:
        body["env"] = env
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@pytest.fixture
def small_config() -> dict[str, Any]:
    """A fresh copy of SMALL_CONFIG, free to modify."""
    return dict(SMALL_CONFIG)


@pytest.fixture(scope="session")
def write_recipe() -> RecipeWriter:
    """``write_recipe(directory, name, env=None, **config) -> Path`` of a real recipe file."""
    return _write_recipe


@pytest.fixture(scope="session")
def small_recipe() -> Callable[..., Recipe]:
    """``small_recipe(directory, name, env=None, **overrides) -> Recipe``: SMALL_CONFIG with
    overrides, written to disk and read back through the real recipe loader."""

    def make(
        directory: Path, name: str, *, env: dict[str, str] | None = None, **over: Any
    ) -> Recipe:
        return load_recipe(_write_recipe(directory, name, env=env, **{**SMALL_CONFIG, **over}))

    return make


@pytest.fixture(scope="session")
def resolve() -> Callable[[Recipe], EffectiveConfig]:
    """The effective config of a recipe, as the framework adapter resolves it."""

    def run(recipe: Recipe) -> EffectiveConfig:
        return get_adapter(recipe.framework, path=recipe.path).resolve(recipe)

    return run


@pytest.fixture(scope="session")
def registry() -> Registry:
    """The embedded workload's registry, version 1, from registry/."""
    return load_registry("embedded", "1")


@pytest.fixture(autouse=True)
def _no_inherited_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault hook left in the environment must not leak into a test's runs."""
    monkeypatch.delenv("ATTUNE_FAULT", raising=False)


@pytest.fixture(scope="session", autouse=True)
def _fresh_resolve_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Resolutions cached on disk go to a folder of this test session (subprocesses inherit
    it): a suite never reads answers a previous run left in the user's cache."""
    before = os.environ.get("ATTUNE_CACHE_DIR")
    os.environ["ATTUNE_CACHE_DIR"] = str(tmp_path_factory.mktemp("attune-cache"))
    yield
    if before is None:
        del os.environ["ATTUNE_CACHE_DIR"]
    else:
        os.environ["ATTUNE_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def slurm() -> Iterator[Any]:
    """A real single-node Slurm on loopback (``tests/slurm_cluster.py``) for the session.
    Where Slurm cannot be installed the tests that use it FAIL, saying how to install it."""
    from tests.slurm_cluster import ClusterUnavailable, SlurmCluster, ensure_packages

    try:
        ensure_packages()
    except ClusterUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    cluster = SlurmCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_env(slurm: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The cluster's ``ATTUNE_SLURM_*`` settings in this test's environment."""
    for key, value in slurm.settings().items():
        monkeypatch.setenv(key, value)
    return slurm


TIER_MARKERS = ("slow", "slurm", "frameworks")
"""Markers that keep a test out of ``make test-fast``; ``make test`` runs every tier."""
FAST_TIER_LIMIT_S = 10.0
"""An unmarked test may take this long (setup and call) in the fast tier before it fails."""
_SETUP_S = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Result[pytest.TestReport], None]:
    """In the fast tier (``ATTUNE_TEST_TIER=fast``, set by ``make test-fast``), fail an unmarked
    test whose setup and call took over FAST_TIER_LIMIT_S: it belongs in a marked tier, or the
    edit loop slows down unnoticed."""
    outcome = yield
    if os.environ.get("ATTUNE_TEST_TIER") != "fast":
        return
    report = outcome.get_result()
    if call.when == "setup":
        item.stash[_SETUP_S] = report.duration
        return
    if call.when != "call" or not report.passed:
        return
    if any(item.get_closest_marker(name) for name in TIER_MARKERS):
        return
    took = item.stash.get(_SETUP_S, 0.0) + report.duration
    if took > FAST_TIER_LIMIT_S:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {took:.1f} s in the fast tier (limit {FAST_TIER_LIMIT_S:.0f} s): "
            f"mark it with one of {', '.join(TIER_MARKERS)} or make it faster"
        )


@pytest.hookimpl(optionalhook=True)  # only where pytest-xdist is loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``make test`` runs on pytest-xdist workers: a module's tests go to one worker as a unit,
    so a module-scoped fixture (a real campaign, a framework resolution) runs once, and every
    ``tests/test_slurm*.py`` module goes to the same one, so one loopback Slurm serves them all
    (xdist's own ``loadgroup`` marks cannot do this under pytest 9: they rewrite ``_nodeid``)."""
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]  # no py.typed

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]  # untyped base
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "slurm" if Path(module).name.startswith("test_slurm") else module

    return ModuleScheduling(config, log)
