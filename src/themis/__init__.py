"""OS-Themis outcome critic (selector, verifier, reviewer, judge), the last-K and
sequential baselines, and critic metrics.

``make_critic(name, model, **options)`` gives an async critic:
``verdict = await critic(task, rollout_dir)``; ``grade_rollout`` also saves the verdict as
``critic-<name>.json`` beside the trajectory. ``bench_critic`` / ``score_predictions`` score
critics and recorded verdicts against labels.
"""

from .bench import (
    BenchResult,
    LabelEntry,
    bench_critic,
    group_of,
    labels_from_run,
    load_labels,
    load_predictions,
    score_predictions,
)
from .critics import CRITICS, Critic, ThemisCritic, critic_options_model, make_critic
from .grading import Graded, Published, grade_many, grade_rollout, grade_source
from .lastk import LastKCritic, tally
from .metrics import Confusion, Scores, score, score_by_platform
from .options import LastKOptions, SequentialOptions, ThemisOptions
from .public_data import FORMATS, LabelSet, detect_format, read_labels
from .record import (
    LastKRecord,
    OtherRecord,
    SequentialRecord,
    ThemisRecord,
    Verdict,
    load_verdict,
    save_verdict,
    verdict_path,
)
from .released import Released, is_judgment_folder, is_results_file, read_released
from .rounding import ROUNDINGS, Rounding, percent
from .runs import export_accepted, run_items
from .sequential import SequentialCritic
from .summary import summarize
from .table import render_table, results_json
from .traces import TraceSource, trace_source
from .view import TaskInfo, TrajectorySource

__all__ = [
    "CRITICS",
    "FORMATS",
    "ROUNDINGS",
    "BenchResult",
    "Confusion",
    "Critic",
    "Graded",
    "LabelEntry",
    "LabelSet",
    "LastKCritic",
    "LastKOptions",
    "LastKRecord",
    "OtherRecord",
    "Published",
    "Released",
    "Rounding",
    "Scores",
    "SequentialCritic",
    "SequentialOptions",
    "SequentialRecord",
    "TaskInfo",
    "ThemisCritic",
    "ThemisOptions",
    "ThemisRecord",
    "TraceSource",
    "TrajectorySource",
    "Verdict",
    "bench_critic",
    "critic_options_model",
    "detect_format",
    "export_accepted",
    "grade_many",
    "grade_rollout",
    "grade_source",
    "group_of",
    "is_judgment_folder",
    "is_results_file",
    "labels_from_run",
    "load_labels",
    "load_predictions",
    "load_verdict",
    "make_critic",
    "percent",
    "read_labels",
    "read_released",
    "render_table",
    "results_json",
    "run_items",
    "save_verdict",
    "score",
    "score_by_platform",
    "score_predictions",
    "summarize",
    "tally",
    "trace_source",
    "verdict_path",
]
