"""What simulated models (``sim/...``) say, role by role, in each role's reply format.

`core.llm.sim` decides how long a call takes, what it costs and when the account refuses
it; this module writes the text, so that the real parsers, the worker, the narrator and
the judge handle it as they would a model's. The policy of one rollout follows a plan
drawn from the task's instruction, the rollout's seed and the model (the figures of the
``behaviour`` section of core/llm/sim/models.yaml):

- a task's chance of success is ``Beta(m*c, (1-m)*c)`` around the model's mean ``m``;
- the rollout takes ``steps`` steps (right-skewed); if it succeeds, the step before its
  last types `GOAL_MARK`, which the simulated environment scores 1; it ends with
  ``agent.done()`` (or ``agent.fail()`` for a share of the unsuccessful ones);
- a share of its replies do not parse and are re-asked, as a real model's sometimes are.

The narrator writes what each action did, and says the goal was reached where the action
typed the mark; the judge picks, with ``judge_accuracy``, a candidate whose facts say so
when the candidates disagree. Everything is seeded by the request's content, so a run
and its resume say the same things.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping
from typing import Any

from core.distributions import Skewed
from core.llm.sim import SimRequest, set_responder
from environments.sim import GOAL_MARK

__all__ = ["sim_reply"]

_TASK_STEP = re.compile(r"Task: (?P<task>.*?)\nStep (?P<n>\d+)\.\n", re.DOTALL)
_EXAMPLE = re.compile(r"e\.g\. \((\d+(?:\.\d+)?), (\d+(?:\.\d+)?)\)")
_CANDIDATE = re.compile(r"===== Candidate (\d+) =====")
_GOAL_FACT = "The task's goal state is now visible on the screen (simulated)"
_ELEMENTS = ("the File menu", "the Save button", "the search field", "the first row of the table",
             "the OK button of the dialog", "the address bar", "the Format menu", "the sidebar's first item")
_KEYS = (["ctrl", "s"], ["ctrl", "a"], ["ctrl", "c"], ["ctrl", "v"], ["enter"], ["tab"], ["ctrl", "z"])
_WORDS = ("report", "total", "=SUM(B2:B9)", "notes", "2024", "draft", "hello")


def _rng(*parts: object) -> random.Random:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _figure(behaviour: Mapping[str, Any], key: str, default: float) -> float:
    value = behaviour.get(key, {})
    return float(value.get("value", default)) if isinstance(value, Mapping) else float(value)


def _success_mean(behaviour: Mapping[str, Any], model: str) -> float:
    success = behaviour.get("success", {})
    models = success.get("models", {}) or {}
    return float(models.get(model, success.get("default", 0.6)))


def _fenced(thought: str, call: str) -> str:
    return f"{thought}\n```python\n{call}\n```"


def _policy(request: SimRequest) -> str:
    text = "\n".join(m.text() for m in request.messages if m.role == "user")
    found = _TASK_STEP.search(text)
    task = found.group("task") if found else text[:200]
    step = int(found.group("n")) if found else 1
    behaviour = request.behaviour
    seed = request.config.seed
    asked = sum(1 for m in request.messages if m.role == "assistant")  # re-asks of this step
    if _rng("format", task, seed, request.model, step, asked).random() < _figure(behaviour, "format_error_rate", 0.0) \
            and asked == 0:
        return "I will click on the button to continue."  # no action block: the worker re-asks
    mean = min(max(_success_mean(behaviour, request.model), 0.01), 0.99)
    concentration = _figure(behaviour, "task_concentration", 1.2)
    chance = _rng("task", task, request.model).betavariate(mean * concentration, (1 - mean) * concentration)
    plan = _rng("rollout", task, seed, request.model)
    succeeds = plan.random() < chance
    steps_dist = Skewed.model_validate({k: v for k, v in behaviour.get("steps", {"median": 20}).items()
                                        if k in ("median", "mean", "cap")})
    length = max(round(steps_dist.draw(plan)), 2)
    gives_up = plan.random() < _figure(behaviour, "fail_share", 0.0)
    if step >= length:
        if succeeds:
            return _fenced("The screen shows the task completed.", "agent.done()")
        if gives_up:
            return _fenced("This cannot be done on this computer.", "agent.fail()")
        return _fenced("I believe the task is complete.", "agent.done()")
    if step == length - 1 and succeeds:
        return _fenced("One last entry completes the task.", f"agent.type(text='{GOAL_MARK} done', enter=True)")
    move = _rng("move", task, seed, request.model, step)
    kind = move.random()
    if kind < 0.5:
        element = move.choice(_ELEMENTS)
        return _fenced(f"I open {element}.", f'agent.click("{element}", 1, "left")')
    if kind < 0.7:
        return _fenced("I type the value.", f"agent.type(text='{move.choice(_WORDS)}', enter=False)")
    if kind < 0.9:
        return _fenced("A shortcut does it.", f"agent.hotkey({move.choice(_KEYS)!r})")
    return _fenced("I scroll to see more.", 'agent.scroll("the main window", -5, False)')


def _grounding(request: SimRequest) -> str:
    text = "\n".join(m.text() for m in request.messages)
    example = _EXAMPLE.search(text)
    if example is not None:
        return f"({example.group(1)}, {example.group(2)})"
    return "(500, 500)"


def _narrative(request: SimRequest) -> str:
    text = "\n".join(m.text() for m in request.messages if m.role == "user")
    if GOAL_MARK in text:
        facts = ["Text was typed into the focused window", _GOAL_FACT]
    elif "click" in text.lower():
        facts = ["A menu or dialog opened where the pointer clicked"]
    elif "hotkey" in text.lower() or "press" in text.lower():
        facts = ["The focused window reacted to the key press"]
    elif "scroll" in text.lower():
        facts = ["The window's content moved up"]
    else:
        facts = ["Text was typed into the focused window"]
    return "<thoughts>Compared the two screens.</thoughts>\n<facts>\n" + "\n".join(f"- {f}" for f in facts) + "\n</facts>"


def _judge(request: SimRequest) -> str:
    text = "\n".join(m.text() for m in request.messages if m.role != "system")
    sections = _CANDIDATE.split(text)
    numbers = [int(n) for n in sections[1::2]]
    if not numbers:
        return "<thoughts>No candidate was shown.</thoughts>\n<answer>1</answer>"
    reached = [n for n, body in zip(sections[1::2], sections[2::2], strict=False) if _GOAL_FACT in body]
    reached_numbers = [int(n) for n in reached]
    others = [n for n in numbers if n not in reached_numbers]
    rng = _rng("judge", text)
    accuracy = _figure(request.behaviour, "judge_accuracy", 0.8)
    if reached_numbers and (not others or rng.random() < accuracy):
        pick = rng.choice(reached_numbers)
    else:
        pick = rng.choice(others or numbers)
    return f"<thoughts>Candidate {pick} fulfils the request best.</thoughts>\n<answer>{pick}</answer>"


def sim_reply(request: SimRequest) -> str:
    """The simulated model's reply to `request`, by the module that sent it."""
    module = request.module
    if module == "policy":
        return _policy(request)
    if module == "grounding":
        return _grounding(request)
    if module == "reflection":
        return "ON-TRACK\nThe steps so far move towards the goal."
    if module == "narrative":
        return _narrative(request)
    if module == "judge":
        return _judge(request)
    if module == "code_agent":
        return "<thoughts>\nDone.\n</thoughts>\n<answer>\nDONE\n</answer>"
    if module == "code_summary":
        return "<summary>The code ran.</summary>\n<checklist>\n- Check the result on screen.\n</checklist>"
    raise ValueError(f"simulated models have no replies for module {module!r} (policy, grounding, reflection, "
                     "narrative, judge, code_agent, code_summary)")


set_responder(sim_reply)
