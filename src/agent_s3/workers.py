"""The worker for a platform: a phone gets the Android compiler and its actions (no coding
agent), a desktop the pyautogui compiler. The policy knows its platforms; its caller only
passes the platform its environment reported."""

from __future__ import annotations

from agent_s3.compile_android import android_worker
from agent_s3.config import WorkerConfig
from agent_s3.grounding import Grounder
from agent_s3.worker import Worker
from core.llm import ChatModel

__all__ = ["platform_worker"]


def platform_worker(
    model: ChatModel,
    config: WorkerConfig,
    grounding_model: ChatModel,
    *,
    reflection_model: ChatModel | None = None,
    code_model: ChatModel | None = None,
    sandbox_available: bool = True,
) -> Worker:
    """A fresh worker for `config.platform` (empty history)."""
    grounder = Grounder(grounding_model, config.grounding, platform=config.platform)
    if config.platform == "android":
        return android_worker(model, config, grounder, reflection_model=reflection_model)
    return Worker(model, config, grounder, reflection_model=reflection_model, code_model=code_model,
                  sandbox_available=sandbox_available)
