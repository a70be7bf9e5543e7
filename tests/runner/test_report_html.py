"""report.html from a run folder written by hand (no desktop): it parses, links only files
that exist (the augmented pictures written once), loads nothing from the network, marks
the chosen rollout, shows "no selection", facts, reasoning, per-module seconds, tokens and
dollars in the expected order, and labels scripted models SCRIPTED."""

from __future__ import annotations

import io
import re
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from PIL import Image

from core.config import dump_config
from core.llm import CallRecord, Ledger
from core.trajectory import (
    Narrative,
    PointerEvent,
    RolloutInfo,
    RunLayout,
    Selection,
    Step,
    Task,
    TaskResult,
)
from runner.config import CriticConfig, GuideConfig, ModelConfig, RunConfig
from runner.report import collect_run, module_totals, write_report
from runner.report.models import module_models
from runner.wide_config import JudgeModelConfig, WideConfig


def _png(colour: tuple[int, int, int]) -> bytes:
    img = Image.fromarray(np.full((200, 320, 3), colour, dtype=np.uint8))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _rollout(layout: RunLayout, task: str, k: int, model: str, status: str, pointer: bool) -> None:
    rd = layout.rollout(task, k)
    rd.start(RolloutInfo(run_id=layout.run_id, task_id=task, rollout=k, model=model, seed=10 + k,
                         environment=f"local-{k}", started_at=time.time()))
    click = [PointerEvent(kind="click", x=100, y=50)] if pointer else []
    rd.append_step(Step(index=0, thought="Click the field <b>now</b>", action={"kind": "click"}, pointer=click),
                   {"before": _png((250, 250, 250)), "after": _png((200, 220, 255))})
    rd.append_step(Step(index=1, action={"kind": "done"}), {"before": _png((200, 220, 255))})
    rd.finish(status, "the agent declared the task complete")  # type: ignore[arg-type]


def _record(module: str, model: str, task: str, k: int | None, dollars: float) -> CallRecord:
    tags = {"run": "r1", "task": task} | ({"rollout": str(k)} if k is not None else {})
    return CallRecord(id=f"{module}-{k}-{dollars}", module=module, model=model, tags=tags, started_at=time.time(),
                      seconds=1.5, input_tokens=100, output_tokens=10, dollars=dollars)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [v for n, v in attrs if n in ("src", "href") and v]


def _run(tmp_path: Path, selection: Selection, model: str = "openai/gpt-5") -> RunLayout:
    layout = RunLayout(tmp_path, "r1", durable=False)
    task = "t1"
    layout.task(task).write_task(Task(id=task, instruction="Put <apples> in the list"))
    _rollout(layout, task, 0, model, "done", pointer=True)
    _rollout(layout, task, 1, model, "done", pointer=False)
    layout.task(task).write_narrative(Narrative(rollout=0, facts=[["The field got focus & turned blue"], ["done"]]))
    layout.task(task).write_selection(selection)
    layout.task(task).write_result(TaskResult.from_scores(task, {0: 1.0, 1: 0.0}, selected=selection.chosen))
    ledger = Ledger(layout.ledger_path)
    for record in (_record("judge", model, task, None, 0.02), _record("narrative", model, task, None, 0.01),
                   _record("policy", model, task, 0, 0.1), _record("grounding", model, task, 1, 0.05)):
        ledger.append(record)
    return layout


def test_report_links_existing_files_marks_the_pick_and_orders_modules(tmp_path: Path) -> None:
    layout = _run(tmp_path, Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=0, seed=3,
                                      reasoning="Candidate 1, F1.1: the field <turned> blue."))
    path = write_report(layout)
    html = path.read_text()
    parser = _Links()
    parser.feed(html)
    assert "script" not in parser.tags and "link" not in parser.tags
    assert parser.links and all((path.parent / link).is_file() for link in parser.links)
    assert not any("://" in link or link.startswith("//") for link in parser.links)
    augmented = sorted({link for link in parser.links if "/augmented/" in link})
    assert augmented == ["t1/augmented/rollout-0/step-000-after.png", "t1/augmented/rollout-0/step-000-before.png",
                         "t1/augmented/rollout-0/step-000-zoom.png"]
    # The rollout without a pointer links its plain screenshots.
    assert "t1/rollout-1/" + layout.rollout("t1", 1).read().steps[0].before_screenshot in parser.links
    marked = Image.open(path.parent / augmented[1]).convert("RGB")
    assert marked.getpixel((100, 50))[0] > 200 and marked.getpixel((100, 50))[2] < 100  # red click marker
    assert html.count('class="rollout chosen"') == 1 and 'class="rollout chosen" id="rollout-0"' in html
    assert html.count("CHOSEN") == 1 and "SCRIPTED" not in html
    text = unescape(html)
    assert "The field got focus & turned blue" in text and "Candidate 1, F1.1: the field <turned> blue." in text
    assert "Put <apples> in the list" in text and "<apples>" not in html  # escaped
    assert "evaluator score: 1 " in text and "never used to choose" in text
    rows = [m for m in ("policy", "grounding", "narrative", "judge") if f"<td>{m}</td>" in html]
    assert rows == ["policy", "grounding", "narrative", "judge"]
    assert html.index("<td>policy</td>") < html.index("<td>grounding</td>") < html.index("<td>narrative</td>") \
        < html.index("<td>judge</td>")
    assert "$0.1800" in html  # the whole run


