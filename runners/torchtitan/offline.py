"""Where a torchtitan launch finds its tokenizer and its dataset on a runner with no network.

torchtitan 0.3.0's ``llama3_8b`` resolves ``hf_assets_path="./assets/hf/Llama-3.1-8B"`` against
the run's work directory (torchtitan/models/llama3/config_registry.py:192) and streams c4 from
the Hugging Face Hub (torchtitan/hf_datasets/text_datasets.py:27-42), while a launch sees none
of the runner's ``HF_*`` tokens. The runner names both locations, absolute, in its own
environment (never a recipe: a candidate cannot point a launch at other files):

- ``ATTUNE_TORCHTITAN_ASSETS``: the tokenizer folder (``--hf_assets_path``);
- ``ATTUNE_TORCHTITAN_DATASET``: a local copy of the dataset the recipe names
  (``--dataloader.dataset_path``), read with ``load_dataset`` offline (``HF_HUB_OFFLINE=1``
  in the runner's environment, which every launch inherits).

The harness adds them to every launch of a campaign alike; ``attune doctor`` checks them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel

from gate.errors import AttuneError

ASSETS_VAR = "ATTUNE_TORCHTITAN_ASSETS"
DATASET_VAR = "ATTUNE_TORCHTITAN_DATASET"


class OfflineData(BaseModel):
    """The runner's local tokenizer and dataset for torchtitan launches."""

    assets: Path | None = None
    dataset: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OfflineData:
        env = os.environ if environ is None else environ
        found: dict[str, Path] = {}
        for field, var in (("assets", ASSETS_VAR), ("dataset", DATASET_VAR)):
            value = env.get(var, "")
            if not value:
                continue
            path = Path(value)
            if not path.is_absolute():
                raise AttuneError(
                    f"{var} must be an absolute path (a launch runs in its own work directory), "
                    f"got {value!r}"
                )
            found[field] = path
        return cls.model_validate(found)

    def problems(self) -> list[str]:
        """What keeps a torchtitan launch from starting offline, each with its fix."""
        out = []
        if self.assets is None:
            out.append(
                f"{ASSETS_VAR} is not set: torchtitan would read its tokenizer from "
                "./assets/hf/... in the run's folder; set it to the tokenizer folder "
                "(tokenizer.json, tokenizer_config.json)"
            )
        elif not (self.assets / "tokenizer.json").is_file():
            out.append(f"{ASSETS_VAR}={self.assets} holds no tokenizer.json")
        if self.dataset is None:
            out.append(
                f"{DATASET_VAR} is not set: torchtitan would stream its dataset from the "
                "Hugging Face Hub; set it to a local copy of the dataset"
            )
        elif not self.dataset.exists():
            out.append(f"{DATASET_VAR}={self.dataset} does not exist")
        return out

    def overrides(self) -> list[str]:
        """The harness's tokens for them (empty for what is not set)."""
        tokens = []
        if self.assets is not None:
            tokens += ["--hf_assets_path", str(self.assets)]
        if self.dataset is not None:
            tokens += ["--dataloader.dataset_path", str(self.dataset)]
        return tokens
