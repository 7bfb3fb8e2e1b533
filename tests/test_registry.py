"""The registry: schema, coverage of the workload, source lines and conditions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.models import EffectiveConfig
from gate.registry import DEFAULT_REGISTRY_DIR, load_file, load_registry
from runners.embedded.config import ENV_READ, WORKLOAD_VERSION, WorkloadConfig
from runners.source_lines import locate_source, mentions, source_problem


def test_every_workload_key_is_classified() -> None:
    registry = load_registry("embedded", WORKLOAD_VERSION)
    keys = set(WorkloadConfig.model_fields) | {f"env.{k}" for k in ENV_READ}
    missing = sorted(k for k in keys if registry.entry(k) is None)
    assert not missing, f"registry/embedded.yaml lacks: {missing}"
    stale = sorted(set(registry.data.keys) - keys)
    assert not stale, f"registry/embedded.yaml names keys the workload does not have: {stale}"


@pytest.mark.parametrize(
    "registry_file", sorted(DEFAULT_REGISTRY_DIR.glob("*.yaml")), ids=lambda p: p.name
)
def test_every_source_line_reads_its_key(registry_file: Path) -> None:
    """A source must point at a line that names the key; code moves, the test names the entry.

    Framework sources (``path:line@version``) are checked against the installed framework when
    its version is the one named; known bugs must point at an existing line.
    """
    data = load_file(registry_file).data
    wrong = [source_problem(key, e.source) for key, e in data.keys.items()]
    checked = [locate_source(e.source) for e in data.keys.values()]
    for bug_id, bug in data.known_bugs.items():
        located = locate_source(bug.source)
        if located is not None and located[1] > len(located[0].read_text().splitlines()):
            wrong.append(f"known_bugs.{bug_id}: {bug.source} is past the end of the file")
    problems = [w for w in wrong if w]
    assert not problems, f"{registry_file.name}: sources moved:\n" + "\n".join(problems)
    if data.keys and all(c is None for c in checked):
        pytest.skip(f"{data.framework} at the version {registry_file.name} names is not installed")


def test_a_moved_source_line_names_the_entry(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "framework: embedded\nversions: '==1'\nkeys:\n"
        "  seed: {class: semantic, reason: r, source: runners/embedded/config.py:1}\n",
    )
    (problem,) = [source_problem(k, e.source) for k, e in load_file(path).data.keys.items()]
    assert problem is not None and problem.startswith("seed: runners/embedded/config.py:1 reads")


def test_mentions_matches_whole_identifiers() -> None:
    assert mentions("    group.add_argument('--num-layers', type=int,", "num_layers")
    assert mentions("    num_micro_batches = global_batch_size // mbs_x_dp", "num_microbatches")
    assert not mentions("    decoder_num_layers: int = None", "num_layers")
    assert mentions("if os.environ.get('NCCL_PROTO', '')", "env.NCCL_*")
    assert mentions("    seq_len: int = 2048", "training.seq_len")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layot, reason: r, source: f.py:1}}\n",
            r"bad\.yaml: keys\.a\.class: invalid registry entry",
        ),
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layout, reason: r, source: f.py}}\n",
            r"keys\.a\.source: invalid registry entry: .*path/to/file\.py:123",
        ),
        (
            "framework: x\nversions: '==1'\nkeys: {a: {class: layout, reason: r}}\n",
            r"keys\.a\.source: invalid registry entry: Field required",
        ),
        (
            "framework: x\nversions: 'one'\n"
            "keys: {a: {class: layout, reason: r, source: f.py:1}}\n",
            r"versions: invalid registry entry",
        ),
        ("framework: x\nversions: '==1'\nkeys: {}\n", r"needs keys or known_bugs"),
        (
            "framework: x\nkeys: {a: {class: layout, reason: r, source: f.py:1}}\n",
            r"a file with keys needs versions",
        ),
        (
            "framework: x\nknown_bugs: {b: {versions: '<1', keys: [a], reason: r, source: f}}\n",
            r"known_bugs\.b\.source: invalid registry entry: .*path/to/file\.py:123",
        ),
        (
            "framework: x\nknown_bugs: {b: {versions: 'old', keys: [a], reason: r, source: f:1}}\n",
            r"known_bugs\.b\.versions: invalid registry entry: .*not a version specifier",
        ),
        ("framework: x\nversions: '==1'\nkeys: [\n", r"malformed registry YAML"),
        (
            "framework: x\nversions: '==1'\nkeys:\n  a: {class: layout, reason: r, source: f.py:1,"
            " when: [{if: {unpinned: b, key: c, is_set: true}, class: semantic, reason: r}]}\n",
            r"keys\.a\.when\.0\.if: invalid registry entry: .*exactly one",
        ),
        (
            "framework: x\nversions: '==1'\n"
            "keys: {a: {class: layout, reason: r, source: f.py:1, x: 1}}\n",
            r"keys\.a\.x: invalid registry entry: Extra",
        ),
    ],
)
def test_malformed_registry_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(AttuneError, match=message):
        load_file(write(tmp_path, text))


def test_a_broken_file_fails_every_lookup(tmp_path: Path) -> None:
    """Never an empty or partial registry: one bad file makes loading fail loudly."""
    (tmp_path / "embedded.yaml").write_text((DEFAULT_REGISTRY_DIR / "embedded.yaml").read_text())
    write(tmp_path, "framework: other\nversions: '==1'\nkeys: {a: {class: nope}}\n")
    with pytest.raises(AttuneError, match=r"bad\.yaml"):
        load_registry("embedded", WORKLOAD_VERSION, tmp_path)


def test_version_range_selects_the_file(tmp_path: Path) -> None:
    with pytest.raises(AttuneError, match="no registry for framework 'embedded' version 2"):
        load_registry("embedded", "2")


def test_coverage_command_lists_missing_and_stale_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli import main

    assert main(["registry", "coverage", "--framework", "embedded"]) == 0
    assert "every parser key is classified" in capsys.readouterr().out
    text = (DEFAULT_REGISTRY_DIR / "embedded.yaml").read_text()
    data = load_file(DEFAULT_REGISTRY_DIR / "embedded.yaml").data
    seed = data.keys["seed"]
    text = text.replace("  seed:\n", "  sead:\n", 1)  # one key renamed: missing + stale
    (tmp_path / "embedded.yaml").write_text(text)
    assert seed.key_class == "semantic"
    code = main(
        ["registry", "coverage", "--framework", "embedded", "--registry", str(tmp_path), "--json"]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert report["missing"] == ["seed"]
    assert report["not_in_parser"] == ["sead"]


def effective(values: dict[str, object], explicit: list[str] | None = None) -> EffectiveConfig:
    return EffectiveConfig(
        framework="x",
        framework_version="1",
        values=dict(values),
        explicit=explicit if explicit is not None else sorted(values),
        devices=8,
    )


def test_changed_compares_derived_values_not_spellings(tmp_path: Path) -> None:
    text = (
        "framework: x\nversions: '==1'\nkeys:\n"
        "  dp:\n    class: layout\n    reason: split\n    source: f.py:1\n    when:\n"
        "      - if: {changed: gbs}\n        class: semantic\n        reason: moves the batch\n"
        "      - if: {all: [{key: clip, in: [per_shard]}, {not: {key: dp, in: [1]}}]}\n"
        "        class: semantic\n        reason: per-shard clipping\n"
        "      - if: {any: [{key: seed, is_set: true}, {key: pp, in: [2]}]}\n"
        "        class: semantic\n        reason: seeded\n"
        "      - if: {key: quant, matches: '^NVFP4'}\n"
        "        class: semantic\n        reason: local quantization\n"
    )
    registry = load_file(write(tmp_path, text))
    pinned = effective({"dp": 8, "gbs": 16, "seed": None})
    # the same derived batch, unpinned on one side: layout either way
    derived = effective({"dp": 4, "gbs": 16, "seed": None}, explicit=["dp"])
    assert registry.classify("dp", pinned, derived).key_class == "layout"
    moved = effective({"dp": 4, "gbs": 8, "seed": None})
    found = registry.classify("dp", pinned, moved)
    assert (found.key_class, found.reason) == ("semantic", "moves the batch")
    # a key one side lacks counts as changed
    assert registry.classify("dp", pinned, effective({"dp": 4, "seed": None})).reason == (
        "moves the batch"
    )
    # all + not on the same config: per-shard clipping with more than one rank on either side
    clip = {"gbs": 16, "seed": None, "clip": "per_shard"}
    one, two = effective({**clip, "dp": 1}), effective({**clip, "dp": 2})
    assert registry.classify("dp", one, two).reason == "per-shard clipping"
    # any: a pinned seed on either side
    seeded = effective({"dp": 2, "gbs": 16, "seed": 3})
    assert registry.classify("dp", pinned, seeded).reason == "seeded"
    # matches: one item of a list value, as text
    nvfp4 = effective({"dp": 2, "gbs": 16, "seed": None, "quant": ["NVFP4Linear x 3"]})
    assert registry.classify("dp", pinned, nvfp4).reason == "local quantization"
    other = effective({"dp": 2, "gbs": 16, "seed": None, "quant": ["MXFP8Linear x 3"]})
    assert registry.classify("dp", pinned, other).key_class == "layout"
    # changed alone never holds for one config
    assert registry.data.keys["dp"].when[0].if_.holds(pinned) is False


@pytest.mark.parametrize(
    "condition",
    [
        "{changed: a, key: b, in: [1]}",
        "{key: b}",
        "{matches: x}",
        "{key: b, matches: '('}",
        "{not: {changed: a}, any: [{changed: a}]}",
    ],
)
def test_a_condition_has_exactly_one_form(tmp_path: Path, condition: str) -> None:
    text = (
        "framework: x\nversions: '==1'\nkeys:\n  a: {class: layout, reason: r, source: f.py:1,"
        f" when: [{{if: {condition}, class: semantic, reason: r}}]}}\n"
    )
    with pytest.raises(AttuneError, match=r"keys\.a\.when\.0\.if.*(exactly one|need|regular)"):
        load_file(write(tmp_path, text))
