"""GUI-PRA's perception end to end on a real desktop: a guided rollout of the mousepad task,
every reply served over HTTP by the local OpenAI protocol server, the router asking for the
UI parser and then Point. The element list must come from the desktop's own accessibility
tree (the controller's `/accessibility`, inside the desktop's confinement), name the real
editor's menus, Point must resolve an unquoted description to one of those elements, and
report.html must show the list and the Point star for the step."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from PIL import Image

from contract_replies import structured
from core.llm import ScriptRequest
from environments.local import LocalEnvironment
from gprm import GuideRecord
from runner.demo_policy import DEMO_PLANS, PlannedReplies
from runner.report import write_report
from runner.tasks import resolve_task

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

TASK = "mousepad-append-line"
#: An unquoted description, as models write them: role word and label, no quotes.
TARGET = "File menu"


def _system(request: ScriptRequest) -> str:
    return next((m.text() for m in request.messages if m.role == "system"), "")


def perceiving_guide() -> tuple[Callable[[ScriptRequest], str], list[str]]:
    """The solver's plan for the policy; the guide routes to the UI parser first and Point
    on `TARGET` second (the loop's cap of two), and scores every candidate 8. Returns the
    responder and the texts the scorer was shown."""
    plan = PlannedReplies(plan=list(DEMO_PLANS[TASK].plan))
    scored: list[str] = []

    def reply(request: ScriptRequest) -> str:
        system = _system(request)
        if system.startswith("You are a process reward model"):
            scored.append("\n".join(m.text() for m in request.messages))
            return 'I compared it with the screen.\n<eval>{"score": 8, "reason": "on plan"}</eval>'
        if system.startswith("You gather visual evidence"):
            if "- ui_parser:" in system:
                return json.dumps({"thought": "what is on screen", "actions": [{"name": "ui_parser", "arguments": {}}]})
            return json.dumps({"thought": "is the menu there",
                               "actions": [{"name": "point", "arguments": {"target": TARGET}}]})
        return plan(request)

    return structured(reply), scored


#: Mousepad's menu bar, as its accessibility tree names it.
MENUS = ["File", "Edit", "Search", "View", "Document", "Help"]
_LINE = re.compile(r"^\[(\d+)\] (interactive )?(\w+) '(.*)' at \[(\d+), (\d+), (\d+), (\d+)\]$")


def _elements(evidence: str) -> dict[int, tuple[str, str, tuple[int, ...]]]:
    """The UI parser's listing: id -> (role, name, box)."""
    out = {}
    for line in evidence.splitlines()[1:]:
        m = _LINE.match(line)
        assert m, line
        out[int(m[1])] = (m[3], m[4], tuple(int(v) for v in m.groups()[4:]))
    return out


async def test_guided_rollout_perceives_through_the_element_tree(harness, local_env: LocalEnvironment) -> None:
    task = resolve_task(TASK)
    responder, scored = perceiving_guide()
    ran = await harness.run(task, local_env, responder, run_id="guided-tree",
                            config={"guide": {"name": "gprm", "candidates": 2}})
    assert ran.outcome.result.status == "done" and ran.outcome.score == 1.0
    steps = ran.trajectory.steps
    assert len(steps) == 5
    rd = ran.layout.rollout(task.id, 0)
    for step in steps:
        assert step.guide is not None
        images = step.guide.pop("images")
        record = GuideRecord.model_validate(step.guide)
        assert record.error is None and record.routing is not None and record.routing.stop == "cap"
        parser, point = record.routing.tools
        # Perception came from the desktop's element tree, not the OCR fallback.
        assert (parser.name, parser.ok, parser.perception, parser.perception_note) == ("ui_parser", True, "a11y", None)
        elements = _elements(parser.evidence)
        menus = [(name, box) for role, name, box in elements.values() if role == "menu"]
        assert [name for name, _ in menus] == MENUS
        assert all(box[1] < 80 and box[3] - box[1] < 40 for _, box in menus)  # the menu bar, at the top
        # Point resolved the unquoted description to the tree's File menu, and starred its centre.
        assert (point.name, point.ok, point.perception, point.arguments) == ("point", True, "a11y", {"target": TARGET})
        m = re.search(r"pixel \((\d+), (\d+)\).*\[element (\d+): menu 'File' at \[[\d, ]+\], from the a11y parser\]",
                      point.evidence)
        assert m, point.evidence
        x, y, element = int(m[1]), int(m[2]), int(m[3])
        role, name, (left, top, right, bottom) = elements[element]
        assert (role, name) == ("menu", "File") and left <= x < right and top <= y < bottom
        assert images == {"ui_parser": f"step-{step.index:04d}-extra-guide_ui_parser.png",
                          "point": f"step-{step.index:04d}-extra-guide_point.png"}
        star = Image.open(rd.path / images["point"]).convert("RGB")
        shot = Image.open(rd.path / images["ui_parser"]).convert("RGB")
        assert star.getpixel((x, y)) == (255, 0, 0) and star.size == shot.size == (1920, 1080)
    # The scorer was shown the element list (the paper's e_t) with the real menus.
    assert len(scored) == 2 * len(steps)
    assert all("menu 'Document'" in text for text in scored)

    page = write_report(ran.layout).read_text()
    assert page.count("perceived by a11y (the element tree)") == 2 * len(steps)
    assert page.count('<pre class="elements">') == len(steps) and "fallback:" not in page
    listing = page.split('<pre class="elements">', 1)[1].split("</pre>", 1)[0]
    assert all(f"interactive menu &#x27;{name}&#x27;" in listing for name in MENUS)
    for step in steps:
        assert f'src="{task.id}/rollout-0/step-{step.index:04d}-extra-guide_point.png"' in page
    assert page.count("guide: point</figcaption>") == len(steps)
