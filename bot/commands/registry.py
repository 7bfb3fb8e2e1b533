"""``attune registry coverage``: does the registry classify every key the framework defines?"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bot.console import console
from gate.coverage import coverage
from gate.registry import load_registry
from runners.adapters import get_adapter


def registry_coverage(framework: str, *, registry_dir: Path | None, as_json: bool) -> int:
    """Exit 0 when registry and parser agree, 1 when keys are missing or stale."""
    keys = get_adapter(framework, path=None).keys()
    registry = load_registry(framework, keys.version, registry_dir)
    report = coverage(registry, keys.keys)
    gaps = report.missing or report.not_in_parser or report.derived_in_parser
    if as_json:
        payload = {
            "framework": framework,
            "version": keys.version,
            "registry": registry.path.name,
            "parser_keys": len(keys.keys),
            "registry_keys": len(registry.data.keys),
            **report.model_dump(),
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return 1 if gaps else 0
    console.print(
        f"{framework} {keys.version}: {len(keys.keys)} parser keys, "
        f"{len(registry.data.keys)} entries in {registry.path.name}"
    )
    no_sites: dict[str, str] = {}
    sections: tuple[tuple[str, list[str], dict[str, str]], ...] = (
        ("parser keys missing from the registry (judged unknown)", report.missing, keys.keys),
        ("registry keys the parser does not define (stale)", report.not_in_parser, no_sites),
        ("entries marked derived that the parser defines", report.derived_in_parser, keys.keys),
    )
    for title, names, sites in sections:
        if names:
            console.print(f"[bold]{title}: {len(names)}[/]")
            for name in names:
                site = f"  ({sites[name]})" if name in sites else ""
                console.print(f"  {name}{site}", highlight=False)
    if not gaps:
        console.print("every parser key is classified; no stale entries")
    return 1 if gaps else 0
