"""The step guides compared as GUI-PRA's paper compares them: `agent-s3 bench … --guides
none,prm,gprm,gprm-no-memory,gprm-no-tools,gprm-no-point` runs the same task list once per
guide variant, on the same rollout seeds (one base seed for all, derived from the run id
unless given), each as its own resumable run ``RUN_ID-VARIANT``; then one table by task
difficulty (the task's ``complexity`` label) gives the success rate, the steps per rollout
and the dollars per task of each module, marked SCRIPTED when the models were scripted.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.atomic import write_json_atomic
from core.llm import Ledger
from core.trajectory import RunLayout

from .config import GuideConfig, RunConfig

__all__ = [
    "GUIDE_VARIANTS",
    "AblationRow",
    "ablation_rows",
    "apply_variant",
    "format_ablation",
    "parse_guides",
    "shared_seed",
    "write_ablation",
]

#: Each variant as the guide section it sets: the paper's baselines (no guide, the standard
#: PRM), GUI-PRA, and its ablations (table 2 of the paper).
GUIDE_VARIANTS: dict[str, dict[str, Any]] = {
    "none": {"name": "none"},
    "prm": {"name": "prm"},
    "gprm": {"name": "gprm"},
    "gprm-no-memory": {"name": "gprm", "options": {"memory": False}},
    "gprm-no-tools": {"name": "gprm", "options": {"tools": False}},
    "gprm-no-point": {"name": "gprm", "options": {"point": False}},
    "gprm-no-parser": {"name": "gprm", "options": {"parser": None}},
}
#: Modules whose cost the table shows, in this order.
COST_MODULES = ("policy", "grounding", "reflection", "code_agent", "prm", "narrative", "judge", "critic")
UNLABELLED = "unlabelled"


def parse_guides(text: str) -> list[str]:
    """The variants named in a comma-separated list, in order, each once."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in GUIDE_VARIANTS]
    if unknown or not names:
        raise ValueError(f"unknown guide variant {', '.join(unknown) or '(none given)'}; "
                         f"use some of: {', '.join(GUIDE_VARIANTS)}")
    return names


def shared_seed(run_id: str) -> int:
    """The base rollout seed every variant of one comparison uses when none is given:
    derived from the run id, so running the command again resumes with the same seeds."""
    return int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16)


def apply_variant(cfg: RunConfig, variant: str) -> RunConfig:
    """`cfg` with the guide section of `variant`: K, seeds, sampling and models kept from
    the run's guide settings, the name and the variant's options set (no guide: the
    policy's single proposal)."""
    spec = GUIDE_VARIANTS[variant]
    if spec["name"] == "none":
        return cfg.model_copy(update={"guide": GuideConfig()})
    base = cfg.guide.model_dump(exclude_unset=True)
    base.update(name=spec["name"], options={**cfg.guide.options, **spec.get("options", {})})
    if spec["name"] != "gprm":
        base.pop("pointer", None)
        base["options"] = {}
    return cfg.model_copy(update={"guide": GuideConfig.model_validate(base)})


@dataclass
class AblationRow:
    variant: str
    difficulty: str
    tasks: int = 0
    successes: int = 0
    steps: float = 0.0
    """Mean steps per rollout."""
    dollars: dict[str, float] = field(default_factory=dict)
    """Per module, mean dollars per task."""
    guide_errors: int = 0
    """Guided steps whose record carries an error (calls that failed for good)."""

    @property
    def success_rate(self) -> float:
        return self.successes / self.tasks if self.tasks else 0.0


def _rows_of(variant: str, layout: RunLayout) -> list[AblationRow]:
    groups: dict[str, AblationRow] = {}
    task_group: dict[str, str] = {}
    steps: dict[str, list[int]] = defaultdict(list)
    for task_id in layout.task_ids():
        td = layout.task(task_id)
        result = td.read_result()
        if result is None or result.errored:  # a failed setup or scorer is an error, never a 0
            continue
        task = td.read_task()
        difficulty = (task.complexity if task is not None else None) or UNLABELLED
        row = groups.setdefault(difficulty, AblationRow(variant, difficulty))
        task_group[task_id] = difficulty
        row.tasks += 1
        score = result.selected_score if result.selected is not None else next(iter(result.scores.values()), None)
        row.successes += int(score is not None and score >= 1.0 - 1e-9)
        for k, info in td.headers().items():
            if info is not None:
                steps[difficulty].append(info.step_count)
            for step in layout.rollout(task_id, k).iter_steps():
                if step.guide and step.guide.get("error"):
                    row.guide_errors += 1
    records = Ledger.iter_records(layout.ledger_path)  # streamed, added up once
    spent: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in records:
        group = task_group.get(str(r.tags.get("task")))
        if group is not None:
            spent[group][r.module] += r.dollars
    for difficulty, row in groups.items():
        row.steps = sum(steps[difficulty]) / len(steps[difficulty]) if steps[difficulty] else 0.0
        row.dollars = {m: d / row.tasks for m, d in sorted(spent[difficulty].items())}
    return [groups[d] for d in sorted(groups)]


def ablation_rows(layouts: dict[str, RunLayout]) -> list[AblationRow]:
    """One row per variant and difficulty, and an ``all`` row per variant."""
    out: list[AblationRow] = []
    for variant, layout in layouts.items():
        rows = _rows_of(variant, layout)
        total = AblationRow(variant, "all", tasks=sum(r.tasks for r in rows),
                            successes=sum(r.successes for r in rows),
                            guide_errors=sum(r.guide_errors for r in rows))
        if total.tasks:
            total.steps = sum(r.steps * r.tasks for r in rows) / total.tasks
            modules = {m for r in rows for m in r.dollars}
            total.dollars = {m: sum(r.dollars.get(m, 0.0) * r.tasks for r in rows) / total.tasks
                             for m in sorted(modules)}
        out += [*rows, total]
    return out


def format_ablation(rows: list[AblationRow], *, scripted: bool) -> str:
    """The table as Markdown; a SCRIPTED line first when the replies came from scripts
    (success, steps and dollars then say nothing of a model)."""
    modules = [m for m in COST_MODULES if any(m in r.dollars for r in rows)]
    modules += sorted({m for r in rows for m in r.dollars} - set(modules))
    head = ["guide", "difficulty", "tasks", "success rate", "steps/rollout", "guide errors",
            *[f"$ {m}/task" for m in modules]]
    lines = ["SCRIPTED: replies came from scripts, not models; the figures test the harness only."] if scripted else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r.variant, r.difficulty, str(r.tasks), f"{r.success_rate:.1%}", f"{r.steps:.1f}", str(r.guide_errors),
                 *[f"{r.dollars.get(m, 0.0):.4f}" for m in modules]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_ablation(folder: Path, run_id: str, rows: list[AblationRow], *, scripted: bool,
                   seed: int | None) -> tuple[Path, Path]:
    """``RUN_ID-guides.md`` and ``RUN_ID-guides.json`` in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    md, js = folder / f"{run_id}-guides.md", folder / f"{run_id}-guides.json"
    md.write_text(format_ablation(rows, scripted=scripted))
    data = {"scripted": scripted, "seed": seed,
            "rows": [{**asdict(r), "success_rate": r.success_rate} for r in rows]}
    write_json_atomic(js, data)
    return md, js
