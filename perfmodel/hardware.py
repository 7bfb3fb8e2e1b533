"""Accelerators and the model's factors, as reviewed data (``registry/hardware/``).

``parts.yaml`` holds each part's published figures with their source; ``factors.yaml`` every
constant of the step-time model that is not physics, with its origin. Both are validated here:
a missing field, an unknown part or a factor without an origin is an ``AttuneError`` that names
the file.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gate.errors import AttuneError

HARDWARE_DIR = Path(__file__).resolve().parent.parent / "registry" / "hardware"
GB = 1e9
TERA = 1e12


class Part(BaseModel):
    """One accelerator as its datasheet gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = ""
    name: str
    arch: str
    generation: Literal["ampere", "ada", "hopper", "blackwell", "cpu"]
    bf16_tflops: float = Field(gt=0)
    """Dense bf16/fp16 tensor-core peak (no sparsity)."""
    fp8_tflops: float | None = Field(default=None, gt=0)
    """Dense FP8 peak; None where the part has no FP8 tensor cores."""
    hbm_gib: float = Field(gt=0)
    hbm_gbps: float = Field(gt=0)
    scale_up: Literal["nvlink", "pcie", "shm"]
    scale_up_gbps: float = Field(gt=0)
    """Scale-up bandwidth per GPU, both directions together, as datasheets state it."""
    scale_up_domain: int = Field(ge=1)
    """GPUs one scale-up fabric connects (8 for an HGX board, 72 for an NVL72 rack)."""
    network_gbps: float = Field(gt=0)
    """Scale-out bandwidth per GPU, one direction (a 400 Gb/s NIC is 50)."""
    power_capped: bool = False
    """Run below its rated power: sustains ``power_capped_share`` of its peaks."""
    source: str = Field(min_length=10)

    def link_bytes_per_s(self, span: int, stride: int = 1) -> float:
        """One-direction bandwidth per rank of a collective whose ranks are ``stride`` apart
        and cover ``span`` consecutive ranks. Within one scale-up domain: the scale-up link.
        Across domains: NCCL runs one ring per NIC, so each of a domain's members of the group
        brings its own NIC (``network_gbps`` x members per domain), never above the scale-up
        link (NCCL's bus bandwidth convention)."""
        scale_up = self.scale_up_gbps / 2 * GB
        if span <= self.scale_up_domain:
            return scale_up
        members = max(1, self.scale_up_domain // max(1, stride))
        return min(scale_up, self.network_gbps * GB * members)


class Factor(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float
    origin: str = Field(min_length=6)
    """``fitted`` (by benchmarks/perf_model.py --fit) or the source it was taken from."""
    about: str = Field(min_length=6)


class FactorsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    version: str
    factors: dict[str, Factor]


class PartsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    parts: dict[str, Part]


def _read(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except OSError as exc:
        raise AttuneError(f"cannot read hardware data ({exc.strerror})", path=str(path)) from None
    except yaml.YAMLError as exc:
        raise AttuneError(f"hardware data is not YAML: {exc}", path=str(path)) from None


def _invalid(exc: ValidationError, path: Path) -> AttuneError:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return AttuneError(f"invalid hardware data: {err['msg']}", path=str(path), key=where)


@cache
def load_parts(directory: Path = HARDWARE_DIR) -> dict[str, Part]:
    path = directory / "parts.yaml"
    try:
        data = PartsFile.model_validate(_read(path))
    except ValidationError as exc:
        raise _invalid(exc, path) from None
    return {k: p.model_copy(update={"key": k}) for k, p in data.parts.items()}


@cache
def load_factors(directory: Path = HARDWARE_DIR) -> FactorsFile:
    path = directory / "factors.yaml"
    try:
        return FactorsFile.model_validate(_read(path))
    except ValidationError as exc:
        raise _invalid(exc, path) from None


ALIASES = {
    "h100": "h100-sxm",
    "h100-80gb": "h100-sxm",
    "a100": "a100-40gb",
    "h200-141gb": "h200",
    "b200-180gb": "b200",
    "dgx-h100": "h100-sxm",
    "dgx-b200": "b200",
    "dgx-gb200": "gb200",
}
ARCH_PART = {"sm80": "a100-40gb", "sm89": "l40s", "sm90": "h100-sxm", "sm100": "b200"}
"""An architecture stands for its most common part, as ``gate.memory.ARCH_DEVICE`` does."""


def part(name: str, directory: Path = HARDWARE_DIR) -> Part:
    """A part by key (``h100-sxm``), alias (``H100``) or architecture (``sm90``)."""
    parts = load_parts(directory)
    key = name.strip().lower().replace(" ", "-").removeprefix("nvidia-")
    key = ARCH_PART.get(key, ALIASES.get(key, key))
    if key not in parts:
        known = ", ".join(sorted(parts))
        raise AttuneError(f"unknown hardware {name!r}: known parts are {known}")
    return parts[key]


def part_for(arch: str | None, memory_gib: float | None, directory: Path = HARDWARE_DIR) -> Part:
    """The part a recipe's ``gpu_arch`` and ``device_memory_gib`` describe: of the parts of
    that architecture, the one whose HBM is nearest the declared memory (sm90 with 141 GiB
    is an H200)."""
    if not arch:
        raise AttuneError("no hardware: give --hardware, or hardware:/gpu_arch in the recipe")
    candidates = [p for p in load_parts(directory).values() if p.arch == arch]
    if not candidates:
        raise AttuneError(f"no known part of architecture {arch!r}", key="gpu_arch")
    if memory_gib is None:
        return part(arch, directory)
    return min(candidates, key=lambda p: abs(p.hbm_gib - memory_gib))


def recipe_part(framework: str, body: dict[str, object], name: str | None = None) -> Part:
    """The part a recipe runs on: ``name`` (``--hardware``), else the recipe's ``hardware:``,
    else its ``gpu_arch`` with ``device_memory_gib``; the embedded workload: ``cpu``."""
    if name:
        return part(name)
    if body.get("hardware"):
        return part(str(body["hardware"]))
    if framework == "embedded":
        return part("cpu")
    memory = body.get("device_memory_gib")
    arch = body.get("gpu_arch")
    return part_for(str(arch) if arch else "sm90", None if memory is None else float(str(memory)))
