"""``attune lessons list|audit``: the experience bank (``registry/lessons/``, docs/lessons.md).

attune lessons list
attune lessons audit                       # exit 1 when some lesson must be retired
attune lessons audit --bank DIR --root DIR

The audit reads every ledger a lesson cites (paths relative to ``--root``, the attune checkout
by default), the installed framework versions and their registries; the checks themselves are
``bot.lessons.audit``.
"""

from __future__ import annotations

import shutil
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from bot.console import console
from bot.lessons.audit import Audit, audit
from bot.lessons.bank import BANK_DIR, Lesson, load_bank
from bot.render.words import count
from bot.state.fold import campaign_state
from bot.state.model import CampaignState
from gate.errors import AttuneError
from gate.ledger import Ledger
from gate.registry import load_registry

ROOT = BANK_DIR.parent.parent
DISTRIBUTIONS = {"megatron": "megatron-core", "torchtitan": "torchtitan"}
"""Framework -> the package whose installed version the scope is checked against."""


def installed_version(framework: str) -> str | None:
    """The framework version this attune resolves recipes with; None when not installed."""
    if framework == "embedded":
        from runners.embedded.config import WORKLOAD_VERSION

        return WORKLOAD_VERSION
    try:
        return version(DISTRIBUTIONS.get(framework, framework))
    except PackageNotFoundError:
        return None


def layout_keys(framework: str, installed: str) -> set[str] | None:
    try:
        registry = load_registry(framework, installed)
    except AttuneError:
        return None
    return set(registry.layout_sources())


def read_campaign(root: Path, ledger: str, campaign: str) -> CampaignState | str:
    """The cited campaign folded from its ledger, or why it cannot be read."""
    path = Path(ledger) if Path(ledger).is_absolute() else root / ledger
    if not path.is_file():
        return f"the ledger {ledger} does not exist"
    with tempfile.TemporaryDirectory() as tmp:  # opening a ledger writes to it: read a copy
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        if path.with_name(path.name + "-wal").is_file():
            shutil.copyfile(path.with_name(path.name + "-wal"), Path(tmp) / f"{path.name}-wal")
        try:
            with Ledger(copy) as opened:
                if campaign not in opened.campaigns():
                    return f"no campaign {campaign} in {ledger}"
                if not opened.verify().ok:
                    return f"{ledger}: its hash chain is broken"
                return campaign_state(opened, campaign)
        except AttuneError as exc:
            return f"{ledger}: {exc}"


def audit_bank(bank: list[tuple[str, Lesson]], root: Path) -> list[Audit]:
    campaigns: dict[tuple[str, str], CampaignState | str] = {}
    for _, lesson in bank:
        for cited in lesson.evidence:
            key = (cited.ledger, cited.campaign)
            if key not in campaigns:
                campaigns[key] = read_campaign(root, *key)
    frameworks: dict[str, tuple[str | None, set[str] | None]] = {}
    for _, lesson in bank:
        framework = lesson.scope.framework
        if framework not in frameworks:
            installed = installed_version(framework)
            frameworks[framework] = (
                installed,
                layout_keys(framework, installed) if installed else None,
            )
    return [audit(f, x, campaigns, *frameworks[x.scope.framework]) for f, x in bank]


def _rel(path: str, root: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return path


def lessons_audit(bank_dir: Path | None = None, root: Path | None = None) -> int:
    """Print each lesson's verdict; 1 when some lesson must be retired, else 0."""
    root = root or ROOT
    results = audit_bank(_bank(bank_dir), root)
    for r in results:
        verdict = "retired" if r.status == "retired" else ("RETIRE" if r.retire else "holds")
        style = {"RETIRE": "red", "holds": "green"}.get(verdict, "dim")
        console.print(f"[{style}]{verdict}[/] {r.lesson} ({r.status}, {_rel(r.file, root)})")
        for line in r.problems:
            console.print(f"    - {line}", markup=False)
        for line in r.notes:
            console.print(f"    note: {line}", markup=False)
    to_retire = [r.lesson for r in results if r.retire]
    if to_retire:
        console.print(f"to retire ({len(to_retire)}): {', '.join(to_retire)}", markup=False)
        return 1
    console.print(f"{count(len(results), 'lesson')} audited: none to retire")
    return 0


def _bank(bank_dir: Path | None) -> list[tuple[str, Lesson]]:
    """The bank's lessons; a ``--bank`` that is no directory is an error, not an empty bank."""
    if bank_dir is not None and not bank_dir.is_dir():
        what = "is not a directory" if bank_dir.exists() else "does not exist"
        raise AttuneError(f"{what}; --bank takes a folder of lesson files", path=str(bank_dir))
    return load_bank(bank_dir)


def lessons_list(bank_dir: Path | None = None) -> int:
    bank = _bank(bank_dir)
    if not bank:
        console.print(f"no lessons in {bank_dir or BANK_DIR}", markup=False)
    for _, lesson in bank:
        scope = lesson.scope
        console.print(
            f"{lesson.id} [{lesson.status}] {lesson.effect} "
            f"({scope.framework} {scope.versions}, {', '.join(scope.hardware)}): {lesson.claim}",
            markup=False,
        )
    return 0
