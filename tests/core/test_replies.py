"""The reading rules every role shares: drafts removed, JSON read leniently where that cannot
change the meaning, one candidate answer or a refusal."""

from __future__ import annotations

import pytest

from core.replies import ReplyProblem, contract_keys, json_chunks, loads, one_object, strip_reasoning


@pytest.mark.parametrize(("text", "left"), [
    ("<think>maybe 3</think>answer 2", "answer 2"),
    ("<THINKING>x</THINKING> y", " y"),
    ("template opened it</think>\n\nthe answer", "\n\nthe answer"),
    ("a <thoughts>draft", "a "),  # never closed: the rest is draft
    ("<think>a</think> b <reasoning>c</reasoning> d", " b  d"),
    ("<|channel|>analysis<|message|>draft<|end|><|start|>assistant<|channel|>final<|message|>the answer<|return|>",
     "the answer"),
    ("◁think▷draft◁/think▷answer", " answer"),
])
def test_reasoning_drafts_are_removed(text: str, left: str) -> None:
    assert strip_reasoning(text) == left


@pytest.mark.parametrize(("text", "value"), [
    ('{"a": 1,}', {"a": 1}),
    ('{"a": [1, 2,],}', {"a": [1, 2]}),
    ('{"a": 1, // the paper writes comments\n "b": 2}', {"a": 1, "b": 2}),
    ('{"a": /* inline */ 1}', {"a": 1}),
    ("{'a': True, 'b': None}", {"a": True, "b": None}),
    ('{"url": "http://x.org/a//b"}', {"url": "http://x.org/a//b"}),
    ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
    ('{step: 3}', {"step": 3}),
    ('{"s": "it\'s, fine,"}', {"s": "it's, fine,"}),
])
def test_formatting_that_cannot_change_the_meaning_is_read(text: str, value: object) -> None:
    assert loads(text) == value


@pytest.mark.parametrize(("text", "problem"), [
    ('{"a": 1', "cut off"),
    ('{"a": completed}', "does not parse"),
    ('{"a": 1 "b": 2}', "does not parse"),
])
def test_broken_json_says_where(text: str, problem: str) -> None:
    with pytest.raises(ReplyProblem, match=problem):
        loads(text)


def test_one_object_refuses_an_example_besides_the_answer() -> None:
    reply = 'For example {"verdict": "success"}. My answer: {"verdict": "failure"}'
    with pytest.raises(ReplyProblem, match="2 different JSON objects"):
        one_object(reply)


def test_a_draft_in_think_is_not_a_candidate_and_the_same_object_twice_is_one() -> None:
    assert one_object('<think>{"v": 1}</think>{"v": 2} so: {"v": 2}') == {"v": 2}


def test_a_valid_object_does_not_win_over_a_broken_one() -> None:
    """The real answer failed only on a missing comma: the other object is not taken instead."""
    with pytest.raises(ReplyProblem, match="2 different JSON objects"):
        one_object('Draft: {"d": "completed"}\nFinal: {"d": "not_completed" "r": "x"}')


def test_nothing_inside_a_cut_object_is_taken_for_the_answer() -> None:
    cut = '{"issues": [{"summary": "a", "risk": "warning"}, {"summary": "b", "risk": "bloc'
    with pytest.raises(ReplyProblem, match="cut off"):
        one_object(cut)


def test_templates_are_not_candidates() -> None:
    reply = 'The schema is {"final_decision": "completed" | "not_completed", ...}.\n{"final_decision": "completed"}'
    assert one_object(reply) == {"final_decision": "completed"}
    with pytest.raises(ReplyProblem, match="only repeats the answer template"):
        one_object('{"score": "<number 0-10>"}')
    assert [c.template for c in json_chunks('{"step": <int>} {"step": 2}')] == [True, False]


def test_prose_braces_are_not_candidates() -> None:
    assert one_object('Use the {name} of the file. {"a": 1}') == {"a": 1}
    with pytest.raises(ReplyProblem, match="no JSON object"):
        one_object("no {object} here")


def test_contract_keys_are_listed_not_guessed() -> None:
    fields = ("decision", "reason")
    aliases = {"final_decision": "decision", "justification": "reason"}
    assert contract_keys({"Final Decision": "x", "REASON": "y", "id": 1}, fields=fields, aliases=aliases,
                         ignored=("id",)) == {"decision": "x", "reason": "y"}
    with pytest.raises(ValueError, match="unknown key 'qa_review'"):
        contract_keys({"decision": "x", "qa_review": {}}, fields=fields, aliases=aliases)
    with pytest.raises(ValueError, match="two names for one field"):
        contract_keys({"decision": "x", "final_decision": "y"}, fields=fields, aliases=aliases)
    assert contract_keys({"decision": "x", "final_decision": "x"}, fields=fields, aliases=aliases) == {"decision": "x"}
