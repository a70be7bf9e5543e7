"""Helpers of the critic tests: real rollout folders with Pillow-made screenshots, and a
scripted model that answers each critic role through its own handler."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from contract_replies import canonical
from core.llm import ChatModel, ImagePart, Ledger, Script, ScriptRequest
from core.trajectory import RolloutDir, RolloutInfo, RunLayout, Step, Task

RUN_ID = "run-1"
COLOURS = ["white", "lightblue", "lightgreen", "khaki", "pink", "lavender", "salmon", "wheat",
           "orchid", "tan", "skyblue", "gold", "plum", "coral"]


def png(label: str, colour: str) -> bytes:
    """A 320x200 screen with a coloured background and a caption (real PNG bytes)."""
    img = Image.new("RGB", (320, 200), colour)
    ImageDraw.Draw(img).text((10, 90), label, fill="black")
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def build_rollout(root: Path, *, task_id: str = "task-a", k: int = 0, actions: int = 3,
                  instruction: str = "Type hello into the editor and save the file as notes.txt",
                  terminal: bool = True, screens: list[str] | None = None, score: float | None = None,
                  platform: str = "ubuntu", final_action: dict[str, Any] | None = None,
                  captions: bool = True) -> tuple[Task, RolloutDir]:
    """A finished rollout: `actions` acting steps with before/after screens, then (when
    `terminal`) a done step with only a before-screen. Screen i is `screens[i]` (a colour);
    by default every screen differs. Without `captions` screens of one colour are identical."""
    layout = RunLayout(root, RUN_ID, durable=False)
    task = Task(id=task_id, instruction=instruction, platform=platform)  # type: ignore[arg-type]
    task_dir = layout.task(task_id)
    task_dir.write_task(task)
    rd = task_dir.rollout(k)
    rd.start(RolloutInfo(run_id=RUN_ID, task_id=task_id, rollout=k, model="scripted/policy",
                         started_at=time.time()))
    colours = screens or COLOURS[: actions + 1]
    for i in range(actions):
        step = Step(index=i, thought=f"I will do part {i} of the task",
                    action={"kind": "click", "element_description": f"button {i}"})
        rd.append_step(step, {"before": png(f"screen {i}" if captions else "", colours[i]),
                              "after": png(f"screen {i + 1}" if captions else "", colours[i + 1])})
    if terminal:
        rd.append_step(Step(index=actions, thought="The task is complete.", action=final_action or {"kind": "done"}),
                       {"before": png(f"screen {actions}" if captions else "", colours[actions])})
    rd.finish("done" if terminal else "step_limit", score=score)
    return task, rd


def role_of(request: ScriptRequest) -> str:
    """Which critic role a request comes from, by its system prompt."""
    system = request.messages[0].text()
    for marker, role in (("You choose the milestones", "selector_initial"),
                         ("You choose further milestones", "selector_followup"),
                         ("You verify one milestone", "verifier"),
                         ("You audit the evidence", "reviewer"),
                         ("You decide whether a computer-use agent completed", "judge"),
                         ("from the last screens", "lastk"),
                         ("You check whether one screen", "sequential")):
        if marker in system:
            return role
    raise AssertionError(f"unknown critic request: {system[:80]!r}")


def user_text(request: ScriptRequest) -> str:
    """Text of every user message of the request (retries add more)."""
    return "\n".join(m.text() for m in request.messages if m.role == "user")


def images_of(request: ScriptRequest) -> list[ImagePart]:
    return [p for m in request.messages for p in m.parts() if isinstance(p, ImagePart)]


def asked_step(request: ScriptRequest) -> int:
    match = re.search(r"^Step: (\d+)$", request.messages[1].text(), re.M)
    assert match, "not a verifier request"
    return int(match.group(1))


def js(**obj: Any) -> str:
    return json.dumps(obj)


#: The QA block a judge reply must carry, for a task that asks no question.
NOT_QA: dict[str, Any] = {"is_qa": False}
PAPER_NOT_QA: dict[str, Any] = {"is_qa_task": False, "last_agent_answer": "", "compliance_verdict": "not_applicable",
                                "notes": ""}


Handler = Callable[[ScriptRequest], str]


@dataclass
class Roles:
    """Answers each request with the handler of its role; records the requests by role.

    A handler is a callable or a list of replies (strings or callables) used in order.
    """

    handlers: dict[str, Any]
    """Role (``selector``, ``selector_initial`` ...) to a `Handler` or a list of replies."""
    seen: dict[str, list[ScriptRequest]] = field(default_factory=dict)

    def __call__(self, request: ScriptRequest) -> str:
        return canonical(request, self._answer(request))

    def _answer(self, request: ScriptRequest) -> str:
        role = role_of(request)
        self.seen.setdefault(role, []).append(request)
        key = role if role in self.handlers else role.split("_")[0]
        handler = self.handlers.get(key)
        if handler is None:
            raise AssertionError(f"no handler for {role}")
        if isinstance(handler, list):
            if not handler:
                raise AssertionError(f"{role} called more often than scripted")
            handler = handler.pop(0)  # type: ignore[assignment]
            if isinstance(handler, str):
                return handler
        return handler(request)  # type: ignore[operator]

    def count(self, role: str) -> int:
        return sum(len(v) for k, v in self.seen.items() if k == role or k.startswith(role + "_"))

    def model(self, calls: int, ledger: Ledger | None = None, name: str = "critic") -> tuple[ChatModel, Script]:
        """A scripted model allowing exactly `calls` calls, all answered by this router."""
        script = Script(name, [self] * calls)
        return ChatModel.from_name(f"scripted/{name}", ledger=ledger), script
