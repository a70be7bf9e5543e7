"""Tasks in OSWorld's format: loading, setup steps, evaluators and the local task suite."""

from environments.tasks.errors import (
    TaskError,
    TaskFileError,
    TaskRunError,
    UnsupportedGetter,
    UnsupportedMetric,
    UnsupportedStep,
)
from environments.tasks.loader import iter_task_files, load_task, load_task_list, parse_task, read_task_list
from environments.tasks.model import Evaluator, GetterSpec, MetricCall, OSWorldTask, SetupStep

__all__ = [
    "Evaluator",
    "GetterSpec",
    "MetricCall",
    "OSWorldTask",
    "SetupStep",
    "TaskError",
    "TaskFileError",
    "TaskRunError",
    "UnsupportedGetter",
    "UnsupportedMetric",
    "UnsupportedStep",
    "iter_task_files",
    "load_task",
    "load_task_list",
    "parse_task",
    "read_task_list",
]
