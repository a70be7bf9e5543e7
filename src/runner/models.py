"""The chat models of a run, built once from the configuration and shared by its rollouts.

Every model writes to the run's one `Ledger`; `ModelSet.tagged` gives copies whose ledger
records carry the run, task and rollout, so cost can be split and limited per rollout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pydantic import SecretStr

from agent_s3 import Worker, WorkerConfig, platform_worker
from core.llm import ChatModel, Ledger, PriceTable, RetryPolicy
from core.protocols import Environment, Platform, WorkerFacts
from gprm import guide_takes

from . import sim_replies  # noqa: F401  (registers what simulated models say)
from .config import ModelConfig, RunConfig

__all__ = ["ModelSet", "build_models", "chat_model", "make_worker", "settled_config", "spent_by", "worker_config"]


def chat_model(cfg: ModelConfig, ledger: Ledger | None = None, prices: PriceTable | None = None, *,
               retry: RetryPolicy | None = None) -> ChatModel:
    """The chat model a section of the configuration describes: the one place a `ChatModel`
    is built from settings (its endpoint, key, timeout, retry budget, connections and
    decoding). `retry` replaces the budget's policy (a quick preflight check). Raises
    `core.llm.MissingAPIKeyError` when the provider's key is not set."""
    return ChatModel.from_name(
        cfg.model,
        ledger=ledger,
        prices=prices,
        retry=retry or RetryPolicy(budget=cfg.retry_budget),
        base_url=cfg.base_url,
        api_key=cfg.api_key.get_secret_value() if cfg.api_key else None,
        timeout=cfg.timeout,
        max_connections=cfg.max_connections,
        config=cfg.generate,
    )


@dataclass(frozen=True)
class ModelSet:
    """The models one worker uses; unset roles share the policy's model."""

    policy: ChatModel
    grounding: ChatModel
    code: ChatModel
    reflection: ChatModel
    #: The step guide's model (None: the run has no guide).
    guide: ChatModel | None = None
    #: The pointing model of GUI-PRA's point tool, if one is configured.
    pointer: ChatModel | None = None

    def tagged(self, **tags: Any) -> ModelSet:
        return replace(
            self,
            policy=self.policy.with_tags(**tags),
            grounding=self.grounding.with_tags(**tags),
            code=self.code.with_tags(**tags),
            reflection=self.reflection.with_tags(**tags),
            guide=self.guide.with_tags(**tags) if self.guide is not None else None,
            pointer=self.pointer.with_tags(**tags) if self.pointer is not None else None,
        )

    async def aclose(self) -> None:
        seen: set[int] = set()
        for model in (self.policy, self.grounding, self.code, self.reflection, self.guide, self.pointer):
            if model is None:
                continue
            if id(model.api) not in seen:
                seen.add(id(model.api))
                await model.aclose()


def build_models(cfg: RunConfig, ledger: Ledger) -> ModelSet:
    """Raises `core.llm.MissingAPIKeyError` when a provider's key is not set."""
    prices = PriceTable(cfg.prices)
    policy = chat_model(cfg.policy, ledger, prices)
    return ModelSet(
        policy=policy,
        grounding=chat_model(cfg.grounding, ledger, prices) if cfg.grounding else policy,
        code=chat_model(cfg.code_model, ledger, prices) if cfg.code_model else policy,
        reflection=chat_model(cfg.reflection_model, ledger, prices) if cfg.reflection_model else policy,
        guide=None if cfg.guide.name == "none" else (chat_model(cfg.guide.model, ledger, prices) if cfg.guide.model else policy),
        pointer=chat_model(cfg.guide.pointer, ledger, prices) if cfg.guide.pointer and cfg.guide.name != "none"
        and guide_takes(cfg.guide.name, "pointer")
        else None,
    )


def worker_config(cfg: RunConfig, platform: Platform, facts: WorkerFacts) -> WorkerConfig:
    """The worker's settings on an environment of `platform` that describes itself by `facts`
    (its account, home and sudo rule, how apps open, whether code can run there); what the
    run's configuration sets explicitly wins."""
    base = cfg.worker
    update: dict[str, Any] = {"platform": platform}
    if not facts.code_agent:
        update["code_agent"] = False
    if facts.open_by_exec and "ubuntu_open" not in base.model_fields_set:
        update["ubuntu_open"] = "exec"
    told = base.facts
    fact_update: dict[str, Any] = {}
    if facts.user_name is not None and told.user_name is None:
        fact_update["user_name"] = facts.user_name
    if facts.home is not None and told.home is None:
        fact_update["home"] = facts.home
    if facts.sudo is not None and "sudo" not in told.model_fields_set:
        fact_update["sudo"] = facts.sudo
    if facts.password is not None and told.password is None:
        fact_update["password"] = SecretStr(facts.password)
    if fact_update:
        update["facts"] = told.model_copy(update=fact_update)
    return base.model_copy(update=update)


async def settled_config(cfg: RunConfig, env: Environment) -> RunConfig:
    """`cfg` with the worker's settings as `env` describes itself."""
    return cfg.model_copy(update={"worker": worker_config(cfg, env.platform, await env.worker_facts())})


def make_worker(cfg: RunConfig, models: ModelSet, env: Environment) -> Worker:
    """A fresh worker (empty history) for one rollout in `env`; `cfg` is settled for it
    (`settled_config`)."""
    sandbox = cfg.environment.sandbox and env.sandbox() is not None
    return platform_worker(models.policy, cfg.worker, models.grounding, reflection_model=models.reflection,
                           code_model=models.code, sandbox_available=sandbox)


def spent_by(ledger: Ledger, **tags: Any) -> float:
    """Dollars of the ledger's calls whose tags include all of `tags`."""
    return ledger.dollars(**tags)
