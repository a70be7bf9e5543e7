"""A guided step on a real desktop: K candidates from a scripted policy, the guide scores
them, the higher-scored one is executed in mousepad, and the next screen shows it."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from gprm_screens import LiveDesktop
from gprm_scripts import route

from core.llm import ChatMessage, ChatModel, GenerateConfig, Reply, Script, ScriptRequest
from gprm import Candidate, GuiPra, HistoryStep, LocalUIParser, propose_candidates

GOOD = "Invoice approved by Dana"
BAD = "Invoice rejected twice"


def _policy_reply(request: ScriptRequest) -> str:
    text = GOOD if request.config.seed == 42 else BAD
    return json.dumps({"thought": f"type {text!r}", "action": f"type_text(text={text!r})"})


def _score(request: ScriptRequest) -> str:
    good = f"Action: type_text(text={GOOD!r})" in request.messages[-1].text()
    return f'<eval>{{"score": {9 if good else 2}, "reason": "scripted"}}</eval>'


@pytest.mark.desktop
async def test_the_higher_scored_candidate_is_executed(live_desktop: LiveDesktop) -> None:
    policy_script = Script("policy", [_policy_reply] * 3)
    policy = ChatModel.from_name("scripted/policy")

    async def propose(config: GenerateConfig) -> Candidate:
        out = await policy.generate([ChatMessage(role="user", content="next step?")], module="policy", config=config)
        reply = json.loads(out.text)
        return Candidate(thought=reply["thought"], action=reply["action"], seed=config.seed)

    batch = await propose_candidates(propose, 3)
    policy_script.assert_done()
    assert [c.seed for c in batch.values] == [30, 42, 3407]

    guide_script = Script("guide", [Reply(text=route("point", target="'Invoice number'")),
                                    Reply(text='{"actions": [{"name": "terminate", "arguments": {"answer": "ok"}}]}'),
                                    *[_score] * 3])
    parser = LocalUIParser("tesseract")
    guide = GuiPra(ChatModel.from_name("scripted/guide"), parser=parser)
    before = live_desktop.screenshot()
    history = [HistoryStep(thought="open the notes", action="open(app='mousepad')", observation="ok")]
    decision = await guide.choose("Add the approval line to the notes", before, history, batch.values)
    guide_script.assert_done()
    assert decision.index == 1 and decision.candidate.seed == 42
    point = decision.record.routing.tools[0]  # type: ignore[union-attr]
    assert point.name == "point" and point.ok and "Invoice number 48213" in point.evidence

    # execute the chosen action the way a desktop controller would
    typed = re.fullmatch(r"type_text\(text='(.*)'\)", decision.candidate.action)
    assert typed is not None
    live_desktop.xdotool("windowfocus", "--sync", live_desktop.window)  # no window manager: focus directly
    live_desktop.xdotool("key", "ctrl+End")
    live_desktop.xdotool("type", "--delay", "5", typed[1])
    contents = ""
    for _ in range(20):  # the editor repaints a moment after the last key
        after = await parser.parse(live_desktop.screenshot())
        contents = " | ".join(e.content for e in after.elements)
        if GOOD in contents:
            break
        await asyncio.sleep(0.25)
    assert GOOD in contents and BAD not in contents


@pytest.fixture(scope="module")
def accessible_editor(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """mousepad on Xvfb with a session bus, so it registers with AT-SPI; yields its env."""
    import os
    import shutil
    import subprocess
    import time
    from pathlib import Path

    from gprm_screens import start_xvfb

    if not (shutil.which("Xvfb") and shutil.which("mousepad") and shutil.which("dbus-daemon")
            and Path("/usr/bin/python3").exists()):
        pytest.skip("Xvfb, mousepad and dbus-daemon are needed")
    if subprocess.run(["/usr/bin/python3", "-c", "import pyatspi"], capture_output=True, check=False).returncode:
        pytest.skip("python3-pyatspi is needed for the AT-SPI tree")
    root = tmp_path_factory.mktemp("a11y")
    (root / "notes.txt").write_text("groceries\n")
    xvfb, display = start_xvfb((1280, 800))
    env = {"PATH": os.environ["PATH"], "DISPLAY": display, "HOME": str(root), "XDG_RUNTIME_DIR": str(root),
           "DBUS_SESSION_BUS_ADDRESS": f"unix:path={root / 'bus'}", "GSETTINGS_BACKEND": "memory"}
    procs = [subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--nopidfile",
                               f"--address=unix:path={root / 'bus'}"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 15
        while not (root / "bus").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        procs.append(subprocess.Popen(["mousepad", "--disable-server", str(root / "notes.txt")], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # Ready once the editor's menus are in its AT-SPI tree (registration takes a moment
        # after the window appears; a fixed wait was either too long or, under load, too short).
        dump = Path(__file__).parents[2] / "benchmarks" / "gprm_tools" / "atspi_dump.py"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            tree = subprocess.run(["/usr/bin/python3", str(dump)], env=env, capture_output=True, text=True,
                                  timeout=30, check=False).stdout
            if 'name="File"' in tree and 'name="Search"' in tree:
                break
            time.sleep(0.2)
        yield env
    finally:
        for proc in [*reversed(procs), xvfb]:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.desktop
async def test_a_guided_step_perceives_a_real_desktop_through_its_atspi_tree(accessible_editor) -> None:  # type: ignore[no-untyped-def]
    """The element list and Point come from the live AT-SPI tree (OSWorld's XML form, dumped
    by benchmarks/gprm_tools/atspi_dump.py), not from OCR."""
    import os
    import subprocess
    from pathlib import Path

    import mss
    import mss.tools

    dump = Path(__file__).parents[2] / "benchmarks" / "gprm_tools" / "atspi_dump.py"

    async def fetch() -> str:
        proc = await asyncio.create_subprocess_exec("/usr/bin/python3", str(dump), env=accessible_editor,
                                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode:
            raise RuntimeError(err.decode()[-300:])
        return out.decode()

    os.environ["DISPLAY"] = accessible_editor["DISPLAY"]
    with mss.MSS() as grab:
        raw = grab.grab(grab.monitors[0])
        png = mss.tools.to_png(raw.rgb, raw.size)
    assert png is not None

    def score(request: ScriptRequest) -> str:
        good = "Action: click(element='Search')" in request.messages[-1].text()
        return f'<eval>{{"score": {8 if good else 3}, "reason": "scripted"}}</eval>'

    script = Script("tree-guide", [Reply(text=route("ui_parser")),
                                   Reply(text=route("point", description="Search menu")), score, score])
    guide = GuiPra(ChatModel.from_name("scripted/tree-guide"), tree=fetch)
    decision = await guide.choose("Find the word groceries", png, [],
                                  [Candidate(action="click(element='Help')"), Candidate(action="click(element='Search')")])
    script.assert_done()
    assert decision.index == 1 and decision.record.error is None
    parse, point = decision.record.routing.tools  # type: ignore[union-attr]
    assert parse.ok and point.ok and "menu 'Search'" in point.evidence and "a11y" in point.evidence
    assert set(decision.images) == {"ui_parser", "point"}
    scorer_text = script.requests[-1].messages[-1].text()
    assert "interactive menu 'File'" in scorer_text and "interactive menu 'Search'" in scorer_text
