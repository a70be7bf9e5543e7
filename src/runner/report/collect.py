"""What the report shows, read from a run folder: tasks, rollouts, steps, facts, the
selection, and the ledger's seconds, tokens and dollars per module.

Reading is blocking and never changes the run, except that the augmented images are
written once beside the rollouts (see `images`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from core.llm import CallRecord, Ledger, ModuleTotals, is_scripted
from core.trajectory import RolloutInfo, RunLayout, Selection, Step, TaskDir, TaskResult
from themis import load_verdict, summarize

from ..comparability import label_fields, label_line, read_label
from ..module_errors import ErrorTally, count_run
from ..recording import RECORDING_ERROR_FILE, RECORDING_FILE
from ..task_errors import TaskErrors, count_task_errors
from .guide import GuideView, guide_view
from .images import ImagePaths, step_images
from .models import ModuleModels, module_models

__all__ = ["MODULE_ORDER", "RolloutView", "RunView", "StepView", "TaskView", "collect_run", "module_totals"]

#: Modules in the order a reader expects them: the rollouts' own, then what scaling adds.
MODULE_ORDER = ("policy", "grounding", "code_agent", "code_summary", "reflection", "narrative", "judge",
                "prm", "critic")


@dataclass
class StepView:
    index: int
    action: str
    thought: str
    error: str | None
    images: ImagePaths
    facts: list[str]
    seconds: float
    guide: GuideView | None = None
    """The step guide's candidates, scores, tools and pictures, when a guide chose the action."""


@dataclass
class RolloutView:
    index: int
    info: RolloutInfo | None
    steps: list[StepView]
    chosen: bool
    scripted: bool
    modules: dict[str, ModuleTotals]
    simulated: bool = False
    critics: list[list[str]] = field(default_factory=list)
    """Each saved critic verdict (``critic-<name>.json``) told in lines (`themis.summarize`)."""
    narrative_error: str | None = None
    """Why some of this rollout's transitions have no facts (the narrator's calls failed)."""
    recording: str | None = None
    """The rollout's screen recording (``recording.mp4``), relative to the run folder."""
    recording_error: str | None = None
    """Why a recording was asked for but not saved."""

    @property
    def seconds(self) -> float | None:
        info = self.info
        return info.ended_at - info.started_at if info and info.ended_at else None


@dataclass
class TaskView:
    task_id: str
    instruction: str
    rollouts: list[RolloutView]
    selection: Selection | None
    result: TaskResult | None
    modules: dict[str, ModuleTotals]


@dataclass
class RunView:
    run_id: str
    path: Path
    label: str | None
    tasks: list[TaskView] = field(default_factory=list)
    modules: dict[str, ModuleTotals] = field(default_factory=dict)
    scripted: bool = False
    simulated: bool = False
    """A simulated fleet or simulated models made it (`environments.sim`, ``sim/`` models)."""
    errors: ErrorTally = field(default_factory=ErrorTally)
    """Records per module that say the module failed for good (`module_errors`)."""
    task_errors: TaskErrors = field(default_factory=TaskErrors)
    """Tasks scored, and tasks errored because a setup or scorer failed (`task_errors`)."""
    models: list[ModuleModels] = field(default_factory=list)
    """Each module's model, as configured and as called (`models`)."""
    scoring: str | None = None
    """The scorer and, when the environment says so, why scores are not leaderboard-comparable
    (`comparability`); None for a run that recorded no environment."""
    comparable: bool = True


def module_totals(records: Iterable[CallRecord]) -> dict[str, ModuleTotals]:
    """Totals per module, known modules first in `MODULE_ORDER`, then the rest by name."""
    found: dict[str, ModuleTotals] = {}
    for record in records:
        found.setdefault(record.module, ModuleTotals()).add(record)
    return _ordered(found)


def _ordered(found: dict[str, ModuleTotals]) -> dict[str, ModuleTotals]:
    rank = {m: i for i, m in enumerate(MODULE_ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))


@dataclass
class _Calls:
    """The ledger added up in one pass, by run, task and rollout: the report needs totals,
    never the records (a whole benchmark's ledger holds hundreds of thousands)."""

    run: dict[str, ModuleTotals] = field(default_factory=dict)
    tasks: dict[str, dict[str, ModuleTotals]] = field(default_factory=dict)
    rollouts: dict[tuple[str, str], dict[str, ModuleTotals]] = field(default_factory=dict)
    #: (module, model) to calls.
    called: Counter[tuple[str, str]] = field(default_factory=Counter)

    @classmethod
    def of(cls, records: Iterable[CallRecord]) -> _Calls:
        out = cls()
        for record in records:
            out.run.setdefault(record.module, ModuleTotals()).add(record)
            task, rollout = record.tags.get("task"), record.tags.get("rollout")
            if task is not None:
                out.tasks.setdefault(task, {}).setdefault(record.module, ModuleTotals()).add(record)
                if rollout is not None:
                    of_k = out.rollouts.setdefault((task, rollout), {})
                    of_k.setdefault(record.module, ModuleTotals()).add(record)
            out.called[record.module, record.model] += 1
        return out

    def of_task(self, task_id: str) -> dict[str, ModuleTotals]:
        return _ordered(dict(self.tasks.get(task_id, {})))

    def of_rollout(self, task_id: str, k: int) -> dict[str, ModuleTotals]:
        return _ordered(dict(self.rollouts.get((task_id, str(k)), {})))


