"""`attune tune` / `attune report` bad input: one line naming the problem, exit 2, nothing made."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "ported-gpt.yaml")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([EXAMPLE], "a new campaign needs RECIPE and --budget"),
        ([EXAMPLE, "--budget", "0"], "--budget must be positive device-hours, got 0.0"),
        (
            [EXAMPLE, "--budget", "1", "--agent", "oracle"],
            "unknown agent 'oracle' (known: rules, claude, random, tpe, model)",
        ),
        ([EXAMPLE, "--budget", "1", "--calibration-runs", "3"], "must be at least 5, got 3"),
        (["--budget", "1"], "give a RECIPE to tune, or --resume DIR"),
        ([EXAMPLE, "--resume", "somewhere"], "--resume continues a campaign"),
        (
            [EXAMPLE, "--budget", "1", "--max-pairs", "2"],
            "--max-pairs must be 0 (no A/B re-measurement) or at least 3",
        ),
        ([EXAMPLE, "--budget", "1", "--confirm-pairs", "-1"], "must be 0 or more, got -1"),
        (["--resume", "somewhere", "--max-pairs", "0"], "chosen when a campaign opens"),
        (["--resume", "nowhere"], "nowhere: no campaign here (no such directory)"),
    ],
)
def test_tune_bad_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["tune", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert list(tmp_path.iterdir()) == []  # no work directory, no ledger


def test_tune_bad_recipe_names_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("framework: embedded\nconfig: {threads: 0}\n")
    workdir = tmp_path / "run"
    assert main(["tune", str(recipe), "--budget", "1", "--workdir", str(workdir)]) == 2
    assert "bad.yaml: config.threads" in capsys.readouterr().err
    assert not workdir.exists()


def test_report_without_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "no campaign here" in capsys.readouterr().err
