"""One version set: everything that names the torch, Megatron-LM, torchtitan or Transformer
Engine a recipe is checked or trained with agrees with ``runners.versions.PINS``."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
import yaml

from bot.commands.init import render, template
from runners.megatron.model_checks import ASSUMED_TE
from runners.versions import PINS, TORCH_FLOORS, torch_problem
from tests.conftest import ROOT


def test_the_gate_resolves_with_the_frameworks_of_the_set() -> None:
    """What the Makefile installs into attune's own environment, where the gate's resolve
    runs Megatron-LM's and torchtitan's own parsers, and what it assumes for Transformer
    Engine."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.findall(r"megatron-core==(\S+)", makefile) == [PINS.megatron_core]
    assert re.findall(r"torchtitan==(\S+)", makefile) == [PINS.torchtitan]
    assert version("megatron-core") == PINS.megatron_core
    assert version("torchtitan") == PINS.torchtitan
    assumed = ASSUMED_TE
    assert assumed == PINS.transformer_engine


def test_the_templates_pin_the_set_and_init_writes_it() -> None:
    text = template("workflows/attune-bench.yml")
    assert render(text, "ab" * 20) == text.replace("0" * 40, "ab" * 20)  # nothing else moves
    env = yaml.safe_load(text)["env"]
    assert (env["ATTUNE_TORCH"], env["ATTUNE_CUDA"]) == (PINS.torch, PINS.cuda)
    assert env["ATTUNE_MEGATRON"] == PINS.megatron_tag
    assert env["ATTUNE_TORCHTITAN"] == PINS.torchtitan
    assert env["ATTUNE_TRANSFORMER_ENGINE"] == ""  # the recipe's, else PINS.transformer_engine


def test_the_docs_and_the_gpu_smoke_test_name_the_set() -> None:
    from benchmarks.gpu_smoke import PINS as smoke_pins

    assert smoke_pins == {
        "torch": PINS.torch,
        "cuda": PINS.cuda,
        "megatron": PINS.megatron_tag,
        "torchtitan": PINS.torchtitan,
    }
    docs = (ROOT / "docs" / "gpu-runner.md").read_text()
    table = {
        m[1]: m[2] for m in re.finditer(r"^\| (torch|CUDA|Megatron-LM|torchtitan|Transformer "
                                        r"Engine) \| `([^`]+)` \|", docs, re.MULTILINE)
    }  # fmt: skip
    assert table == {
        "torch": PINS.torch,
        "CUDA": PINS.cuda,
        "Megatron-LM": PINS.megatron_tag,
        "torchtitan": PINS.torchtitan,
        "Transformer Engine": PINS.transformer_engine,
    }
    for stale in ('"2.9.0"', "core_v0.19.0"):  # the set before this one
        assert stale not in docs, f"docs/gpu-runner.md still names {stale}"


def test_the_set_fits_together() -> None:
    """No pin of the set is below what its frameworks need."""
    assert torch_problem("torchtitan", PINS.torchtitan, PINS.torch) is None
    assert torch_problem("megatron", PINS.megatron_tag, PINS.torch) is None
    assert ("torchtitan", PINS.torchtitan) in TORCH_FLOORS  # its floor was read, not assumed
    assert ("megatron", PINS.megatron_tag) in TORCH_FLOORS


@pytest.mark.parametrize(
    ("framework", "version_", "torch", "refused"),
    [
        ("torchtitan", "0.3.0", "2.9.0", True),  # the old pin: torch_checkpointing 0.1.1
        ("torchtitan", "0.3.0", "2.10.1", True),
        ("torchtitan", "0.3.0", "2.11.0", False),
        ("torchtitan", "0.3.0", "2.11.0+cu128", False),
        ("torchtitan", "0.2.0", "2.9.0", False),  # nothing known: the constraint decides
        ("megatron", "core_v0.19.2", "2.5.1", True),
    ],
)
def test_torch_floors(framework: str, version_: str, torch: str, refused: bool) -> None:
    assert (torch_problem(framework, version_, torch) is not None) is refused
