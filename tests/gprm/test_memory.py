"""Dynamic memory: no calls up to the threshold; suffix-only retrieval; progressive summary."""

from __future__ import annotations

import json

import pytest

from core.llm import ChatModel, Reply, Script
from gprm import DynamicMemory, HistoryStep, ReplyError, validate_retrieval
from gprm.history import history_lines


def _history(n: int) -> list[HistoryStep]:
    return [HistoryStep(thought=f"thinking {i}", action=f"click(element='B{i}')", observation="ok")
            for i in range(1, n + 1)]


def _keep_last(k: int):
    def reply(request) -> str:  # type: ignore[no-untyped-def]
        text = request.messages[1].text()
        steps = json.loads(text[text.index("["): text.index("]\n") + 1])
        return json.dumps(["" for _ in steps[:-k]] + steps[-k:])
    return reply


async def test_no_memory_calls_up_to_the_threshold() -> None:
    script = Script("mem", [])
    memory = DynamicMemory(ChatModel.from_name("scripted/mem"), threshold=5)
    for n in range(6):
        condensed = await memory.condense("goal", _history(n))
        assert not condensed.record.triggered and condensed.summary is None
        assert condensed.recent == _history(n) and condensed.record.calls == 0
    assert script.requests == []


async def test_past_the_threshold_recent_steps_are_kept_and_the_rest_summarised() -> None:
    script = Script("mem", [_keep_last(2), Reply(text="The agent clicked B1 to B4.")])
    memory = DynamicMemory(ChatModel.from_name("scripted/mem"), threshold=5)
    condensed = await memory.condense("goal", _history(6))
    assert condensed.record.triggered and condensed.record.retrieval == "model"
    assert condensed.record.kept == [5, 6] and condensed.first_recent == 5
    assert condensed.summary == "The agent clicked B1 to B4." and condensed.record.summarised_upto == 4
    assert condensed.lines()[0].startswith("Step 5 -")
    summary_prompt = script.requests[1].messages[1].text()
    assert "Step 4 -" in summary_prompt and "Step 5 -" not in summary_prompt
    assert all(r.module == "prm" for r in script.requests)
    script.assert_done()


@pytest.mark.parametrize(
    "reply",
    [
        '["Step 1", "", "", "", "", "Step 6"]',  # a gap
        '["", "", "", "Step 4", "Step 5", ""]',  # does not reach the last step
        '["", "", "Step 6"]',  # wrong length
        '["", "", "", "", "", ""]',  # nothing kept
        "I would keep the last two steps.",  # no list
    ],
)
async def test_a_non_suffix_retrieval_falls_back_to_the_last_m_steps(reply: str) -> None:
    script = Script("mem", [Reply(text=reply), Reply(text="Earlier work happened.")])
    memory = DynamicMemory(ChatModel.from_name("scripted/mem"), threshold=5, fallback_recent=3)
    condensed = await memory.condense("goal", _history(6))
    assert condensed.record.retrieval == "fallback" and condensed.record.retrieval_problem
    assert condensed.record.kept == [4, 5, 6] and [s.action for s in condensed.recent] == [
        "click(element='B4')", "click(element='B5')", "click(element='B6')"]
    script.assert_done()


async def test_summary_is_progressive_across_steps() -> None:
    script = Script("mem", [_keep_last(2), Reply(text="S1."), _keep_last(3)])
    memory = DynamicMemory(ChatModel.from_name("scripted/mem"), threshold=5)
    first = await memory.condense("goal", _history(6))
    assert first.summary == "S1."
    # 7 steps, keep 3 -> early is 1-4, already summarised: no summary call
    second = await memory.condense("goal", _history(7))
    assert second.summary == "S1." and second.record.calls == 1
    # 8 steps, keep 2 -> early 1-6: only steps 5-6 are folded into the old summary
    script.steps.append(_keep_last(2))
    script.steps.append(Reply(text="S3."))
    third = await memory.condense("goal", _history(8))
    assert third.summary == "S3." and third.record.summarised_upto == 6
    prompt = script.requests[-1].messages[1].text()
    assert "S1." in prompt and "Step 5 -" in prompt and "Step 6 -" in prompt and "Step 4 -" not in prompt
    script.assert_done()


def test_validate_retrieval_counts_the_suffix() -> None:
    assert validate_retrieval(["", "b", "c"], 3) == 2
    assert validate_retrieval(["a", "b", "c"], 3) == 3
    with pytest.raises(ReplyError):
        validate_retrieval(["", 1, "c"], 3)


def test_history_lines_number_from_the_start_given() -> None:
    lines = history_lines(_history(2), start=4)
    assert lines[0].startswith("Step 4 - thought: thinking 1; action: click(element='B1'); outcome: ok")
