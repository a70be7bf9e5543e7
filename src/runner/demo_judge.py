"""The scripted narrator and judge of the demo: replies written from the prompt's text, for
runs of the scripted demo policy with no judge model (no key needed, labelled SCRIPTED).

The narrator states what the action text says (typed text, keys pressed, clicks); the
judge picks the first candidate whose rollout ended with the agent declaring the task
complete, else candidate 1. It never sees an evaluator score. It exists so the whole
wide-scaling pipeline (narration while rollouts run, one MCQ call, selection, report)
runs for real without a model; it says nothing about a model's judgement.
"""

from __future__ import annotations

import json
import re

from core.llm import Script, ScriptRequest

__all__ = ["DEMO_JUDGE_MODEL", "DEMO_JUDGE_NOTE", "demo_judge_reply", "register_demo_judge"]

DEMO_JUDGE_MODEL = "scripted/demo-judge"
DEMO_JUDGE_NOTE = "scripted demo narrator and judge: replies come from fixed rules, not from a model"

_ACTION = re.compile(r"^\s*(\{.*\})\s*$", re.MULTILINE)
_CANDIDATE = re.compile(r"===== Candidate (\d+) =====")


def _facts(text: str) -> list[str]:
    facts = []
    for raw in _ACTION.findall(text):
        try:
            action = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(action, dict) or "kind" not in action:
            continue
        kind = action["kind"]
        if kind == "type":
            facts.append(f"The text {action.get('text')!r} was typed into the focused window")
        elif kind == "hotkey":
            facts.append(f"The keys {'+'.join(map(str, action.get('keys', [])))} were pressed")
        elif kind == "click":
            facts.append(f"A click landed on {action.get('element_description', 'the screen')!s}")
        else:
            facts.append(f"The agent performed a {kind} action")
    return facts or ["No visible change could be established"]


def demo_judge_reply(request: ScriptRequest) -> str:
    """The narrator's or the judge's reply to `request`, by its system prompt: in the prompt's
    tags, or as the JSON object a structured request's schema asks for."""
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    text = "\n".join(m.text() for m in request.messages if m.role != "system")
    structured = request.config.reply_format is not None
    if system.startswith("You describe what a single computer action"):
        thoughts, facts = "Read from the action text.", _facts(text)
        if structured:
            return json.dumps({"thoughts": thoughts, "facts": facts})
        return f"<thoughts>{thoughts}</thoughts>\n<facts>\n" + "\n".join(f"- {fact}" for fact in facts) + "\n</facts>"
    sections = _CANDIDATE.split(text)
    thoughts, chosen = "No candidate declared the task complete.", 1
    for number, body in zip(sections[1::2], sections[2::2], strict=False):
        if "declared the task complete" in body:
            thoughts, chosen = f"Candidate {number} ended by declaring the task complete.", int(number)
            break
    if structured:
        return json.dumps({"thoughts": thoughts, "answer": chosen})
    return f"<thoughts>{thoughts}</thoughts>\n<answer>{chosen}</answer>"


def register_demo_judge() -> str:
    """Register the scripted narrator and judge; returns its model name."""
    Script(DEMO_JUDGE_MODEL.split("/", 1)[1], [demo_judge_reply] * 2000)
    return DEMO_JUDGE_MODEL
