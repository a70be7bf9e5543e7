"""A task: what the agent is asked to do, where, and how the result is checked."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.platforms import Platform

from .base import Record

__all__ = ["Platform", "Task"]

# OSWorld task keys that have a field of their own here; the rest go to `extra`.
_OSWORLD_KEYS = {"id", "instruction", "snapshot", "related_apps", "config", "evaluator"}


class Task(Record):
    """One benchmark task in OSWorld's JSON shape, plus where it came from."""

    schema_version: int = 1
    id: str
    instruction: str
    """What the user asks for, given to the agent verbatim."""
    platform: Platform = "ubuntu"
    """Operating system of the environment; selects prompts, key names and providers."""
    snapshot: str = ""
    """Name of the start state the environment reverts to (OSWorld's ``snapshot``)."""
    related_apps: list[str] = Field(default_factory=list)
    """Applications the task touches (OSWorld's ``related_apps``)."""
    config: list[dict[str, Any]] = Field(default_factory=list)
    """Set-up steps run before the agent starts, kept exactly as OSWorld writes them."""
    evaluator: dict[str, Any] = Field(default_factory=dict)
    """How the final state is scored, kept exactly as OSWorld writes it."""
    complexity: str | None = None
    """Difficulty label from the source, when it has one."""
    max_steps: int | None = Field(default=None, ge=1)
    """Step budget for this task; None means the run's default."""
    source_path: str | None = None
    """File the task was loaded from, for error messages and re-export."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """OSWorld keys without a field here (``source``, ``proxy``, ``trajectory`` ...), kept
    so that an exported task is the imported one."""

    @classmethod
    def from_osworld(
        cls,
        data: dict[str, Any],
        *,
        platform: Platform = "ubuntu",
        source_path: str | None = None,
    ) -> Task:
        """Build a task from one OSWorld task JSON object."""
        return cls(
            id=str(data["id"]),
            instruction=data["instruction"],
            platform=platform,
            snapshot=data.get("snapshot", ""),
            related_apps=list(data.get("related_apps", [])),
            config=list(data.get("config", [])),
            evaluator=dict(data.get("evaluator", {})),
            source_path=source_path,
            extra={k: v for k, v in data.items() if k not in _OSWORLD_KEYS},
        )

    def to_osworld(self) -> dict[str, Any]:
        """The OSWorld task JSON object this task came from (or would come from)."""
        return {
            "id": self.id,
            "snapshot": self.snapshot,
            "instruction": self.instruction,
            "related_apps": list(self.related_apps),
            "config": list(self.config),
            "evaluator": dict(self.evaluator),
            **self.extra,
        }
