"""``attune pr list|show``: the local forge's pull requests, shown the way a code host does."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from bot.console import console
from bot.forges.local import LocalForge
from bot.interfaces import CheckResult, PullRequest, marker_tag

STATE_STYLE = {"open": "green", "merged": "magenta", "closed": "red"}
CONCLUSION_STYLE = {"success": "green", "failure": "red", "neutral": "yellow"}


def forge_dir(workdir: Path) -> Path:
    """Where ``attune demo`` (and the campaign) keep the local forge of a work directory."""
    return workdir / "forge"


def _checks_line(checks: list[CheckResult]) -> Text:
    line = Text()
    for i, check in enumerate(checks):
        if i:
            line.append(", ")
        line.append(f"{check.name}: ")
        line.append(check.conclusion, style=CONCLUSION_STYLE[check.conclusion])
    return line


def _pr_table(pulls: list[PullRequest]) -> Table:
    table = Table(title="pull requests", title_justify="left")
    for column in ("#", "state", "title", "head -> base", "labels", "checks"):
        table.add_column(column, justify="right" if column == "#" else "left")
    for pr in pulls:
        table.add_row(
            str(pr.number),
            Text(pr.state, style=STATE_STYLE[pr.state]),
            Text(pr.title),
            Text(f"{pr.head} -> {pr.base}"),
            Text(", ".join(pr.labels)),
            _checks_line(pr.checks),
        )
    return table


def pr_list(workdir: Path) -> int:
    with LocalForge(forge_dir(workdir), create=False) as forge:
        pulls = forge.pulls()
    if not pulls:
        console.print(f"{forge_dir(workdir)}: no pull requests")
        return 0
    console.print(_pr_table(pulls))
    return 0


def pr_show(workdir: Path, number: int) -> int:
    with LocalForge(forge_dir(workdir), create=False) as forge:
        pr = forge.get(number)
        diff = forge.diff(number)
        comments = forge.comments(number)
    header = Text(f"#{pr.number} {pr.title} ", style="bold")
    header.append(f"[{pr.state}]", style=STATE_STYLE[pr.state])
    console.print(header)
    merged = f", merged as {pr.merged_sha[:12]}" if pr.merged_sha else ""
    console.print(Text(f"{pr.head} -> {pr.base}  (head {pr.head_sha[:12]}{merged})"))
    console.print(Text(f"labels: {', '.join(pr.labels) or '-'}"))
    console.print()
    console.print(Text(pr.body))
    console.print()
    if diff.strip():
        console.print(
            Syntax(diff.rstrip("\n"), "diff", theme="ansi_dark", background_color="default")
        )
    else:
        console.print("(no changes)")
    if pr.checks:
        checks = Table(title="checks", title_justify="left")
        for column in ("name", "conclusion", "summary"):
            checks.add_column(column)
        for check in pr.checks:
            style = CONCLUSION_STYLE[check.conclusion]
            checks.add_row(
                Text(check.name), Text(check.conclusion, style=style), Text(check.summary)
            )
        console.print(checks)
    for comment in comments:
        console.print()
        console.print(Text(f"comment {comment.id}", style="bold"))
        if comment.marker:
            console.print(Text(marker_tag(comment.marker), style="dim"))
        console.print(Text(comment.body))
    return 0
