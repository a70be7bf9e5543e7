"""The JSON contract of GUI-PRA's memory summary, the one guide call whose parser has no
reply model of its own: the schema it is asked in where the model's provider enforces one
(native structured outputs, `core.llm.structured`). `gprm.replies.parse_summary` reads its
``summary`` field like the sentence of a free-text reply. The scorer's, router's and
retrieval's contracts are their parsers' own models (`ScoreReply`, `RoutingRequest`,
`RetrievalReply`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["SummaryContract"]


class SummaryContract(BaseModel):
    """The memory's progressive summary."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    summary: str
    """One sentence that condenses the earlier steps."""
