"""Derive the manifest and tree digest ``runners/megatron/pins.py`` pins a Megatron-LM tag to.

    python benchmarks/megatron_tree_digest.py                 # the installed megatron-core
    python benchmarks/megatron_tree_digest.py --wheel megatron_core-0.19.0-....whl
    python benchmarks/megatron_tree_digest.py --tree DIR      # a checkout or `git archive` of it
    ... --write runners/megatron/trees/core_v0.19.2.txt       # the manifest train-env checks

From a wheel (a ``.whl`` file or the installed distribution) the files are the ``*.py`` under
``megatron/core`` and ``megatron/training`` that its RECORD lists; each file's bytes are checked
against the sha256 RECORD gives it before they are hashed (``runners/megatron/tree.py`` says how,
and why ``package_info.py`` is hashed without its version lines). From a tree the files are the
ones on disk, hashed as ``attune train-env`` hashes a checkout. Prints the number of files and the
tree digest; exit 1 if a file does not match its RECORD line.

The pinned digests were made with: ``pip download --no-deps --only-binary=:all:
--python-version 3.12 megatron-core==0.19.0`` (``--wheel``), and the installed megatron-core
0.19.2 of ``make setup``; the 0.19.0 one also with ``--tree`` over ``git archive core_v0.19.0
megatron/core megatron/training`` of NVIDIA/Megatron-LM, which gave the same digest.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import zipfile
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

from runners.megatron.tree import (
    checkout_entries,
    file_hash,
    manifest_text,
    pinned_path,
    record_hash,
    tree_digest,
)


def from_record(
    rows: Iterable[list[str]], read: Callable[[str], bytes]
) -> tuple[dict[str, str], list[str]]:
    """path -> manifest hash for the pinned files of a RECORD, and the files whose bytes do not
    have the sha256 the RECORD gives them."""
    entries: dict[str, str] = {}
    bad: list[str] = []
    for row in rows:
        if len(row) < 2 or not pinned_path(row[0]):
            continue
        path, (algorithm, _, recorded) = row[0], row[1].partition("=")
        data = read(path)
        if algorithm != "sha256" or record_hash(data) != recorded:
            bad.append(path)
        entries[path] = file_hash(path, data)
    return entries, bad


def from_wheel(wheel: Path) -> tuple[dict[str, str], list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        (record,) = (n for n in archive.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(io.StringIO(archive.read(record).decode()))
        return from_record(rows, archive.read)


def from_installed(name: str) -> tuple[dict[str, str], list[str]]:
    distribution = metadata.distribution(name)
    print(f"{name} {distribution.version} (installed)", file=sys.stderr)
    record = distribution.read_text("RECORD") or ""
    base = Path(str(distribution.locate_file("")))
    return from_record(csv.reader(io.StringIO(record)), lambda p: (base / p).read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--wheel", type=Path, help="a megatron-core .whl file")
    source.add_argument("--tree", type=Path, help="a folder holding megatron/core, .../training")
    parser.add_argument("--installed", default="megatron-core", help="the distribution's name")
    parser.add_argument("--write", type=Path, help="write the manifest to this file")
    args = parser.parse_args(argv)
    if args.wheel:
        entries, bad = from_wheel(args.wheel)
    elif args.tree:
        entries, bad = checkout_entries(args.tree), []
    else:
        entries, bad = from_installed(args.installed)
    text = manifest_text(entries)
    if args.write:
        args.write.write_text(text)
    print(f"{len(entries)} files, tree digest {tree_digest(text)}")
    for path in bad:
        print(f"{path}: bytes do not match the wheel's RECORD", file=sys.stderr)
    return 1 if bad or not entries else 0


if __name__ == "__main__":
    sys.exit(main())
