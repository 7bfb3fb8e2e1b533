"""``attune init``: install attune into a training repository's checkout.

Writes the two thin workflows (``attune-gate.yml``, ``attune-bench.yml``), the small config
(``.github/attune.yml``) and an actionlint config naming the self-hosted runner's ``gpu`` label
(``.github/actionlint.yaml``) from ``bot/templates/``, with every ``attune/attune/actions/...@``
reference pointed at the repository that hosts attune (``--action-repo``, default
``DEFAULT_ACTION_REPO``) and pinned to one attune commit, which is checked to exist there when
GitHub can be asked (``bot.commands.init_ref``). The bench workflow's training versions are
attune's one version set (``runners.versions.PINS``). The workflows check out the training
repository as data only; the code they run, the gate's registry included, comes from that commit.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from bot.checks import GATE_CHECK
from bot.commands.init_ref import check_ref, check_repo
from bot.render.words import count
from gate.errors import AttuneError
from runners.versions import PINS

FILES: tuple[tuple[str, str], ...] = (
    ("workflows/attune-gate.yml", ".github/workflows/attune-gate.yml"),
    ("workflows/attune-bench.yml", ".github/workflows/attune-bench.yml"),
    ("attune.yml", ".github/attune.yml"),
    ("actionlint.yml", ".github/actionlint.yaml"),
)
"""(template under ``bot/templates/``, destination in the training repository)."""

DEFAULT_ACTION_REPO = "attune/attune"
"""The project's canonical repository: where ``uses:`` finds ``actions/gate`` and
``actions/bench`` unless ``--action-repo`` names a fork or a mirror."""

COMMIT = re.compile(r"[0-9a-f]{40}")
ACTION_PIN = re.compile(r"(uses:[ \t]*)attune/attune(/actions/[A-Za-z0-9_.-]+@)[0-9a-f]{40}\b")
CONFIG_PIN = re.compile(r"^(attune:[ \t]*)[0-9a-f]{40}\b", re.MULTILINE)
VERSION_PINS = {
    "ATTUNE_TORCH": PINS.torch,
    "ATTUNE_CUDA": PINS.cuda,
    "ATTUNE_MEGATRON": PINS.megatron_tag,
    "ATTUNE_TORCHTITAN": PINS.torchtitan,
}
"""The bench workflow's ``env`` lines and the version set's value each one is written with."""


def package_root() -> Path:
    """The folder holding ``bot/``: the root of the attune checkout this runs from."""
    return Path(__file__).resolve().parents[2]


def checkout_commit(root: Path) -> str | None:
    """HEAD of the git checkout whose top level is ``root``; None when ``root`` is not one (an
    installed package inside some other repository does not count)."""
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
        )
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root.resolve():
            return None
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:  # no git
        return None
    commit = head.stdout.strip()
    return commit if head.returncode == 0 and COMMIT.fullmatch(commit) else None


def resolve_ref(ref: str | None) -> str:
    """``--ref`` as a full lowercase commit id, else the commit of this attune checkout."""
    if ref is None:
        root = package_root()
        found = checkout_commit(root)
        if found is None:
            raise AttuneError(
                f"--ref: {root} is not a git checkout of attune, so there is no commit to pin; "
                "pass --ref <the 40-hex attune commit the workflows should use>"
            )
        return found
    if not re.fullmatch(r"[0-9a-fA-F]{40}", ref):
        raise AttuneError(
            f"--ref: {ref!r} is not a full commit id (40 hex characters); "
            "a branch or tag name would let the code the workflows run change under them"
        )
    return ref.lower()


def render(text: str, ref: str, repo: str = DEFAULT_ACTION_REPO) -> str:
    """A template with its attune pins (``uses: attune/attune/actions/...@``, ``attune:``) set
    to ``repo`` and ``ref``, and its training versions to the version set."""
    text = ACTION_PIN.sub(lambda m: m.group(1) + repo + m.group(2) + ref, text)
    for name, value in VERSION_PINS.items():
        line = re.compile(rf'^([ \t]*{name}:[ \t]*)"[^"\n]*"', re.MULTILINE)
        text = line.sub(rf'\g<1>"{value}"', text)
    return CONFIG_PIN.sub(lambda m: m.group(1) + ref, text)


def template(name: str) -> str:
    return files("bot").joinpath("templates", *name.split("/")).read_text(encoding="utf-8")


@dataclass
class Planned:
    target: str
    """Destination, relative to the repository."""
    text: str
    state: str
    """``new``, ``unchanged`` or ``differs``."""


def _plan(dest: Path, target: str, text: str) -> Planned:
    path = dest / target
    parts = Path(target).parts
    for depth in range(1, len(parts) + 1):  # no link anywhere on the way: writes stay in dest
        step = dest.joinpath(*parts[:depth])
        if step.is_symlink():
            raise AttuneError(f"{step}: a symbolic link; attune init writes only regular files")
    if not path.exists():
        return Planned(target, text, "new")
    if not path.is_file():
        raise AttuneError(f"{path}: exists and is not a file")
    same = path.read_bytes() == text.encode("utf-8")
    return Planned(target, text, "unchanged" if same else "differs")


def say(line: str) -> None:
    """One plain line on stdout, never wrapped."""
    sys.stdout.write(line + "\n")


def init(
    dest: Path,
    *,
    ref: str | None,
    force: bool,
    action_repo: str = DEFAULT_ACTION_REPO,
    check: bool = True,
) -> int:
    """Exit 0 when the files are written or already there; 1 when one differs and ``force`` is
    not given (nothing is written then). ``check``: ask GitHub whether ``action_repo`` has the
    commit first (refused when it says no; a line says so when it cannot be asked)."""
    repo = check_repo(action_repo)
    commit = resolve_ref(ref)
    if not dest.is_dir():
        raise AttuneError(f"{dest}: not a folder (give the training repository's checkout)")
    if check:
        found = check_ref(repo, commit)
        if found.checked:
            say(f"checked: {found.detail}")
        else:
            say(
                f"not checked: whether {repo} has {commit}: {found.detail}; make sure it does "
                "before the first run, or the workflows fail there"
            )
    text = {name: render(template(name), commit, repo) for name, _ in FILES}
    plans = [_plan(dest, target, text[name]) for name, target in FILES]
    differing = [p for p in plans if p.state == "differs"]
    if differing and not force:
        for plan in differing:
            say(f"differs: {plan.target}")
        say(
            f"attune init: {count(len(differing), 'file')} in {dest} "
            f"{'differs' if len(differing) == 1 else 'differ'} from what it would write; "
            "nothing written (--force overwrites them)"
        )
        return 1
    for plan in plans:
        if plan.state == "unchanged":
            say(f"unchanged: {plan.target}")
            continue
        path = dest / plan.target
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".attune-partial")
        partial.unlink(missing_ok=True)  # a leftover, or a link, is never written through
        partial.write_text(plan.text, encoding="utf-8")
        os.replace(partial, path)
        verb = "overwrote" if plan.state == "differs" else "wrote"
        say(f"{verb}: {plan.target}")
    say(
        f"pinned {repo} {commit}, training with torch {PINS.torch} {PINS.cuda}, Megatron-LM "
        f"{PINS.megatron_tag}, torchtitan {PINS.torchtitan}: commit these files to the default "
        f"branch and require the check {GATE_CHECK} (docs/github-app.md, 'Installing attune into "
        "a training repository')"
    )
    return 0
