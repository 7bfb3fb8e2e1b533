"""Changes written back into command-line recipes, as the framework's own parser spells them."""

from __future__ import annotations

import difflib

import pytest
import yaml

from bot.campaign.recipe_edit import apply_changes, set_token_list
from gate.errors import AttuneError
from gate.recipe import parse_recipe
from runners.adapters import get_adapter
from runners.cli_edit import OptionTable, edit_megatron_args, edit_torchtitan_overrides
from tests.conftest import ROOT

pytestmark = pytest.mark.frameworks  # Megatron-LM's or torchtitan's own parsers in subprocesses

TABLE: OptionTable = {
    "micro_batch_size": [
        {"options": ["--micro-batch-size"], "kind": "store", "nargs": None, "const": None}
    ],
    "sequence_parallel": [
        {"options": ["--sequence-parallel"], "kind": "true", "nargs": None, "const": None}
    ],
    "gradient_accumulation_fusion": [
        {
            "options": ["--no-gradient-accumulation-fusion"],
            "kind": "false",
            "nargs": None,
            "const": None,
        }
    ],
    "profile_ranks": [
        {"options": ["--profile-ranks"], "kind": "store", "nargs": "+", "const": None}
    ],
}


def test_megatron_values_switches_and_lists() -> None:
    tokens = ["--micro-batch-size", "1", "--seq-length", "8", "--no-gradient-accumulation-fusion"]
    tokens += ["--profile-ranks", "0", "1"]
    out = edit_megatron_args(
        tokens,
        {
            "micro_batch_size": 2,
            "sequence_parallel": True,
            "gradient_accumulation_fusion": True,
            "profile_ranks": [3],
        },
        TABLE,
    )
    # in place where the option was; a switch whose absence is the value is dropped
    assert out == [
        *["--micro-batch-size", "2", "--seq-length", "8", "--profile-ranks", "3"],
        "--sequence-parallel",
    ]
    assert edit_megatron_args(out, {"sequence_parallel": False}, TABLE) == out[:-1]


def test_megatron_refuses_what_its_command_line_cannot_say() -> None:
    with pytest.raises(AttuneError, match="not an option of Megatron"):
        edit_megatron_args([], {"data_parallel_size": 2}, TABLE)
    with pytest.raises(AttuneError, match="cannot set sequence_parallel to 'yes'"):
        edit_megatron_args([], {"sequence_parallel": "yes"}, TABLE)


def test_torchtitan_flags_booleans_and_subcommands() -> None:
    tokens = [
        "--training.local_batch_size",
        "2",
        "--compile.no-enable",
        "activation-checkpoint:full",
    ]
    out = edit_torchtitan_overrides(
        tokens,
        {
            "training.local_batch_size": 4,
            "compile.enable": True,
            "activation_checkpoint": "selective",
            "parallelism.tensor_parallel_degree": 2,
        },
    )
    assert out == [
        "--training.local_batch_size",
        "4",
        "--compile.enable",
        "activation-checkpoint:selective",
        "--parallelism.tensor_parallel_degree",
        "2",
    ]
    assert edit_torchtitan_overrides(out, {"compile.enable": False})[2] == "--compile.no-enable"


def test_the_token_list_keeps_comments_and_marks_new_lines() -> None:
    text = (
        'framework: megatron\nargs:\n  # model\n  - --num-layers\n  - "32"  # depth\n'
        "  - --x\nenv: {}\n"
    )
    out = set_token_list(text, "args", ["--num-layers", "16", "--x", "--y"])
    assert out == (
        'framework: megatron\nargs:\n  # model\n  - --num-layers\n  - "16"  # attune\n'
        "  - --x\n  - --y  # attune\nenv: {}\n"
    )
    assert yaml.safe_load(out)["args"] == ["--num-layers", "16", "--x", "--y"]


def _diff(a: str, b: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="")
        if line[:1] in "+-" and line[:3] not in ("+++", "---")
    ]


@pytest.mark.slow
def test_a_megatron_candidate_is_written_with_megatron_s_own_options_and_resolves() -> None:
    """The option table comes from Megatron's real parser (the resolve worker)."""
    text = (ROOT / "examples/megatron/llama3-8b.yaml").read_text()
    changes = {
        "micro_batch_size": 2,
        "overlap_param_gather": False,
        "recompute_granularity": "selective",
    }
    out = apply_changes(text, changes)
    assert _diff(text, out) == [
        '-  - "1"',
        '+  - "2"  # attune',
        "-  - --overlap-param-gather",
        "+  - --recompute-granularity  # attune",
        "+  - selective  # attune",
    ]
    adapter = get_adapter("megatron")
    values = adapter.resolve(parse_recipe(out, path="candidate.yaml")).values
    assert {k: values[k] for k in changes} == changes
    # Megatron's own validation judges what the edit wrote
    bad = apply_changes(text, {"overlap_grad_reduce": False})
    with pytest.raises(AttuneError, match="Must use --overlap-param-gather with --overlap-grad"):
        adapter.resolve(parse_recipe(bad, path="candidate.yaml"))


@pytest.mark.slow
def test_a_torchtitan_candidate_resolves_to_the_change() -> None:
    text = (ROOT / "examples/torchtitan/llama3-8b.yaml").read_text()
    changes = {"parallelism.tensor_parallel_degree": 2, "activation_checkpoint": "full"}
    out = apply_changes(text, changes)
    values = get_adapter("torchtitan").resolve(parse_recipe(out, path="candidate.yaml")).values
    assert {k: values[k] for k in changes} == changes
    assert values["parallelism.data_parallel_shard_degree"] == 4  # FSDP takes the other ranks


def test_a_config_key_not_written_is_added_even_when_another_section_follows() -> None:
    from bot.campaign.recipe_edit import set_section_keys

    text = "framework: embedded\nconfig:\n  threads: 1\nenv:\n  OMP_PROC_BIND: 'true'\n"
    edited = set_section_keys(text, {"compile": True, "threads": 2})
    parsed = yaml.safe_load(edited)
    assert parsed["config"] == {"threads": 2, "compile": True}
    assert parsed["env"] == {"OMP_PROC_BIND": "true"}
