"""A candidate the framework's own validation refuses is a reject with an ``invalid`` finding
(exit 1, in JSON, Markdown and the terminal table); attune's own bad input stays exit 2; a
campaign closes such a candidate like any rejected one."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.cli import main
from bot.commands.tune import open_new, run_campaign
from bot.interfaces import Proposal
from gate.errors import FrameworkRefusal
from gate.ledger import Ledger
from gate.models import Recipe
from runners.megatron.adapter import MegatronAdapter
from runners.worker_support import collect_warnings, raise_site
from tests.conftest import ROOT
from tests.scripted_agent import ProposesOnceDouble

EXAMPLES = ROOT / "examples"
CONFIG_PY = ROOT / "runners" / "embedded" / "config.py"


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, **config: Any) -> Path:
    path.write_text(yaml.safe_dump({"framework": "embedded", "name": "r", "config": config}))
    return path


def line_of(source: str) -> str:
    """The text of the repository line a ``path:line@version`` source names."""
    location = source.partition("@")[0]
    path, _, line = location.rpartition(":")
    return (ROOT / path).read_text().splitlines()[int(line) - 1]


@pytest.mark.parametrize(
    ("config", "key", "message", "raising"),
    [
        (
            {"global_batch_size": 10, "micro_batch_size": 4},
            "config.micro_batch_size",
            "4 x data_parallel_size 1 does not divide global_batch_size=10",
            "raise ValueError(",
        ),
        ({"n_head": 3, "d_model": 64}, "config.n_head", "3 does not divide d_model=64", "raise"),
        ({"microbatch": 2}, "config.microbatch", "unknown key", None),
        ({"threads": 0}, "config.threads", "input should be greater than", "threads:"),
    ],
)
def test_gate_check_rejects_what_the_workload_refuses(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    config: dict[str, Any],
    key: str,
    message: str,
    raising: str | None,
) -> None:
    base, cand = str(EXAMPLES / "ported-gpt.yaml"), str(write(tmp_path / "cand.yaml", **config))
    code, out, err = run_cli(capsys, "gate", "check", base, cand, "--json")
    assert code == 1 and err == ""
    data = json.loads(out)
    assert data["verdict"] == "reject"
    (finding,) = data["findings"]
    assert finding["class"] == "invalid" and finding["key"] == key
    assert message in finding["reason"] and finding["reason"].startswith("embedded 1 refuses")
    if raising is None:
        assert finding["source"] == "-"
    else:
        assert re.fullmatch(r"runners/embedded/config\.py:\d+@1", finding["source"])
        assert raising in line_of(finding["source"])
    code, out, _ = run_cli(capsys, "gate", "check", base, cand, "--markdown")
    assert code == 1 and "Verdict: **reject**" in out
    assert f"| `{key}` | `null` | `null` | invalid | embedded 1 refuses" in out
    code, out, _ = run_cli(capsys, "gate", "check", base, cand)
    assert code == 1
    flat = " ".join(out.split())
    assert "invalid" in flat and "verdict: reject" in flat and message.split()[0] in flat


def test_an_invalid_baseline_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = str(write(tmp_path / "base.yaml", n_head=3, d_model=64))
    code, out, err = run_cli(capsys, "gate", "check", bad, str(EXAMPLES / "ported-gpt.yaml"))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "invalid baseline, nothing to compare against: " in line
    assert f"{bad}: config.n_head: 3 does not divide d_model=64" in line


def test_raise_site_and_warnings_name_the_package_line(tmp_path: Path) -> None:
    package = tmp_path / "fwpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "checks.py").write_text(
        "import logging, warnings\n"
        "def warn_rank_0(msg):\n"
        "    warnings.warn(msg)\n"
        "def validate(x):\n"
        "    warnings.warn('deprecated knob', DeprecationWarning)\n"
        "    warn_rank_0('fp16 loss scale may overflow')\n"
        "    logging.getLogger('fwpkg').warning('bf16 reduction loses precision')\n"
        "    print('WARNING: uneven pipeline stages')\n"
        "    print('all good')\n"
        "    if x < 0:\n"
        "        raise ValueError('x must be >= 0')\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        checks = importlib.import_module("fwpkg.checks")
        with collect_warnings(package) as log:
            checks.validate(1)
            checks.validate(1)  # the same warnings again: listed once
        with collect_warnings(package), pytest.raises(ValueError) as caught:
            checks.validate(-1)
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("fwpkg.checks", "fwpkg"):
            sys.modules.pop(name, None)
    assert raise_site(caught.value, package) == "fwpkg/checks.py:11"
    assert raise_site(caught.value, ROOT / "runners") is None
    assert [(w["message"], w["category"], w["source"]) for w in log.items] == [
        ("deprecated knob", "DeprecationWarning", "fwpkg/checks.py:5"),
        ("fp16 loss scale may overflow", "UserWarning", "fwpkg/checks.py:6"),
        ("bf16 reduction loses precision", "logging", "fwpkg/checks.py:7"),
        ("WARNING: uneven pipeline stages", "printed", "fwpkg/checks.py:8"),
    ]


class CannedAnswersAdapter(MegatronAdapter):
    """Test double: the Megatron adapter with the worker's answers given, not computed (what
    any worker may send, checked against the generic consumer in ``WorkerAdapter``)."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        self.canned = answers

    def _answers(self, items: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        return [("9.9", a) for a in self.canned]


def test_worker_errors_and_warnings_are_carried_generically() -> None:
    ok = {
        "values": {"a": 1},
        "env": {},
        "explicit": [],
        "warnings": [{"message": "w", "category": "UserWarning", "source": "pkg/m.py:3"}],
    }
    refused = {"error": "boom", "key": "model.heads", "source": "pkg/cfg.py:12"}
    bare = {"error": "unrecognized arguments: --nope"}
    body = {"world_size": 1, "args": [], "gpu_arch": "sm90"}
    recipe = Recipe(framework="megatron", name="r", path="r.yaml", body=body)
    outcomes = CannedAnswersAdapter([ok, refused, bare]).resolve_each([recipe] * 3)
    config, first, second = outcomes
    assert not isinstance(config, Exception)
    assert [w.source for w in config.warnings] == ["pkg/m.py:3"]
    assert isinstance(first, FrameworkRefusal) and isinstance(second, FrameworkRefusal)
    assert (first.message, first.key, first.source) == ("boom", "model.heads", "pkg/cfg.py:12@9.9")
    assert (first.framework, first.version) == ("megatron", "9.9")
    assert str(first) == "r.yaml: model.heads: boom"
    assert (second.key, second.source) == ("args", None)
    # warnings are not what runs: the fingerprint ignores them
    assert config.fingerprint() == config.model_copy(update={"warnings": []}).fingerprint()


INVALID = Proposal(
    lever=["micro_batch_size"],
    changes={"micro_batch_size": (1, 3)},
    bottleneck="compute",
    mechanism="larger micro-batches",
    expected_gain_pct=10.0,
    sources=["runners/embedded/train.py:1"],
)
"""A micro-batch that does not divide the global batch: the workload's validation refuses it."""


def skip_check_calibration(campaign: object) -> None:
    """Stand-in for the post-launch checks' calibration (layout-variant runs): this test is
    about the pre-launch gate, and runs nothing."""


def test_a_campaign_closes_a_candidate_the_workload_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No run at all: the noise model is the one a recorded calibration wrote, so the campaign
    goes straight to the candidate, which the gate rejects before any launch."""
    monkeypatch.setattr("bot.campaign.loop.calibrate_checks", skip_check_calibration, raising=False)
    recipe = write(tmp_path / "small.yaml", n_layer=2, n_head=4, d_model=64, seq_len=32,
                   global_batch_size=8, micro_batch_size=1, threads=1)  # fmt: skip
    workdir = tmp_path / "campaign"
    open_new(
        workdir,
        recipe_path=recipe,
        budget_hours=1.0,
        agent="rules",
        steps=3,
        warmup=1,
        max_trials=1,
        calibration_runs=5,
    )
    with Ledger(workdir / "ledger.db") as ledger:
        (name,) = {e.campaign for e in ledger.events()}
        scores = [665.3, 777.1, 728.6, 846.8, 1189.3]  # attune-0.1.db's calibration
        noise = {"runs": 5, "mean": 841.4, "std": 205.9, "cv": 0.245, "threshold": 0.49}
        ledger.append(name, "noise_calibrated", {**noise, "scores": scores})
    run_campaign(workdir, live=False, agent=ProposesOnceDouble(INVALID))
    with Ledger(workdir / "ledger.db") as ledger:
        events = ledger.events()
    kinds = [e.kind for e in events if e.payload.get("trial") == "c1"]
    assert kinds == ["candidate_proposed", "pr_opened", "gate_checked", "trial_judged", "pr_closed"]
    gate = next(e.payload for e in events if e.kind == "gate_checked")
    assert gate["verdict"] == "reject" and gate["fingerprint"].startswith("refused-")
    assert [f["class"] for f in gate["findings"]] == ["invalid"]
    judged = next(e.payload for e in events if e.kind == "trial_judged")
    assert (
        judged["decision"] == "close" and "does not divide global_batch_size=8" in judged["reason"]
    )
    assert not [e for e in events if e.kind in ("trial_started", "pr_merged")]
    assert events[-1].kind == "campaign_stopped"
