"""The run report, ``report.html`` at the run's root: self-contained, opened from disk.

``write_report(layout)`` (blocking) reads the run (`collect_run`), writes the augmented
images once, renders the page (`render_report`) and returns its path.
"""

from pathlib import Path

from core.trajectory import RunLayout

from .collect import MODULE_ORDER, RolloutView, RunView, StepView, TaskView, collect_run, module_totals
from .images import AUGMENTED_DIR, ImagePaths, step_images
from .render import render_report

__all__ = [
    "AUGMENTED_DIR",
    "MODULE_ORDER",
    "ImagePaths",
    "RolloutView",
    "RunView",
    "StepView",
    "TaskView",
    "collect_run",
    "module_totals",
    "render_report",
    "step_images",
    "write_report",
]


def write_report(layout: RunLayout) -> Path:
    """Write ``report.html`` for `layout`'s run and return its path (blocking)."""
    layout.write_report(render_report(collect_run(layout)))
    return layout.report_path
