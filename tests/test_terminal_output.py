"""What attune prints on a terminal and off one: gate tables that wrap instead of cropping (the
source ``file:line`` whole at 80 columns), no padding in pipes, every default in ``--help``, a
bare ``attune ledger show`` inside a campaign's directory, and Ctrl-C saying what goes on."""

from __future__ import annotations

import argparse
import io
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rich.console import Console

from bot.cli import main
from bot.commands.gate_check import judge_pair
from bot.commands.parser import build_parser
from bot.console import console, log_line
from bot.render import gate_table
from gate.ledger import Ledger
from gate.models import GateReport
from tests.conftest import ATTUNE, ROOT
from tests.events_factory import payload

DEMO_PAIR = (ROOT / "examples/ported-gpt.yaml", ROOT / "examples/candidates/grad-reduce-bf16.yaml")
TITAN_PAIR = (
    ROOT / "examples/torchtitan/llama3-8b.yaml",
    ROOT / "examples/torchtitan/llama3-70b.yaml",
)


def rendered(report: GateReport, width: int) -> list[str]:
    with open(os.devnull, "w") as devnull:
        out = Console(width=width, record=True, highlight=False, file=devnull)
        out.print(gate_table(report, title="gate"))
    return out.export_text().splitlines()


def assert_nothing_cropped(report: GateReport, lines: list[str], width: int) -> None:
    assert all(len(line) <= width for line in lines), "\n".join(lines)
    text = "\n".join(lines)
    # the key column read top to bottom: a key may fold over lines but loses no character
    key_column = "".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    for finding in report.findings:
        assert any(finding.source in line for line in lines), (finding.source, text)
        assert finding.key in key_column, (finding.key, text)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_the_demo_gate_table_keeps_every_source_whole(width: int) -> None:
    _, report = judge_pair(*DEMO_PAIR)
    lines = rendered(report, width)
    assert_nothing_cropped(report, lines, width)
    assert "runners/embedded/train.py:187" in "\n".join(lines)


@pytest.mark.frameworks  # torchtitan's own config parsing, cold: about 20 s
def test_a_torchtitan_size_change_keeps_its_columns_at_80() -> None:
    _, report = judge_pair(*TITAN_PAIR)
    lines = rendered(report, 80)
    assert_nothing_cropped(report, lines, 80)
    # no column collapsed to nothing: every row holds text in both columns
    body = [line for line in lines if line.startswith("│")]
    assert body and all(len(cell.strip()) > 0 for cell in body[0].strip("│").split("│"))


def test_a_gate_check_into_a_pipe_is_neither_padded_nor_cropped() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    out = subprocess.run(
        [*ATTUNE, "gate", "check", *map(str, DEMO_PAIR)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr  # a reject
    lines = out.stdout.splitlines()
    assert not [line for line in lines if line != line.rstrip()], out.stdout
    assert "runners/embedded/train.py:187" in out.stdout
    assert "runners/embedded/train.py:100" in out.stdout


def test_a_titled_gate_table_off_a_terminal_has_no_padding() -> None:
    _, report = judge_pair(*DEMO_PAIR)
    buffer = io.StringIO()
    Console(width=120, file=buffer, highlight=False).print(gate_table(report, title="the gate"))
    lines = buffer.getvalue().splitlines()
    assert lines[0] == "the gate"
    assert not [line for line in lines if line != line.rstrip()], buffer.getvalue()


def test_progress_lines_are_not_padded(capsys: pytest.CaptureFixture[str]) -> None:
    with console.capture() as captured:
        log_line("[calibrate] baseline-1 of 5")
    line = captured.get()
    assert line.endswith("[calibrate] baseline-1 of 5\n") and line.startswith("[")


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")
            elif (
                action.option_strings
                and action.default not in (None, False, [], argparse.SUPPRESS)
                and "default" not in (action.help or "")
            ):
                missing.append(f"{name} {action.option_strings[0]}")

    walk(build_parser(), "attune")
    assert missing == []
    for words, shown in ((["tune"], ["default: 12", "default: rules"]),
                         (["serve"], ["default: 127.0.0.1", "default: 8000"]),
                         (["demo"], ["default: 0.15; --long: 0.25"])):  # fmt: skip
        with pytest.raises(SystemExit):
            main([*words, "--help"])
        text = " ".join(capsys.readouterr().out.split())  # argparse wraps at the terminal's width
        assert all(s in text for s in shown), (words, text)


def test_a_bare_ledger_show_inside_a_campaign_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("demo", "campaign_opened", payload("campaign_opened"))
    monkeypatch.chdir(tmp_path)
    assert main(["ledger", "show"]) == 0
    assert "demo: 0 trials" in capsys.readouterr().out
    assert main(["ledger", "verify"]) == 0
    monkeypatch.chdir(tmp_path.parent)  # elsewhere, the App's default is looked for, and named
    assert main(["ledger", "show"]) == 2
    assert "run this inside a campaign's directory" in capsys.readouterr().err


@pytest.mark.slow
def test_ctrl_c_says_what_goes_on_and_how_to_resume(tmp_path: Path) -> None:
    workdir = tmp_path / "run"
    args = ["tune", str(ROOT / "examples/ported-gpt.yaml"), "--budget", "1", "--steps", "4"]
    proc = subprocess.Popen(
        [*ATTUNE, *args, "--workdir", str(workdir)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (workdir / "trials" / "baseline-1" / "launch.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "no run launched"
        time.sleep(0.2)
    proc.send_signal(
        signal.SIGINT
    )  # what Ctrl-C sends to the command (the run has its own session)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert f"attune: interrupted: the campaign in {workdir} stopped" in err
    assert "a run already launched goes on in the background and is charged when it ends" in err
    assert f"`attune tune --resume {workdir}` collects it and carries on" in err
    # and it does go on: the run's own supervisor sees it to its end (and writes its exit)
    result = workdir / "trials" / "baseline-1" / "exit.json"
    deadline = time.monotonic() + 120
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert result.exists()


def test_an_embedded_recipe_is_an_embedded_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    example = str(ROOT / "examples/ported-gpt.yaml")
    assert main(["doctor", example]) == 2
    assert "an embedded recipe runs on attune's own CPU workload" in capsys.readouterr().err
    assert main(["train-env", example, "--cache", str(tmp_path)]) == 0
    assert "an embedded recipe runs in attune's own environment" in capsys.readouterr().out