def _describe(action: dict[str, object] | None) -> str:
    from ..progress import describe_action

    return describe_action(action)


def _is_simulated(model: str | None, label: str | None) -> bool:
    return bool(model and model.startswith("sim/")) or bool(label and "SIMULATED" in label)


def _steps(task_dir: TaskDir, k: int, facts: list[list[str]], root: Path) -> list[StepView]:
    rd = task_dir.rollout(k)
    out = []
    for step in rd.iter_steps():
        out.append(StepView(
            index=step.index,
            action=_describe(step.action),
            thought=step.thought,
            error=step.error,
            images=step_images(task_dir, rd, step, root),
            facts=facts[step.index] if step.index < len(facts) else [],
            seconds=_seconds(step),
            guide=guide_view(step, rd, root),
        ))
    return out


def _recording(rollout: Path, root: Path) -> dict[str, str | None]:
    video, note = rollout / RECORDING_FILE, rollout / RECORDING_ERROR_FILE
    return {
        "recording": video.relative_to(root).as_posix() if video.is_file() else None,
        "recording_error": note.read_text(errors="replace").strip() if note.is_file() else None,
    }


def _seconds(step: Step) -> float:
    t = step.timings
    return t.propose + t.execute + t.settle


def _critics(rollout: Path) -> list[list[str]]:
    """The deliberations saved beside a rollout, headline first; an unreadable one says so."""
    out = []
    for path in sorted(rollout.glob("critic-*.json")):
        name = path.stem.removeprefix("critic-")
        try:
            verdict = load_verdict(rollout, name)
        except ValueError as e:
            out.append([f"{name}: unreadable verdict file ({str(e).splitlines()[0]})"])
            continue
        if verdict is not None:
            out.append(summarize(verdict))
    return out


def _task(layout: RunLayout, task_id: str, calls: _Calls, label: str | None) -> TaskView:
    task_dir = layout.task(task_id)
    task = task_dir.read_task()
    selection = task_dir.read_selection()
    rollouts = []
    for k, info in task_dir.headers().items():
        narrative = task_dir.read_narrative(k)
        facts = narrative.facts if narrative else []
        rollouts.append(RolloutView(
            index=k,
            info=info,
            steps=_steps(task_dir, k, facts, layout.path),
            chosen=selection is not None and selection.chosen == k,
            scripted=is_scripted(info.model if info else None, label),
            simulated=_is_simulated(info.model if info else None, info.label if info else label),
            modules=calls.of_rollout(task_id, k),
            critics=_critics(task_dir.rollout(k).path),
            narrative_error=narrative.error if narrative else None,
            **_recording(task_dir.rollout(k).path, layout.path),
        ))
    return TaskView(
        task_id=task_id,
        instruction=task.instruction if task else "(task.json missing)",
        rollouts=rollouts,
        selection=selection,
        result=task_dir.read_result(),
        modules=calls.of_task(task_id),
    )


def collect_run(layout: RunLayout) -> RunView:
    """Everything the report shows about `layout`'s run (blocking)."""
    calls = _Calls.of(Ledger.iter_records(layout.ledger_path))
    config = layout.read_config() or {}
    label = config.get("label") if isinstance(config.get("label"), str) else None
    view = RunView(run_id=layout.run_id, path=layout.path, label=label, modules=_ordered(calls.run))
    view.tasks = [_task(layout, t, calls, label) for t in layout.task_ids()]
    view.errors = count_run(layout)
    view.task_errors = count_task_errors(layout)
    if read_label(layout) is not None:
        view.scoring = label_line(layout)
        view.comparable = bool(label_fields(layout).get("leaderboard_comparable"))
    view.models = module_models(config, calls.called)
    policy = config.get("policy")
    models = {model for _, model in calls.called} | ({str(policy.get("model"))} if isinstance(policy, dict) else set())
    view.scripted = any(is_scripted(m, label) for m in models) or any(
        ro.scripted for t in view.tasks for ro in t.rollouts)
    view.simulated = any(_is_simulated(m, label) for m in models) or any(
        ro.simulated for t in view.tasks for ro in t.rollouts) or "SIMULATED" in (view.scoring or "")
    return view
