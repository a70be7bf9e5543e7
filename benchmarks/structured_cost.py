"""Tokens of native structured outputs against free text, per JSON-contract role, on the same
corpus of replies.

For each role, every reply of the role's parser corpus (tests/*/corpus/*.yaml through
tests/reply_roles.py: replies in the styles models write, reasoning before the answer,
fences, drafts, ...) is read by the role's own free-text parser. For the replies it reads, the same answer is written as the role's
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
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bjudge import AnswerReply, FactsReply, KeyPointsReply
from bjudge.parsing import tag_section
from core.llm.structured import ReplyFormat, for_provider
from gprm import RetrievalReply, RoutingRequest, ScoreReply, parse_score
from gprm.contracts import SummaryContract
from gprm.replies import parse_list
from gprm.routing import parse_routing
from themis import schemas

ROOT = Path(__file__).parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from reply_roles import ROLES, judge  # noqa: E402  (the corpora's reader registry)

#: Tokens of the one line of feedback a re-ask sends.
FEEDBACK = 30


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _thoughts(reply: str) -> str:
    return tag_section(reply, "thoughts") or ""


def _themis(name: str) -> tuple[type[BaseModel], Callable[[dict[str, Any], Any], dict[str, Any]]]:
    model: type[BaseModel] = getattr(schemas, name)
    return model, lambda entry, value: model.model_validate(value).model_dump(mode="json")


def _score(entry: dict[str, Any], value: Any) -> dict[str, Any]:
    _, obj = parse_score(entry["reply"], action=entry.get("action", "click(element='Save')"))
    return {"score": value, "reason": str(obj.get("reason") or ""), "original_step": str(obj.get("original_step") or "")}


def _route(entry: dict[str, Any], value: Any) -> dict[str, Any]:
    parsed = parse_routing(entry["reply"])
    return {"thought": parsed.thought or "", "actions": [{"name": name, "arguments": {
        "target": args.get("target"), "answer": args.get("answer")}} for name, args in parsed.actions]}


#: Role (as tests/reply_roles.py names it) -> its contract, and its answer in the contract.
CONTRACTS: dict[str, tuple[type[BaseModel], Callable[[dict[str, Any], Any], dict[str, Any]]]] = {
    **{f"themis.{role}": _themis(name) for role, name in (
        ("selector", "SelectorReply"), ("verifier", "VerifierReply"), ("reviewer", "ReviewerReply"),
        ("judge", "JudgeReply"), ("lastk", "LastKReply"), ("sequential", "SequentialReply"))},
    "bjudge.mcq": (AnswerReply, lambda e, v: {"thoughts": _thoughts(e["reply"]), "answer": v}),
    "bjudge.score": (AnswerReply, lambda e, v: {"thoughts": _thoughts(e["reply"]), "answer": v}),
    "bjudge.key_points": (KeyPointsReply, lambda e, v: {"thoughts": _thoughts(e["reply"]), "key_points": v}),
    "bjudge.narrator": (FactsReply, lambda e, v: {"thoughts": _thoughts(e["reply"]), "facts": v}),
    "gprm.scorer": (ScoreReply, _score),
    "gprm.router": (RoutingRequest, _route),
    "gprm.memory": (RetrievalReply, lambda e, v: {"history": parse_list(e["reply"])}),
    "gprm.summary": (SummaryContract, lambda e, v: {"summary": v}),
}
#: The system prompt of each role, rendered as a run renders it (its size, in both modes).
PROMPTS: dict[str, Callable[[], str]] = {
    "themis.selector": lambda: _render("themis", "selector_initial_system", prompts="paper"),
    "themis.verifier": lambda: _render("themis", "verifier_system", prompts="paper"),
    "themis.reviewer": lambda: _render("themis", "reviewer_system", prompts="paper"),
    "themis.judge": lambda: _render("themis", "judge_system", prompts="paper"),
    "themis.lastk": lambda: _render("themis", "lastk_system"),
    "themis.sequential": lambda: _render("themis", "sequential_system"),
    "bjudge.mcq": lambda: _render("bjudge", "judge_system", n=3, task="the task", cite=True,
                                  representation="narrative"),
    "bjudge.score": lambda: _render("bjudge", "score_system", task="the task"),
    "bjudge.key_points": lambda: _render("bjudge", "webjudge_key_points", task="the task"),
    "bjudge.narrator": lambda: _render("bjudge", "narrative_system"),
    "gprm.scorer": lambda: _render("gprm", "score_system", previous=None),
    "gprm.router": lambda: _render("gprm", "routing_system", tools=[], first=True),
    "gprm.memory": lambda: _render("gprm", "memory_retrieve_system"),
    "gprm.summary": lambda: _render("gprm", "memory_summary_system"),
}


def _render(room: str, name: str, **values: Any) -> str:
    import importlib

    render = importlib.import_module(f"{room}.prompts").render
    try:
        return str(render(name, **values))
    except Exception:  # a template that needs run data: measured without it
        return ""


@dataclass
class Row:
    role: str
    size: int = 0
    read: int = 0
    refused: int = 0
    misread: int = 0
    free_out: float = 0.0
    json_out: float = 0.0
    schema_openai: int = 0
    schema_anthropic: int = 0
    prompt: int = 0

    @property
    def reasks(self) -> int:
        """Corpus replies the free-text parser refuses: each a billed second call."""
        return self.refused

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


def measure(role: Any) -> Row:
    contract, answer = CONTRACTS[role.name]
    row = Row(role.name)
    fmt = ReplyFormat.of(contract)
    row.schema_openai = tokens(json.dumps(for_provider(fmt.json_schema, "openai_strict")))
    row.schema_anthropic = tokens(json.dumps(for_provider(fmt.json_schema, "anthropic")))
    row.prompt = tokens(PROMPTS[role.name]())
    free: list[int] = []
    structured: list[int] = []
    for entry in role.entries():
        row.size += 1
        outcome = judge(role, entry)
        if outcome.kind != "exact" or "read" not in entry:
            row.refused += outcome.kind != "misread"
            row.misread += outcome.kind == "misread"
            continue
        value = role.read(entry)
        reply = contract.model_validate(answer(entry, value)).model_dump_json()
        row.read += 1
        free.append(tokens(str(entry["reply"])))
        structured.append(tokens(json.dumps(json.loads(reply), separators=(", ", ": "))))
    row.free_out = sum(free) / len(free) if free else 0.0
    row.json_out = sum(structured) / len(structured) if structured else 0.0
    return row


def main() -> None:
    rows = [measure(role) for role in ROLES if role.name in CONTRACTS]
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
