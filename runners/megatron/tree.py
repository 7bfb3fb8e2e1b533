"""A Megatron-LM checkout pinned by content: its ``megatron/core`` and ``megatron/training``
Python files against the manifest of a released megatron-core wheel.

A manifest is one line ``<path> <hash>\\n`` per ``*.py`` file under ``megatron/core`` and
``megatron/training``, sorted by path; ``<hash>`` is the file's sha256 as a wheel's RECORD writes
it (urlsafe base64, no ``=`` padding). Its *tree digest* is the sha256 (hex) of the manifest's
bytes; ``runners.megatron.pins.MEGATRON_TREE_DIGESTS`` pins a tag to one, and the manifest itself
ships beside this module (``trees/<tag>.txt``) so that a refusal can name the file that differs.

One exception, found by comparing the megatron-core 0.19.0 wheel with the repository's
``core_v0.19.0`` tree: the release build rewrites the version constants of the files named
``package_info.py`` (``PATCH = 1`` in the tag, ``PATCH = 0`` in the wheel). Those files are
hashed without their ``MAJOR = ``, ``MINOR = ``, ``PATCH = `` and ``PRE_RELEASE = `` lines; every
other byte of them is checked. ``benchmarks/megatron_tree_digest.py`` derives a manifest from a
wheel and checks each file against the wheel's RECORD on the way.

No Megatron import here: the bot reads it.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from pathlib import Path

PACKAGES = ("megatron/core", "megatron/training")
"""The folders whose Python files are pinned: what a Megatron-LM run imports from the checkout."""
VERSION_FILE = "package_info.py"
VERSION_LINE = re.compile(rb"^(MAJOR|MINOR|PATCH|PRE_RELEASE) = [^\n]*\n", re.MULTILINE)
"""The lines of a ``package_info.py`` the release build rewrites: left out of its hash."""
TREES = Path(__file__).resolve().parent / "trees"
"""Where the manifests ship: ``trees/<tag>.txt``."""
NOT_A_FILE = "not-a-regular-file"
"""The hash a symbolic link (or anything but a plain file) named ``*.py`` gets: never a match."""


def pinned_path(path: str) -> bool:
    """Whether ``path`` (relative, ``/``-separated) is one of the files a manifest lists."""
    return path.endswith(".py") and path.startswith(tuple(p + "/" for p in PACKAGES))


def record_hash(data: bytes) -> str:
    """sha256 of ``data`` as a wheel's RECORD writes it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def file_hash(path: str, data: bytes) -> str:
    """The hash a manifest lists for the file ``path`` with the bytes ``data``."""
    if path.rsplit("/", 1)[-1] == VERSION_FILE:
        data = VERSION_LINE.sub(b"", data)
    return record_hash(data)


def manifest_text(entries: dict[str, str]) -> str:
    """The manifest of ``entries`` (path -> hash)."""
    return "".join(f"{path} {digest}\n" for path, digest in sorted(entries.items()))


def tree_digest(manifest: str) -> str:
    """The tree digest of a manifest: sha256 (hex) of its UTF-8 bytes."""
    return hashlib.sha256(manifest.encode()).hexdigest()


def parse_manifest(text: str) -> dict[str, str]:
    """path -> hash; ValueError for a line that is not ``<path> <hash>``."""
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        path, _, digest = line.rpartition(" ")
        if not pinned_path(path) or not re.fullmatch(r"[A-Za-z0-9_-]{43}", digest):
            raise ValueError(f"manifest line {number} is not '<path> <hash>': {line!r}")
        entries[path] = digest
    return entries


def checkout_entries(root: Path) -> dict[str, str]:
    """path -> hash for every ``*.py`` under ``root``'s pinned folders, the files hashed as they
    are on disk. Symbolic links are not followed: a linked file or folder does not match."""
    entries = {}
    for package in PACKAGES:
        top = root / package
        for folder, dirs, files in os.walk(top):
            here = Path(folder)
            names = [*files, *(d for d in dirs if (here / d).is_symlink())]
            for name in (n for n in names if n.endswith(".py")):
                file = here / name
                path = file.relative_to(root).as_posix()
                plain = file.is_file() and not file.is_symlink()
                entries[path] = file_hash(path, file.read_bytes()) if plain else NOT_A_FILE
    return entries


def first_difference(expected: dict[str, str], found: dict[str, str]) -> str | None:
    """The first file (by path) that is missing, extra or different, and how; None if none."""
    for path in sorted(expected.keys() | found.keys()):
        if path not in found:
            return f"{path} is missing"
        if path not in expected:
            return f"{path} is extra (the released wheel has no such file)"
        if found[path] == NOT_A_FILE:
            return f"{path} is not a regular file"
        if found[path] != expected[path]:
            return f"{path} differs (sha256 {found[path]}, the release's {expected[path]})"
    return None


def pinned_manifest(tag: str, digest: str, trees: Path | None = None) -> dict[str, str]:
    """The manifest shipped for ``tag``, once its bytes hash to ``digest``; ValueError if not."""
    path = (trees or TREES) / f"{tag}.txt"
    if not path.is_file():
        raise ValueError(f"no manifest {path.name} ships with attune")
    text = path.read_bytes().decode()
    if tree_digest(text) != digest:
        raise ValueError(
            f"the manifest {path.name} hashes to {tree_digest(text)}, not the pinned {digest}"
        )
    return parse_manifest(text)
