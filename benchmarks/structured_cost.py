"""Tokens of native structured outputs against free text, per JSON-contract role, on the same
corpus of replies.

For each role, every reply of the role's parser corpus (tests/*/corpus: replies in the
styles models write, reasoning before the answer, fences, drafts, ...) is read by the role's
own free-text parser. For the replies it reads, the same answer is written as the role's
structured reply: the one JSON object of its contract (what a model held to the schema
writes; compact separators). Per role the script prints, side by side:

- ``free out``: mean output tokens of the free-text replies as written;
- ``json out``: mean output tokens of the same answers as structured replies;
- ``schema in``: input tokens of the schema each provider takes (OpenAI's strict form, the
  anthropic SDK's form); the providers turn it into prompt tokens on every call;
- ``prompt in``: input tokens of the role's system prompt (the same in both modes);
- ``re-asks``: free-text replies the parser refuses, each a billed second call (none for a
  structured reply, whose form the provider guarantees; rule checks remain in both);
- ``delta/call``: structured minus free tokens per call, schema included;
- ``re-ask/call >=``: what the free mode's re-asks add per call at the least (the refused
  share times the system prompt, the refused reply, a line of feedback and a new reply; the
  resent history and screenshots left out), and ``net <=`` the difference with them.

The corpora hold many deliberately broken replies (that is their purpose), so their refused
share is higher than a model's everyday one; the figures per reply read are what carries
over.

Token counts are ESTIMATES, about 4 characters a token (the scripted model's rule,
`core.llm.scripted.estimate_usage`); no tokenizer runs here. A structured reply carries no
reasoning before its answer (a model may still think, unbilled here in both modes).

    python benchmarks/structured_cost.py

Prints a table, then ``name: value`` lines.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from bjudge.contracts import FactsContract, choice_contract
from bjudge.parsing import parse_choice, parse_facts, tag_section
from core.llm.structured import ReplyFormat, for_provider
from gprm.contracts import RouteContract, ScoreContract, SummaryContract
from gprm.replies import ReplyError, parse_score, parse_summary
from gprm.routing import RoutingReplyError, parse_routing
from themis.asking import parse_reply
from themis.prompts import render as themis_render
from themis.schemas import JudgeReply, ReviewerReply, SelectorReply, VerifierReply

ROOT = Path(__file__).parents[1]
#: Tokens of the one line of feedback a re-ask sends.
FEEDBACK = 30
CORPORA = ROOT / "tests"
#: A reply of `contract` from a corpus entry, or None when the free-text parser refuses it.
Reader = Callable[[dict[str, Any]], dict[str, Any] | None]


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def entries(*names: str) -> Iterator[dict[str, Any]]:
    """The corpus entries of `names` (tests/<dir>/corpus/<role>.jsonl or .yaml)."""
    for name in names:
        for suffix in (".jsonl", ".yaml"):
            path = CORPORA / f"{name}{suffix}"
            if not path.exists():
                continue
            if suffix == ".jsonl":
                yield from (json.loads(line) for line in path.read_text().splitlines() if line.strip())
            else:
                yield from yaml.safe_load(path.read_text()) or []


def _themis(schema: type[BaseModel]) -> Reader:
    def read(entry: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return parse_reply(str(entry["reply"]), schema, None).model_dump(mode="json")
        except ValueError:
            return None
    return read


def _choice(entry: dict[str, Any]) -> dict[str, Any] | None:
    n = int(entry.get("n", 3))
    found = parse_choice(str(entry["reply"]), 1, n)
    if found.value is None:
        return None
    return {"thoughts": tag_section(str(entry["reply"]), "thoughts") or "", "answer": found.value}


def _facts(entry: dict[str, Any]) -> dict[str, Any] | None:
    found = parse_facts(str(entry["reply"]))
    if found is None:
        return None
    return {"thoughts": tag_section(str(entry["reply"]), "thoughts") or "", "facts": found}


def _score(entry: dict[str, Any]) -> dict[str, Any] | None:
    try:
        score, obj = parse_score(str(entry["reply"]))
    except ReplyError:
        return None
    return {"score": score, "reason": str(obj.get("reason") or ""), "original_step": str(obj.get("original_step") or "")}


def _route(entry: dict[str, Any]) -> dict[str, Any] | None:
    try:
        parsed = parse_routing(str(entry["reply"]))
    except (RoutingReplyError, ReplyError):
        return None
    calls = []
    for name, args in parsed.actions:
        if name not in ("ui_parser", "point", "terminate"):
            return None
        calls.append({"name": name, "arguments": {"target": args.get("target"), "answer": args.get("answer")}})
    return {"thought": parsed.thought or "", "actions": calls}


def _summary(entry: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return {"summary": parse_summary(str(entry["reply"]))}
    except ReplyError:
        return None


@dataclass(frozen=True)
class Role:
    name: str
    corpus: tuple[str, ...]
    contract: type[BaseModel]
    read: Reader
    prompt: str


def _prompt(name: str) -> str:
    try:
        return themis_render(name, prompts="paper")
    except Exception:  # a role whose prompt needs run data: measured without it
        return ""


def _gprm_prompt(name: str) -> str:
    from gprm.prompts import render
    try:
        return render(name, previous=None, tools=[], first=True)
    except Exception:
        return ""


def _bjudge_prompt(name: str, **values: Any) -> str:
    from bjudge.prompts import render
    try:
        return render(name, **values)
    except Exception:
        return ""


ROLES = [
    Role("themis selector", ("themis/corpus/selector",), SelectorReply, _themis(SelectorReply),
         _prompt("selector_initial_system")),
    Role("themis verifier", ("themis/corpus/verifier",), VerifierReply, _themis(VerifierReply),
         _prompt("verifier_system")),
    Role("themis reviewer", ("themis/corpus/reviewer",), ReviewerReply, _themis(ReviewerReply),
         _prompt("reviewer_system")),
    Role("themis judge", ("themis/corpus/judge",), JudgeReply, _themis(JudgeReply), _prompt("judge_system")),
    Role("gui-pra scorer", ("gprm/corpus/scorer",), ScoreContract, _score, _gprm_prompt("score_system")),
    Role("gui-pra router", ("gprm/corpus/router",), RouteContract, _route, _gprm_prompt("routing_system")),
    Role("gui-pra memory", ("gprm/corpus/summary",), SummaryContract, _summary,
         _gprm_prompt("memory_summary_system")),
    Role("bjudge mcq judge", ("bjudge/corpus/judge",), choice_contract(1, 3), _choice,
         _bjudge_prompt("judge_system", n=3, task="the task", cite=True, representation="narrative")),
    Role("bjudge narrator", ("bjudge/corpus/narrator",), FactsContract, _facts, _bjudge_prompt("narrative_system")),
]


@dataclass
class Row:
    role: str
    size: int = 0
    read: int = 0
    free_out: float = 0.0
    json_out: float = 0.0
    schema_openai: int = 0
    schema_anthropic: int = 0
    prompt: int = 0

    @property
    def reasks(self) -> int:
        return self.size - self.read

    @property
    def delta(self) -> float:
        """Structured minus free tokens per call (OpenAI's schema form), re-asks aside."""
        return self.schema_openai + self.json_out - self.free_out

    @property
    def reask_per_call(self) -> float:
        """Tokens a free-text call spends on re-asks, on average, at the least: the share of
        replies refused times one more call of the system prompt, the refused reply, a line
        of feedback and a new reply (the user's history and screenshots, resent too, left out)."""
        share = self.reasks / self.size if self.size else 0.0
        return share * (self.prompt + 2 * self.free_out + FEEDBACK)

    @property
    def net(self) -> float:
        """Structured minus free tokens per call, the free mode's re-asks counted (at most)."""
        return self.delta - self.reask_per_call


def measure(role: Role) -> Row:
    row = Row(role.name)
    fmt = ReplyFormat.of(role.contract)
    row.schema_openai = tokens(json.dumps(for_provider(fmt.json_schema, "openai_strict")))
    row.schema_anthropic = tokens(json.dumps(for_provider(fmt.json_schema, "anthropic")))
    row.prompt = tokens(role.prompt)
    free: list[int] = []
    structured: list[int] = []
    for entry in entries(*role.corpus):
        row.size += 1
        value = role.read(entry)
        if value is None:
            continue
        contract = choice_contract(1, int(entry.get("n", 3))) if "answer" in value else role.contract
        answer = contract.model_validate(value).model_dump_json()
        row.read += 1
        free.append(tokens(str(entry["reply"])))
        structured.append(tokens(json.dumps(json.loads(answer), separators=(", ", ": "))))
    row.free_out = sum(free) / len(free) if free else 0.0
    row.json_out = sum(structured) / len(structured) if structured else 0.0
    return row


def main() -> None:
    rows = [measure(role) for role in ROLES]
    head = (f"{'role':<20}{'corpus':>7}{'read':>6}{'re-asks':>9}{'free out':>10}{'json out':>10}"
            f"{'schema in (oai/claude)':>24}{'prompt in':>11}{'delta/call':>12}{'re-ask/call >=':>16}{'net <=':>9}")
    print("ESTIMATED tokens (about 4 characters a token), per call")
    print(head)
    for r in rows:
        schema = f"{r.schema_openai}/{r.schema_anthropic}"
        print(f"{r.role:<20}{r.size:>7}{r.read:>6}{r.reasks:>9}{r.free_out:>10.0f}{r.json_out:>10.0f}"
              f"{schema:>24}{r.prompt:>11}{r.delta:>+12.0f}{r.reask_per_call:>16.0f}{r.net:>+9.0f}")
    for r in rows:
        key = r.role.replace(" ", "_").replace("-", "_")
        print(f"{key}_free_output_tokens: {r.free_out:.1f}")
        print(f"{key}_structured_output_tokens: {r.json_out:.1f}")
        print(f"{key}_schema_input_tokens_openai: {r.schema_openai}")
        print(f"{key}_schema_input_tokens_anthropic: {r.schema_anthropic}")
        print(f"{key}_free_text_reasks: {r.reasks} of {r.size}")
        print(f"{key}_net_tokens_per_call_at_most: {r.net:+.0f}")


if __name__ == "__main__":
    main()