def test_augmented_images_are_written_once(tmp_path: Path) -> None:
    layout = _run(tmp_path, Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=1))
    write_report(layout)
    file = layout.task("t1").path / "augmented" / "rollout-0" / "step-000-zoom.png"
    first = file.stat().st_mtime_ns
    write_report(layout)
    assert file.stat().st_mtime_ns == first


def test_no_selection_and_scripted_models_are_shown(tmp_path: Path) -> None:
    layout = _run(tmp_path, Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=None,
                                      reasoning="no valid answer after 3 calls"),
                  model="scripted/demo")
    html = write_report(layout).read_text()
    assert "CHOSEN" not in html and 'class="rollout chosen"' not in html
    assert "no selection" in html and "no valid answer after 3 calls" in html
    assert html.count("badge scripted") >= 3  # the banner and each rollout


def _roles(html: str) -> dict[str, str]:
    """The models-per-module table as role -> the row's text."""
    table = html[html.index("<h2>models per module</h2>"):]
    table = table[: table.index("</table>")]
    rows = {}
    for row in table.split("<tr>")[2:]:
        cells = [unescape(re.sub(r"<[^>]+>", "", c.split(">", 1)[1].split("</td>")[0])) for c in row.split("<td")[1:]]
        rows[cells[0]] = " | ".join(cells[1:])
    return rows


def test_models_per_module_come_from_the_config_and_the_ledger(tmp_path: Path) -> None:
    layout = _run(tmp_path, Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=0))
    config = RunConfig(
        policy=ModelConfig(model="openai/gpt-5"),
        grounding=ModelConfig(model="vllm/ui-tars-1.5-7b", base_url="http://127.0.0.1:9/v1"),
        strategy="wide",
        wide=WideConfig(narrator_model=JudgeModelConfig(model="anthropic/claude-opus-4-1"),
                        judge_model=JudgeModelConfig(model="openai/gpt-5")),
    )
    layout.write_config(dump_config(config))
    Ledger(layout.ledger_path).append(_record("narrative", "anthropic/claude-opus-4-1", "t1", None, 0.01))
    html = write_report(layout).read_text()
    rows = _roles(html)
    assert list(rows) == ["policy", "grounding", "code_agent", "reflection", "narrator", "judge"]
    assert rows["grounding"] == "vllm/ui-tars-1.5-7b | openai/gpt-5 (1)"
    assert rows["code_agent"] == "openai/gpt-5 (the policy's) | no calls"
    # The ledger shows the narrative calls made by the judge's model before the narrator was set apart.
    assert rows["narrator"] == "anthropic/claude-opus-4-1 | openai/gpt-5 (1), anthropic/claude-opus-4-1 (1)"
    assert rows["judge"] == "openai/gpt-5 | openai/gpt-5 (1)"
    assert "guide" not in rows and "critic" not in rows


def test_unset_models_fall_back_as_the_config_says() -> None:
    config = dump_config(RunConfig(
        policy=ModelConfig(model="openai/gpt-5"),
        strategy="retry",
        critic=CriticConfig(),
        guide=GuideConfig(name="gprm", model=ModelConfig(model="openai/o3")),
        wide=WideConfig(judge_model=JudgeModelConfig(model="openai/gpt-5-mini")),
    ))
    config["worker"]["reflection"] = False
    rows = {r.role: r for r in module_models(config, {})}
    assert set(rows) == {"policy", "grounding", "code_agent", "guide", "critic"}  # no wide run: no judge
    assert (rows["guide"].configured, rows["guide"].inherited_from) == ("openai/o3", None)
    assert (rows["critic"].configured, rows["critic"].inherited_from) == ("openai/gpt-5", "policy")
    wide = dump_config(RunConfig(strategy="wide", wide=WideConfig(
        mixture=[{"model": "openai/gpt-5", "count": 5}, {"model": "anthropic/claude-sonnet-4-5", "count": 5}],
        judge_model=JudgeModelConfig(model="openai/gpt-5-mini"))))
    rows = {r.role: r for r in module_models(wide, {})}
    assert rows["policy"].configured == "openai/gpt-5*5,anthropic/claude-sonnet-4-5*5"
    assert (rows["narrator"].configured, rows["narrator"].inherited_from) == ("openai/gpt-5-mini", "judge")


def test_the_report_adds_the_ledger_up_per_run_task_and_rollout_in_one_pass(tmp_path: Path) -> None:
    """The report streams the ledger once (a whole benchmark's holds hundreds of thousands of
    calls); its totals are those of the records filtered by task and rollout."""
    layout = _run(tmp_path, Selection(strategy="mcq/narrative", candidates=[0, 1], chosen=0))
    Ledger(layout.ledger_path).append(_record("policy", "openai/gpt-5", "a-task-without-a-folder", 0, 0.5))
    records = Ledger.read(layout.ledger_path)
    view = collect_run(layout)
    assert list(view.modules.items()) == list(module_totals(records).items())
    (task,) = view.tasks
    assert task.modules == module_totals(r for r in records if r.tags.get("task") == "t1")
    assert [sorted(ro.modules) for ro in task.rollouts] == [["policy"], ["grounding"]]
    for ro in task.rollouts:
        assert ro.modules == module_totals(
            r for r in records if r.tags.get("task") == "t1" and r.tags.get("rollout") == str(ro.index))
    assert sum(n for row in view.models for n in row.called.values()) == len(records) == 5
