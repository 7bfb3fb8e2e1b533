"""Every bad input gets exit 2 and one line that names the problem: never exit 3 (an
unexpected error), a hang, a run away, or a work directory that nothing accepts afterwards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.forges.local import LocalForge
from gate.ledger import Ledger
from tests.conftest import ATTUNE, ROOT, SMALL_CONFIG
from tests.events_factory import payload

EXAMPLE = str(ROOT / "examples" / "ported-gpt.yaml")
MEGATRON = str(ROOT / "examples" / "megatron" / "llama3-8b.yaml")


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``attune argv``; it must exit 2 with its message as the last line of stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refuses a bad value while parsing
        code = int(exc.code or 0)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert err and "unexpected error" not in err[-1], err
    return err[-1]


def _recipe(directory: Path, name: str = "small", **config: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    body = {"framework": "embedded", "name": name, "config": {**SMALL_CONFIG, **config}}
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


# --- files that are not UTF-8 ---


def test_non_utf8_recipe_names_file_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = tmp_path / "latin1.yaml"
    recipe.write_bytes("framework: embedded\nname: café\n".encode("latin-1"))
    line = one_error(capsys, ["bench", str(recipe), "--workdir", str(tmp_path / "w")])
    assert f"{recipe}: recipe is not UTF-8: byte 0xe9 at offset 29" in line
    assert not (tmp_path / "w").exists()


def test_non_utf8_registry_names_file_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = tmp_path / "registry"
    registry.mkdir()
    for source in (ROOT / "registry").glob("*.yaml"):
        (registry / source.name).write_bytes(source.read_bytes())
    broken = registry / "embedded.yaml"
    broken.write_bytes(broken.read_bytes() + b"# \xff\n")
    offset = broken.stat().st_size - 2
    line = one_error(
        capsys, ["gate", "check", EXAMPLE, EXAMPLE, "--registry", str(registry), "--json"]
    )
    assert f"{broken}: registry is not UTF-8: byte 0xff at offset {offset}" in line


def test_non_utf8_lesson_names_file_and_offset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.yaml").write_bytes(b"id: x\n\x80\n")
    line = one_error(capsys, ["lessons", "list", "--bank", str(tmp_path)])
    assert f"{tmp_path / 'bad.yaml'}: lesson file is not UTF-8: byte 0x80 at offset 6" in line


# --- paths of the wrong kind ---


def test_ledger_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Ledger(tmp_path / "ledger.db").close()
    for command in ("verify", "show"):
        line = one_error(capsys, ["ledger", command, "--ledger", str(tmp_path)])
        assert "is a directory, not a ledger file" in line
        assert f"did you mean {tmp_path / 'ledger.db'}" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["tune", EXAMPLE, "--budget", "0.1", "--workdir"],
        ["demo", "--workdir"],
        ["bench", EXAMPLE, "--workdir"],
        ["tune", "--resume"],
        ["report"],
        ["stop"],
        ["pr", "list", "--workdir"],
    ],
)
def test_workdir_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    file = tmp_path / "notes.txt"
    file.write_text("not a directory\n")
    line = one_error(capsys, [*argv, str(file)])
    assert f"{file} exists and is not a directory" in line
    assert file.read_text() == "not a directory\n"


def test_bench_out_directory_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    out.mkdir()
    workdir = tmp_path / "w"
    line = one_error(capsys, ["bench", EXAMPLE, "--out", str(out), "--workdir", str(workdir)])
    assert f"{out}: is a directory; --out takes the result file's path" in line
    assert not workdir.exists()  # nothing ran


def test_train_env_cache_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    cache.write_text("")
    argv = ["train-env", MEGATRON, "--cache", str(cache), "--torch", "2.6.0", "--cuda", "cu124"]
    line = one_error(capsys, [*argv, "--megatron", "0" * 40])
    assert f"{cache}: is not a directory; --cache takes the runner's tool cache folder" in line


def test_lessons_bank_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("list", "audit"):
        line = one_error(capsys, ["lessons", command, "--bank", str(tmp_path / "missing")])
        assert f"{tmp_path / 'missing'}: does not exist; --bank takes a folder" in line


# --- numbers out of range ---


@pytest.mark.parametrize("budget", ["nan", "inf", "1e308", "0", "-1"])
def test_tune_budget_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], budget: str
) -> None:
    workdir = tmp_path / "run"
    line = one_error(capsys, ["tune", EXAMPLE, "--budget", budget, "--workdir", str(workdir)])
    assert "--budget must be positive device-hours" in line
    assert "at most 1,000,000" in line
    assert not workdir.exists()


def test_demo_budget_nan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workdir = tmp_path / "demo"
    line = one_error(capsys, ["demo", "--budget", "nan", "--workdir", str(workdir)])
    assert "--budget must be positive device-hours, got nan" in line
    assert not workdir.exists()


@pytest.mark.parametrize(("steps", "warmup"), [("0", "3"), ("3", "3"), ("2", "5"), ("12", "-1")])
def test_bench_run_length(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], steps: str, warmup: str
) -> None:
    workdir = tmp_path / "w"
    argv = ["bench", EXAMPLE, "--steps", steps, "--warmup", warmup, "--workdir", str(workdir)]
    line = one_error(capsys, argv)
    assert "--steps must exceed --warmup (at least one scored step)" in line
    assert f"got --steps {steps} and --warmup {warmup}" in line
    assert not workdir.exists()


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf", "1e9"])
def test_bench_timeout(tmp_path: Path, capsys: pytest.CaptureFixture[str], timeout: str) -> None:
    workdir = tmp_path / "w"
    line = one_error(capsys, ["bench", EXAMPLE, "--timeout", timeout, "--workdir", str(workdir)])
    assert "--timeout must be positive seconds, at most 604800" in line
    assert not workdir.exists()


def test_pr_show_huge_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LocalForge(tmp_path / "forge"):
        pass
    line = one_error(capsys, ["pr", "show", str(10**30), "--workdir", str(tmp_path)])
    assert "a pull request number is 1 to 2147483647" in line


def test_serve_port_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error(capsys, ["serve", "--port", "99999"])
    assert "a port is 1 to 65535, got 99999" in line


def test_serve_key_not_pem(tmp_path: Path) -> None:
    """Refused at start (it used to serve, and fail at the first webhook needing a token)."""
    key = tmp_path / "app.pem"
    key.write_text("this is not a key\n")
    env = {
        **os.environ,
        "ATTUNE_APP_ID": "1",
        "ATTUNE_PRIVATE_KEY_PATH": str(key),
        "ATTUNE_WEBHOOK_SECRET": "s",
        "ATTUNE_STATE_DIR": str(tmp_path / "state"),
        "ATTUNE_LEDGER_PATH": str(tmp_path / "state" / "ledger.db"),
    }
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        done = subprocess.run(
            [*ATTUNE, "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("attune serve started with a key that is not PEM")
    assert done.returncode == 2, done.stderr
    assert f"{key}: not a PEM private key" in done.stderr.strip().splitlines()[-1]


# --- a refused request leaves nothing that blocks the next one ---


def test_tune_steps_zero_leaves_no_workdir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workdir = tmp_path / "run"
    argv = ["tune", EXAMPLE, "--budget", "0.1", "--workdir", str(workdir)]
    line = one_error(capsys, [*argv, "--steps", "0"])
    assert "--steps must exceed --warmup" in line
    assert not workdir.exists()


def test_empty_ledger_left_behind_takes_a_new_campaign(tmp_path: Path) -> None:
    """A work directory an older attune left with an empty ledger is not a dead end."""
    from bot.commands.tune import open_ledger, open_new

    workdir = tmp_path / "run"
    Ledger(workdir / "ledger.db").close()
    open_new(
        workdir,
        recipe_path=Path(EXAMPLE),
        budget_hours=0.2,  # above the least budget that buys a candidate
        agent="rules",
        steps=12,
        warmup=3,
        max_trials=1,
        calibration_runs=5,
    )
    ledger, name = open_ledger(workdir)
    with ledger:
        assert name == "run"


def test_resume_of_an_empty_ledger_says_how_to_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Ledger(tmp_path / "ledger.db").close()
    line = one_error(capsys, ["tune", "--resume", str(tmp_path)])
    assert "the ledger holds no campaign" in line
    assert "start one here with `attune tune RECIPE --budget H --workdir DIR`" in line


# --- attune stop on something that is not a running campaign ---


def test_stop_a_finished_campaign(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Ledger(tmp_path / "ledger.db") as ledger:
        ledger.append("run", "campaign_opened", payload("campaign_opened"))
        ledger.append("run", "campaign_stopped", {"reason": "exhausted", "evidence": []})
    line = one_error(capsys, ["stop", str(tmp_path)])
    assert "campaign run has already stopped (exhausted): nothing to stop" in line
    assert not (tmp_path / "stop-requested").exists()


def test_stop_an_empty_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Ledger(tmp_path / "ledger.db").close()
    line = one_error(capsys, ["stop", str(tmp_path)])
    assert "the ledger holds no campaign: nothing to stop" in line
    assert not (tmp_path / "stop-requested").exists()


def test_stop_a_file_that_is_no_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ledger.db").write_text("not a database\n")
    one_error(capsys, ["stop", str(tmp_path)])
    assert not (tmp_path / "stop-requested").exists()


# --- paths with spaces ---


def test_campaign_in_a_folder_with_spaces_opens_its_forge(tmp_path: Path) -> None:
    """The work directory's and the recipe's names become git branch names: spaces in them
    must not reach git as a bad ref name."""
    from bot.commands.tune import open_ledger, open_new
    from bot.state.fold import fold

    folder = tmp_path / "my runs"
    recipe = _recipe(folder, "my recipe")
    workdir = folder / "first run"
    open_new(
        workdir,
        recipe_path=recipe,
        budget_hours=0.2,  # above the least budget that buys a candidate
        agent="rules",
        steps=4,
        warmup=1,
        max_trials=1,
        calibration_runs=5,
    )
    ledger, name = open_ledger(workdir)
    with ledger:
        params = fold(name, ledger.events(name)).params
    assert params is not None
    with LocalForge(workdir / "forge") as forge:
        tuned = forge.open_tuned(params.recipe_path, params.recipe_text, "Tune", "body")
        candidate = forge.open_candidate(
            branch=f"attune/{name}/1",
            base=tuned.head,
            base_sha=tuned.head_sha,
            recipe_path=params.recipe_path,
            recipe_text=params.recipe_text.replace("threads: 1", "threads: 2"),
            title="threads 1 -> 2",
            body="",
            labels=[],
        )
    assert name == "first-run" and candidate.head == "attune/first-run/1"
    assert params.recipe_path == "recipes/my-recipe.yaml"


# --- Ctrl-C ---


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_ctrl_c_in_bench_ends_the_training_run(tmp_path: Path) -> None:
    """Ctrl-C stops the whole run (supervisor and workload), then exits 130."""
    recipe = _recipe(tmp_path, "long")
    workdir = tmp_path / "bench-run"
    argv = [*ATTUNE, "bench", str(recipe), "--steps", "100000", "--warmup", "1"]
    proc = subprocess.Popen(
        [*argv, "--workdir", str(workdir)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        stdout = workdir.resolve() / "stdout.jsonl"
        while time.monotonic() < deadline:  # the workload is training
            if stdout.exists() and stdout.read_bytes().count(b'{"step"') >= 1:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the workload never logged a step")
        assert _processes_naming(str(workdir.resolve()))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
        assert b"attune: interrupted" in proc.stderr.read()  # type: ignore[union-attr]
        deadline = time.monotonic() + 10
        while _processes_naming(str(workdir.resolve())) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _processes_naming(str(workdir.resolve()))
        assert not left, f"orphaned: {left}"
    finally:
        for pid in _processes_naming(str(workdir.resolve())):
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
