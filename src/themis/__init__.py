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
    labels_from_run,
    load_labels,
    load_predictions,
    render_table,
    results_json,
    score_predictions,
)
from .critics import CRITICS, Critic, ThemisCritic, make_critic
from .grading import Graded, grade_many, grade_rollout
from .lastk import LastKCritic, tally
from .metrics import Confusion, Scores, score, score_by_platform
from .options import LastKOptions, SequentialOptions, ThemisOptions
from .record import (
    LastKRecord,
    SequentialRecord,
    ThemisRecord,
    Verdict,
    load_verdict,
    save_verdict,
    verdict_path,
)
from .runs import export_accepted, run_items
from .sequential import SequentialCritic
from .summary import summarize
from .view import TaskInfo, TrajectorySource

__all__ = [
    "CRITICS",
    "BenchResult",
    "Confusion",
    "Critic",
    "Graded",
    "LabelEntry",
    "LastKCritic",
    "LastKOptions",
    "LastKRecord",
    "Scores",
    "SequentialCritic",
    "SequentialOptions",
    "SequentialRecord",
    "TaskInfo",
    "ThemisCritic",
    "ThemisOptions",
    "ThemisRecord",
    "TrajectorySource",
    "Verdict",
    "bench_critic",
    "export_accepted",
    "grade_many",
    "grade_rollout",
    "labels_from_run",
    "load_labels",
    "load_predictions",
    "load_verdict",
    "make_critic",
    "render_table",
    "results_json",
    "run_items",
    "save_verdict",
    "score",
    "score_by_platform",
    "score_predictions",
    "summarize",
    "tally",
    "verdict_path",
]
