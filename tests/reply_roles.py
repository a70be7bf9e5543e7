"""Every role's reply reader over its corpus: the registry `test_reply_corpora.py` and
`benchmarks/reply_corpora.py` share.

A corpus is a YAML list of entries ``{id, reply, read | refused, ...context}``: `read` is the
reading the role's real parser must yield (for an object, the fields given must match
exactly), `refused` is a substring of the one line of feedback the parser must give instead
(empty: any refusal). Context keys are per role (`n` candidates for a judge, the `space` a
grounding model answered in, the tools already `used` by the router, ...).

Each entry ends as one of: ``exact`` (read as stated), ``refused`` (refused as stated),
``refused_clear`` (a reply with a stated reading was refused: a billed re-ask, not a wrong
value) or ``misread`` (a value other than the stated one, or a value where a refusal was
due: the silent misread this suite exists to prevent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

TESTS = Path(__file__).parent


class Refused(Exception):
    """The parser refused the reply; `str()` is its feedback line."""


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    corpus: Path
    read: Callable[[dict[str, Any]], Any]

    def entries(self) -> list[dict[str, Any]]:
        loaded = yaml.safe_load(self.corpus.read_text(encoding="utf-8"))
        assert isinstance(loaded, list), f"{self.corpus} must hold a list of entries"
        return loaded


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: str  # exact | refused | refused_clear | misread
    detail: str = ""


def matches(expected: Any, actual: Any) -> bool:
    """Whether `actual` is `expected`: objects on the keys given, lists item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        seq = list(actual) if isinstance(actual, tuple | list) else None
        return seq is not None and len(seq) == len(expected) and all(
            matches(e, a) for e, a in zip(expected, seq, strict=True))
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return abs(float(actual) - float(expected)) < 1e-6
    return bool(actual == expected)


def judge(role: Role, entry: dict[str, Any]) -> Outcome:
    """How `role`'s parser reads `entry`, against what the entry states."""
    assert ("read" in entry) != ("refused" in entry), f"{entry.get('id')}: give exactly one of read / refused"
    try:
        value = role.read(entry)
    except Refused as exc:
        if "refused" in entry:
            wanted = str(entry["refused"] or "")
            if wanted.lower() in str(exc).lower():
                return Outcome("refused")
            return Outcome("misread", f"refused, but the feedback {str(exc)!r} lacks {wanted!r}")
        return Outcome("refused_clear", f"refused a clear reply: {exc}")
    if "refused" in entry:
        return Outcome("misread", f"read {value!r} where a refusal was due")
    if matches(entry["read"], value):
        return Outcome("exact")
    return Outcome("misread", f"read {value!r}, not {entry['read']!r}")


# -- readers: each calls the role's real parser --------------------------------------------------------


def _themis(schema_name: str) -> Callable[[dict[str, Any]], Any]:
    def read(entry: dict[str, Any]) -> Any:
        from themis import schemas
        from themis.asking import parse_reply

        try:
            return parse_reply(entry["reply"], getattr(schemas, schema_name), None).model_dump()
        except ValueError as exc:
            raise Refused(str(exc)) from None
    return read


def _choice(low: int, high_key: str | int) -> Callable[[dict[str, Any]], Any]:
    def read(entry: dict[str, Any]) -> Any:
        from bjudge import parse_choice

        high = entry[high_key] if isinstance(high_key, str) else high_key
        choice = parse_choice(entry["reply"], low, high)
        if choice.value is None:
            raise Refused(choice.problem or "")
        return choice.value
    return read


def _key_points(entry: dict[str, Any]) -> Any:
    from bjudge.parsing import read_items
    from core.replies import ReplyProblem

    try:
        return read_items(entry["reply"], "key_points")
    except ReplyProblem as exc:
        raise Refused(str(exc)) from None


def _facts(entry: dict[str, Any]) -> Any:
    from bjudge.parsing import read_facts
    from core.replies import ReplyProblem

    try:
        return read_facts(entry["reply"])
    except ReplyProblem as exc:
        raise Refused(str(exc)) from None


def _scorer(entry: dict[str, Any]) -> Any:
    from gprm import ReplyError, parse_score

    try:
        return parse_score(entry["reply"], action=entry.get("action", "click(element='Save')"))[0]
    except ReplyError as exc:
        raise Refused(str(exc)) from None


ROUTER_TOOLS = ["ui_parser", "point"]


