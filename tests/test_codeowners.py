"""What decides what runs and what is merged needs a maintainer's review (CODEOWNERS)."""

from __future__ import annotations

from tests.conftest import ROOT

GUARDED = (
    "gate/",
    "registry/",
    ".github/",
    "runners/",
    "bot/",
    ".ci/",
    "actions/",
    "Makefile",
    "pyproject.toml",
)


def owners() -> dict[str, list[str]]:
    rules = {}
    for line in (ROOT / ".github" / "CODEOWNERS").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            pattern, *who = line.split()
            rules[pattern.lstrip("/")] = who
    return rules


def test_every_guarded_path_has_an_owner() -> None:
    rules = owners()
    missing = [path for path in GUARDED if not rules.get(path)]
    assert missing == []
    assert all(who == ["@attune/maintainers"] for who in rules.values())
    for path in GUARDED:  # each guarded path exists, so the rule guards something
        assert (ROOT / path).exists(), path
