"""Every reply contract a role asks in natively passes every provider's schema rules, as the
strict servers apply them: a contract the real services would refuse fails here, before any
run does."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from bjudge import AnswerReply, FactsReply, KeyPointsReply
from core.llm.structured import ReplyFormat, for_provider
from gprm import RetrievalReply, RoutingRequest, ScoreReply
from gprm.contracts import SummaryContract
from testing.llm.schema_rules import check_anthropic_schema, check_openai_schema, check_valid_schema
from themis.schemas import (
    JudgeReply,
    LastKReply,
    ReviewerReply,
    SelectorReply,
    SequentialReply,
    VerifierReply,
)

CONTRACTS: list[type[BaseModel]] = [
    SelectorReply, VerifierReply, ReviewerReply, JudgeReply, LastKReply, SequentialReply,
    ScoreReply, RoutingRequest, RetrievalReply, SummaryContract, AnswerReply, FactsReply, KeyPointsReply,
]


@pytest.mark.parametrize("contract", CONTRACTS, ids=lambda c: c.__name__)
def test_every_contract_passes_every_providers_rules(contract: type[BaseModel]) -> None:
    fmt = ReplyFormat.of(contract)
    spec = {"name": fmt.name, "strict": True, "schema": for_provider(fmt.json_schema, "openai_strict")}
    check_openai_schema({"type": "json_schema", "json_schema": spec})
    check_anthropic_schema(for_provider(fmt.json_schema, "anthropic"), "output_config.format.schema")
    for mechanism in ("vllm", "json_schema"):
        check_valid_schema(for_provider(fmt.json_schema, mechanism), mechanism)
