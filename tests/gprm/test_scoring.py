"""Score replies read defensively; re-asks are bounded; unreadable means no score."""

from __future__ import annotations

import pytest
from gprm_screens import blank_png

from core.llm import ChatModel, Reply, Script
from gprm import Candidate, ReplyError, ScoreContext, Scorer, parse_score


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ('<eval>{"score": 7, "original_step": "click"}</eval>', 7.0),
        ('Thinking...\n<eval>\n```json\n{"score": 8.5, "reason": "ok"}\n```\n</eval>', 8.5),
        ('<eval>{"score": "6", "reason": "string score"}', 6.0),  # no closing tag
        ('<EVAL>{"score": 0}</EVAL>', 0.0),
        ('<eval>{"score": 9}</eval> so, <eval>{"score": 9}</eval>', 9.0),  # the same answer restated
        ('{"score": 7}', 7.0),  # bare JSON, no tags
    ],
)
def test_readable_score_replies(text: str, score: float) -> None:
    assert parse_score(text)[0] == score


@pytest.mark.parametrize(
    "text",
    ["I give it a 7.", '<eval>{"score": 11}</eval>', '<eval>score below: {"score": 4, "reason": "unterminated',
     '<eval>{"score": 2}</eval> then <eval>{"score": 9}</eval>', '<eval>{"score": -1}</eval>',
     '<eval>{"score": true}</eval>', '<eval>{"score": "high"}</eval>', "<eval></eval>",
     '<eval>{"score": NaN}</eval>'],
)
def test_unreadable_score_replies(text: str) -> None:
    with pytest.raises(ReplyError):
        parse_score(text)


def _ctx() -> ScoreContext:
    return ScoreContext(goal="Save the file", screenshot=blank_png((640, 400)), recent=[])


async def test_an_unreadable_reply_is_asked_again_with_the_problem() -> None:
    script = Script("scorer", [Reply(text="It is a good action."),
                               Reply(text='<eval>{"score": 7, "reason": "saves"}</eval>')])
    result = await Scorer(ChatModel.from_name("scripted/scorer")).score(0, Candidate(action="hotkey('ctrl+s')"), _ctx())
    script.assert_done()
    assert result.score == 7.0 and result.attempts == 2 and result.error is None and result.reason == "saves"
    second = script.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]
    assert "<eval>" in second[-1].text() and "holds no score" in second[-1].text()


async def test_still_unreadable_after_the_reasks_means_no_score_and_a_record() -> None:
    script = Script("scorer", [Reply(text="seven"), Reply(text='<eval>{"score": 42}</eval>')])
    result = await Scorer(ChatModel.from_name("scripted/scorer"), max_reasks=1).score(
        3, Candidate(action="click(element='OK')", seed=42), _ctx())
    script.assert_done()
    assert result.score is None and result.attempts == 2 and result.index == 3 and result.seed == 42
    assert "0 to 10" in (result.error or "") and result.raw == '<eval>{"score": 42}</eval>'


async def test_a_failed_call_leaves_the_candidate_unscored() -> None:
    Script("scorer", [Reply(error=400, message="bad request")])
    result = await Scorer(ChatModel.from_name("scripted/scorer")).score(0, Candidate(action="wait()"), _ctx())
    assert result.score is None and "scoring call failed" in (result.error or "")


async def test_the_candidates_pointer_is_drawn_on_its_screenshot() -> None:
    script = Script("scorer", [Reply(text='<eval>{"score": 5}</eval>'), Reply(text='<eval>{"score": 5}</eval>')])
    scorer = Scorer(ChatModel.from_name("scripted/scorer"))
    ctx = _ctx()
    await scorer.score(0, Candidate(action="click(element='A')", pointer=(100, 100)), ctx)
    await scorer.score(1, Candidate(action="hotkey('ctrl+s')"), ctx)
    with_pointer, without = (r.messages[1].parts()[1] for r in script.requests)
    assert without.data == ctx.screenshot  # type: ignore[union-attr]
    assert with_pointer.data != ctx.screenshot  # type: ignore[union-attr]
    assert "acts at pixel [100, 100]" in script.requests[0].messages[1].text()
