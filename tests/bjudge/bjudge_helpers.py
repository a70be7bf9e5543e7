"""Helpers shared by the judge's tests: synthetic screens, scripted narrator and judge
replies, and rollouts written through the real run layout."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from PIL import Image, ImageDraw

from contract_replies import reply_in
from core.images import encode_png
from core.llm.scripted import ScriptRequest
from core.trajectory import PointerEvent, RolloutInfo, RolloutStatus, RunLayout, Step

FACT_REPLY = "<thoughts>compared the screens</thoughts>\n<facts>\n- {fact}\n</facts>"


def screen(seed: int, size: tuple[int, int] = (640, 400)) -> bytes:
    """A deterministic screen-like PNG: a grey desktop with a few coloured windows."""
    img = Image.new("RGB", size, (90, 90, 110))
    draw = ImageDraw.Draw(img)
    for i in range(4):
        x = (seed * 37 + i * 150) % max(1, size[0] - 120)
        y = (seed * 53 + i * 90) % max(1, size[1] - 80)
        draw.rectangle([x, y, x + 110, y + 70], fill=((seed * 40 + i * 60) % 256, 200, (i * 70) % 256))
        draw.text((x + 5, y + 5), f"win {seed}.{i}", fill=(0, 0, 0))
    return encode_png(img)


def user_text(request: ScriptRequest) -> str:
    return "\n".join(m.text() for m in request.messages if m.role == "user")


def candidate_sections(text: str) -> dict[int, str]:
    """Shown position -> that candidate's text, split on the judge prompt's headers."""
    pieces = re.split(r"===== Candidate (\d+) =====", text)
    return {int(pieces[i]): pieces[i + 1] for i in range(1, len(pieces) - 1, 2)}


def answer_for(marker: str) -> Callable[[ScriptRequest], str]:
    """A scripted judge reply that answers the shown position whose section holds `marker`."""

    def reply(request: ScriptRequest) -> str:
        sections = candidate_sections(user_text(request))
        hits = [k for k, body in sections.items() if marker in body]
        assert len(hits) == 1, f"expected one candidate with {marker!r}, found {hits}"
        thoughts = f"Candidate {hits[0]} shows {marker}; the others do not."
        return reply_in(request, f"<thoughts>{thoughts}</thoughts>\n<answer>{hits[0]}</answer>",
                        {"thoughts": thoughts, "answer": hits[0]})

    return reply


def fact_from_action(request: ScriptRequest) -> str:
    """A scripted narrator: the fact repeats the action's `note` field from the prompt."""
    found = re.search(r'"note": "([^"]*)"', user_text(request))
    fact = found.group(1) if found else "No visible change."
    return reply_in(request, FACT_REPLY.format(fact=fact), {"thoughts": "compared the screens", "facts": [fact]})


def write_rollout(layout: RunLayout, task_id: str, k: int, notes: Sequence[str],
                  status: RolloutStatus = "done", score: float | None = None, seed: int = 0) -> None:
    """A finished rollout of clicks whose action records carry `notes` (one step each)."""
    rd = layout.rollout(task_id, k)
    rd.start(RolloutInfo(run_id=layout.run_id, task_id=task_id, rollout=k, model="scripted/policy", started_at=0.0))
    previous = screen(seed * 100)
    for i, note in enumerate(notes):
        after = screen(seed * 100 + i + 1)
        step = Step(index=i, action={"kind": "click", "note": note}, code=f"pyautogui.click({50 + i}, 60)",
                    pointer=[PointerEvent(kind="click", x=50 + i, y=60)])
        rd.append_step(step, {"before": previous, "after": after})
        previous = after
    rd.finish(status, score=score)
