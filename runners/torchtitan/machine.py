"""torchtitan's machine probes answered from the recipe's declared GPU, never the resolving host.

torchtitan 0.3.0 asks torch about the device while it builds and checks a job config:
``has_cuda_capability`` (torchtitan/tools/utils.py:27-33: ``torch.cuda.is_available()``,
``torch.version.hip``, ``torch.cuda.get_device_capability()``) decides whether the float8, MXFP8
and NVFP4 converters accept a model (components/quantization/float8.py:86, mx.py:70,
nvfp4.py:287) and whether FlexAttention's flash backend exists (models/common/config_utils.py:88),
and ``ParallelismConfig.__post_init__`` reads the capability for FSDP symmetric memory
(config/configs.py:268-271). A recipe resolves the same on a laptop, a CI runner and the
cluster: a recipe that declares ``gpu_arch: sm90`` is checked as on an H100, one that declares
none as on a machine without CUDA (so the low-precision converters refuse it, saying why).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def capability(gpu_arch: str | None) -> tuple[int, int] | None:
    """``sm90`` -> (9, 0), ``sm100`` -> (10, 0); None for no declared GPU."""
    if not gpu_arch:
        return None
    digits = gpu_arch.removeprefix("sm")
    return int(digits[:-1]), int(digits[-1])


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
