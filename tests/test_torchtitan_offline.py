"""torchtitan launches read the runner's local tokenizer and dataset (no network on a runner):
the runner names them, absolute, and every launch of a campaign gets the same overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from gate.errors import AttuneError
from gate.recipe import load_recipe
from runners.torchtitan.adapter import TorchtitanAdapter
from runners.torchtitan.offline import ASSETS_VAR, DATASET_VAR, OfflineData

TITAN = Path(__file__).resolve().parents[1] / "examples" / "torchtitan" / "llama3-8b.yaml"


def test_unset_locations_are_refused_with_their_fix() -> None:
    problems = OfflineData.from_env({}).problems()
    assert len(problems) == 2
    assert f"{ASSETS_VAR} is not set" in problems[0] and "./assets/hf" in problems[0]
    assert f"{DATASET_VAR} is not set" in problems[1] and "Hugging Face Hub" in problems[1]


def test_a_relative_location_is_refused() -> None:
    with pytest.raises(AttuneError, match="must be an absolute path"):
        OfflineData.from_env({ASSETS_VAR: "assets/hf/Llama-3.1-8B"})


def test_every_launch_reads_the_runners_tokenizer_and_dataset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assets, dataset = tmp_path / "tokenizer", tmp_path / "c4"
    assets.mkdir()
    dataset.mkdir()
    local = OfflineData.from_env({ASSETS_VAR: str(assets), DATASET_VAR: str(dataset)})
    assert local.problems() == [f"{ASSETS_VAR}={assets} holds no tokenizer.json"]
    (assets / "tokenizer.json").write_text("{}")
    assert local.problems() == []
    monkeypatch.setenv(ASSETS_VAR, str(assets))
    monkeypatch.setenv(DATASET_VAR, str(dataset))
    adapter = TorchtitanAdapter()
    body = adapter._body(load_recipe(TITAN))
    out = adapter.harness(body, None, steps=8, workdir=tmp_path / "run", profile=False)  # type: ignore[arg-type]
    tail = ["--hf_assets_path", str(assets), "--dataloader.dataset_path", str(dataset)]
    assert out.harness[-4:] == tail and out.argv[-4:] == tail
