"""torchtitan's machine probes answered from the recipe's declared GPU, never the resolving host.

torchtitan 0.3.0 asks torch about the device while it builds and checks a job config:
``has_cuda_capability`` (torchtitan/tools/utils.py:27-33: ``torch.cuda.is_available()``,
``torch.version.hip``, ``torch.cuda.get_device_capability()``) decides whether the float8, MXFP8
and NVFP4 converters accept a model (components/quantization/float8.py:86, mx.py:70,
nvfp4.py:287) and whether FlexAttention's flash backend exists (models/common/config_utils.py:88),
and ``ParallelismConfig.__post_init__`` reads the capability for FSDP symmetric memory
(config/configs.py:268-271). A recipe resolves the same on a laptop, a CI runner and the
cluster: a recipe that declares ``gpu_arch: sm100`` is checked as on a B200; one that declares
none as on an H100 (``DEFAULT_GPU_ARCH``, the GPU torchtitan's published benchmarks ran on), and
a refusal by a device check then says so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

DEFAULT_GPU_ARCH = "sm90"
"""What the device probes are answered with for a recipe that declares no ``gpu_arch``."""

DEVICE_CHECKS = (
    "torchtitan/components/quantization/",
    "torchtitan/config/configs.py:",
    "torchtitan/models/common/config_utils.py:",
)
"""Where torchtitan 0.3.0 refuses a config because of the device (see the module docstring)."""


def capability(gpu_arch: str | None) -> tuple[int, int] | None:
    """``sm90`` -> (9, 0), ``sm100`` -> (10, 0); None for no CUDA device."""
    if not gpu_arch:
        return None
    digits = gpu_arch.removeprefix("sm")
    return int(digits[:-1]), int(digits[-1])


def undeclared_hint(source: str | None) -> str:
    """What a refusal raised at ``source`` adds when the recipe declared no ``gpu_arch``."""
    if source and source.startswith(DEVICE_CHECKS):
        return (
            f" (checked as on {DEFAULT_GPU_ARCH}: the recipe declares no gpu_arch; declare the "
            "one it runs on, e.g. gpu_arch: sm100)"
        )
    return ""


@contextlib.contextmanager
def declared_gpu(torch: Any, gpu_arch: str | None) -> Iterator[None]:
    """Within the block, torch says it has the CUDA device ``gpu_arch`` names (an NVIDIA GPU of
    that compute capability), or no CUDA device when the recipe declares none."""
    cuda, version = torch.cuda, torch.version
    saved = cuda.is_available, cuda.get_device_capability, version.hip
    declared = capability(gpu_arch)

    def get_device_capability(device: Any = None) -> tuple[int, int]:
        if declared is None:
            raise RuntimeError("the recipe declares no gpu_arch: no CUDA device to ask")
        return declared

    cuda.is_available = lambda: declared is not None
    cuda.get_device_capability = get_device_capability
    version.hip = None
    try:
        yield
    finally:
        cuda.is_available, cuda.get_device_capability, version.hip = saved
