"""Defensive parsing of narrator and judge replies."""

from __future__ import annotations

import pytest

from bjudge import parse_choice, read_facts
from core.replies import ReplyProblem


@pytest.mark.parametrize(("reply", "facts"), [
    ("<thoughts>x</thoughts><facts>\n- A opened\n- B typed\n</facts>", ["A opened", "B typed"]),
    ("<facts>\n1. first\n2) second\n* third\n</facts>", ["first", "second", "third"]),
    ('<facts>["json one", "json two"]</facts>', ["json one", "json two"]),
    ('<facts>```json\n{"facts": ["fenced"]}\n```</facts>', ["fenced"]),
    ("<answer>\n- from the answer tag\n  continued line\n</answer>", ["from the answer tag continued line"]),
    ('{"facts": ["bare json"]}', ["bare json"]),
    ("<facts></facts>", []),
])
def test_facts_are_read_from_tagged_or_json_sections(reply: str, facts: list[str]) -> None:
    assert read_facts(reply) == facts


@pytest.mark.parametrize(("reply", "problem"), [
    ("", "no <facts>"), ("The click opened a menu.", "no <facts>"), ("<thoughts>only thoughts</thoughts>", "no <facts>"),
    ("[1, 2", "cut"), ("<facts>\n- cut off by the token limit", "never closed"),
    ("<facts>- a</facts> then <facts>- b</facts>", "different <facts> sections"),
])
def test_replies_without_one_whole_facts_section_are_refused(reply: str, problem: str) -> None:
    with pytest.raises(ReplyProblem, match=problem):
        read_facts(reply)


def test_fact_lists_are_cut_to_the_limit() -> None:
    reply = "<facts>\n" + "\n".join(f"- f{i}" for i in range(30)) + "\n</facts>"
    assert read_facts(reply, limit=5) == ["f0", "f1", "f2", "f3", "f4"]


def test_a_single_in_range_answer_is_accepted() -> None:
    choice = parse_choice("<thoughts>2 is best because F3.1</thoughts>\n<answer>\nCandidate 2\n</answer>", 1, 3)
    assert choice.value == 2 and choice.problem is None and "F3.1" in choice.reasoning


@pytest.mark.parametrize(("reply", "problem"), [
    ("I pick the second one.", "no <answer>"),
    ("<answer>the second</answer>", "no integer"),
    ("<answer>4</answer>", "out of range"),
    ("The format is <answer>1</answer>.\nCandidate 3 saved the file.\n<answer>3", "several answers"),
    ("<answer>0</answer>", "out of range"),
    ("<answer>-1</answer>", "out of range"),
    ("<answer>1 or 3</answer>", "several answers"),
    ("<answer>1</answer> ... on reflection <answer>2</answer>", "several answers"),
    ("<answer>2.5</answer>", "no integer"),
])
def test_missing_out_of_range_and_several_answers_are_refused(reply: str, problem: str) -> None:
    choice = parse_choice(reply, 1, 3)
    assert choice.value is None and choice.problem is not None and problem in choice.problem


def test_a_repeated_identical_answer_is_one_answer() -> None:
    assert parse_choice("<answer>3</answer> so, <answer>3</answer>", 1, 3).value == 3


def test_pointer_events_are_read_from_pyautogui_code_without_running_it(tmp_path) -> None:
    from bjudge import pointer_events

    marker = tmp_path / "ran"
    code = (f"import pyautogui; open({str(marker)!r}, 'w')\n"
            "pyautogui.moveTo(10, 20); pyautogui.dragTo(300, 40, duration=1)\n"
            "pyautogui.doubleClick(x=5.6, y=6)\npyautogui.scroll(-3, x=7, y=8)\npyautogui.click((1, 2))\n"
            "pyautogui.click(__import__('os').getpid(), 3)\nother.click(1, 1)")
    events = pointer_events(code)
    assert [(e.kind, e.x, e.y) for e in events] == [("move", 10, 20), ("drag", 300, 40), ("click", 6, 6),
                                                   ("move", 7, 8), ("click", 1, 2)]
    assert not marker.exists()
    assert pointer_events("pyautogui.click(") == [] and pointer_events(None) == []