def _router(entry: dict[str, Any]) -> Any:
    from gprm.routing import RoutingReplyError, check_request, parse_routing

    used = list(entry.get("used", []))
    try:
        actions = parse_routing(entry["reply"]).actions
        check_request(actions, [t for t in ROUTER_TOOLS if t not in used], used)
    except RoutingReplyError as exc:
        raise Refused(f"{exc.kind}: {exc}") from None
    return [[name, args.get("target")] for name, args in actions]


def _memory(entry: dict[str, Any]) -> Any:
    from gprm import ReplyError
    from gprm.memory import validate_retrieval
    from gprm.replies import parse_list

    try:
        return validate_retrieval(parse_list(entry["reply"]), int(entry["n"]))
    except ReplyError as exc:
        raise Refused(str(exc)) from None


def _summary(entry: dict[str, Any]) -> Any:
    from gprm import ReplyError, parse_summary

    try:
        return parse_summary(entry["reply"])
    except ReplyError as exc:
        raise Refused(str(exc)) from None


POINT_SCREEN = (1280, 800)


def _gprm_point(entry: dict[str, Any]) -> Any:
    from gprm import ReplyError, read_point

    sent = tuple(entry["sent"]) if entry.get("sent") else None
    try:
        answer = read_point(entry["reply"], POINT_SCREEN, coordinates=entry["coordinates"], sent_size=sent)
    except ReplyError as exc:
        raise Refused(str(exc)) from None
    return "not found" if answer is None else [round(answer.x), round(answer.y)]


def _code(entry: dict[str, Any]) -> Any:
    from agent_s3.code_reply import parse_code_reply

    try:
        return list(parse_code_reply(entry["reply"], entry.get("platform", "ubuntu"))[1:])
    except ValueError as exc:
        raise Refused(str(exc)) from None


def _code_summary(entry: dict[str, Any]) -> Any:
    from agent_s3.code_reply import parse_summary

    summary, checklist = parse_summary(entry["reply"])
    return {"summary": summary, "checklist": checklist}


def _policy(entry: dict[str, Any]) -> Any:
    from agent_s3.parser import FormatError, parse_reply

    try:
        return parse_reply(entry["reply"], platform=entry.get("platform", "ubuntu")).action.model_dump()
    except FormatError as exc:
        raise Refused(str(exc)) from None


def _grounding(entry: dict[str, Any]) -> Any:
    from agent_s3.point_reply import PointReplyError, read_point

    space = (float(entry["space"][0]), float(entry["space"][1]))
    try:
        x, y = read_point(entry["reply"], space, convention=entry.get("convention", "xy"))
    except PointReplyError as exc:
        raise Refused(str(exc)) from None
    return [x, y]


def _corpus(room: str, name: str) -> Path:
    return TESTS / room / "corpus" / name


ROLES: list[Role] = [
    Role("themis.selector", _corpus("themis", "selector.yaml"), _themis("SelectorReply")),
    Role("themis.verifier", _corpus("themis", "verifier.yaml"), _themis("VerifierReply")),
    Role("themis.reviewer", _corpus("themis", "reviewer.yaml"), _themis("ReviewerReply")),
    Role("themis.judge", _corpus("themis", "judge.yaml"), _themis("JudgeReply")),
    Role("themis.lastk", _corpus("themis", "lastk.yaml"), _themis("LastKReply")),
    Role("themis.sequential", _corpus("themis", "sequential.yaml"), _themis("SequentialReply")),
    Role("bjudge.mcq", _corpus("bjudge", "judge.yaml"), _choice(1, "n")),
    Role("bjudge.score", _corpus("bjudge", "score.yaml"), _choice(1, 5)),
    Role("bjudge.key_points", _corpus("bjudge", "key_points.yaml"), _key_points),
    Role("bjudge.narrator", _corpus("bjudge", "narrator.yaml"), _facts),
    Role("gprm.scorer", _corpus("gprm", "scorer.yaml"), _scorer),
    Role("gprm.router", _corpus("gprm", "router.yaml"), _router),
    Role("gprm.memory", _corpus("gprm", "memory.yaml"), _memory),
    Role("gprm.summary", _corpus("gprm", "summary.yaml"), _summary),
    Role("gprm.point", _corpus("gprm", "point.yaml"), _gprm_point),
    Role("agent_s3.code_agent", _corpus("agent_s3", "code_agent.yaml"), _code),
    Role("agent_s3.summarizer", _corpus("agent_s3", "summarizer.yaml"), _code_summary),
    Role("agent_s3.policy", _corpus("agent_s3", "policy.yaml"), _policy),
    Role("agent_s3.grounding", _corpus("agent_s3", "grounding.yaml"), _grounding),
]
