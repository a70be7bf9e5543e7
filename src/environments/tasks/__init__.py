"""Tasks in OSWorld's format: loading, set-up and scoring by OSWorld's own code, and the local task suite."""

from core.trajectory import Evaluator, GetterSpec, MetricCall, SetupStep
from environments.tasks.client import TaskClient, command_output
from environments.tasks.context import TaskContext
from environments.tasks.door import Endpoint
from environments.tasks.errors import (
    TaskError,
    TaskFileError,
    TaskRunError,
    UnsupportedGetter,
    UnsupportedMetric,
    UnsupportedStep,
)
from environments.tasks.evaluate import check_evaluator, evaluate, run_setup
from environments.tasks.loader import iter_task_files, load_task, load_task_list, parse_task, read_task_list
from environments.tasks.suite import SUITE_DIR, load_suite
from environments.tasks.support import SupportReport, support_report, task_gaps

__all__ = [
    "SUITE_DIR",
    "Endpoint",
    "Evaluator",
    "GetterSpec",
    "MetricCall",
    "SetupStep",
    "SupportReport",
    "TaskClient",
    "TaskContext",
    "TaskError",
    "TaskFileError",
    "TaskRunError",
    "UnsupportedGetter",
    "UnsupportedMetric",
    "UnsupportedStep",
    "check_evaluator",
    "command_output",
    "evaluate",
    "iter_task_files",
    "load_suite",
    "load_task",
    "load_task_list",
    "parse_task",
    "read_task_list",
    "run_setup",
    "support_report",
    "task_gaps",
]
