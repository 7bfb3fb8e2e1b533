"""``make gpu-smoke`` never pretends: on a machine without an NVIDIA GPU it runs nothing, says
why and exits 2 (the GPU run itself is documented in docs/gpu-runner.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.gpu_smoke import make_local_data, megatron_recipe, torchtitan_recipe
from tests.conftest import ROOT


def test_without_a_gpu_nothing_runs(tmp_path: Path) -> None:
    out = tmp_path / "gpu-smoke.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.gpu_smoke",
            "--out",
            str(out),
            "--workdir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "needs a machine with at least one NVIDIA GPU" in done.stderr
    assert not out.exists() and not (tmp_path / "work").exists()


def test_its_recipes_are_attune_recipes(tmp_path: Path) -> None:
    """The recipes it writes load as attune recipes, and its local tokenizer covers the
    dataset it writes with ids below debugmodel's vocabulary (2048)."""
    from tokenizers import Tokenizer

    from gate.recipe import load_recipe

    for body in (megatron_recipe(2, "sm90"), torchtitan_recipe(2)):
        path = tmp_path / f"{body['name']}.yaml"
        path.write_text(json.dumps(body))
        assert load_recipe(path).framework == body["framework"]
    assets, data = make_local_data(tmp_path / "local")
    tokenizer = Tokenizer.from_file(str(assets / "tokenizer.json"))
    text = json.loads((data / "train.json").read_text().splitlines()[0])["text"]
    ids = tokenizer.encode(text).ids
    assert ids and max(ids) < 2048
