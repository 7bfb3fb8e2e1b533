"""The step-time model: a training step's time before launch, from the effective config and
the hardware's published figures (``registry/hardware/``). Pure: stdlib, pydantic, yaml and
the gate's memory model; never bot/ or runners/. See docs/perf-model.md."""

from perfmodel.hardware import Part, part, part_for
from perfmodel.predict import predict_step
from perfmodel.step import COMPONENTS, MODEL_VERSION, StepPrediction, predict_workload
from perfmodel.workload import Workload, workload_of

__all__ = [
    "COMPONENTS",
    "MODEL_VERSION",
    "Part",
    "StepPrediction",
    "Workload",
    "part",
    "part_for",
    "predict_step",
    "predict_workload",
    "workload_of",
]
