"""The run configuration: one pydantic model per component, loaded in layers.

``load_run_config(["run.yaml", "rollout.max_steps=30"])`` applies YAML files and dotted
overrides over the defaults (see `core.config`); `dump_config` writes it whole, secrets
redacted, into the run's ``config.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SerializeAsAny, WrapValidator, model_validator

from agent_s3 import WorkerConfig
from core.config import Checks, load_config
from core.llm import Price
from core.llm.profiles import Profile
from core.registry import Registry, UnknownName
from environments.kinds import EnvironmentSettings, default_settings, get_kind, settings_from
from gprm import GUIDES
from themis import CRITICS

from .model_config import ModelConfig, Section
from .strategies import STRATEGIES
from .wide_config import WideConfig

__all__ = [
    "BranchConfig",
    "CriticConfig",
    "EnvironmentSection",
    "ExecutorConfig",
    "GuideConfig",
    "LimitsConfig",
    "ModelConfig",
    "RolloutConfig",
    "RunConfig",
    "load_run_config",
]




#: The ``environment`` section: the settings model of the kind it names (see `environments.kinds`).
EnvironmentSection = Annotated[SerializeAsAny[EnvironmentSettings], WrapValidator(lambda v, _h: settings_from(v))]


class ExecutorConfig(Section):
    """Where the rollouts of a run execute."""

    kind: Literal["asyncio", "ray"] = "asyncio"
    """``asyncio``: every rollout in this process, on environments of this machine; ``ray``:
    environments held by one actor per host of a Ray cluster, the agent loops here."""
    ray_address: str = "local"
    """``local`` (a Ray instance started for the run, loopback only), ``auto`` (the cluster
    this machine belongs to) or ``ray://HEAD:10001`` (Ray Client)."""
    per_host: int | None = Field(default=None, ge=1)
    """Environments each host starts; None spreads the run's width over the hosts."""
    max_hosts: int | None = Field(default=None, ge=1)
    """Use at most this many hosts of the cluster (None: every alive node)."""
    host_restarts: int = Field(default=1, ge=0)
    """Times a lost host (its actor died, its node still alive) is started afresh when no
    other host is left."""


class RolloutConfig(Section):
    """Budgets and pacing of one rollout."""

    max_steps: int = Field(default=50, ge=1)
    """Steps before the rollout ends as ``step_limit`` (a task's own budget wins)."""
    settle_seconds: float = Field(default=3.0, ge=0)
    """Pause after each action before the next screenshot, so the screen has settled
    (with ``settle: auto``, the most it waits)."""
    settle: Literal["fixed", "auto"] = "fixed"
    """``fixed`` waits `settle_seconds` after every action (the paper's 3 s); ``auto``
    watches the screen and goes on once it has held still for `settle_quiet` seconds,
    never later than `settle_seconds` (see runner/settle.py and benchmarks/settle.py)."""
    settle_quiet: float = Field(default=1.0, gt=0)
    """With ``settle: auto``: seconds the screen must hold still."""
    settle_poll: float = Field(default=0.1, gt=0)
    """With ``settle: auto``: seconds between screenshots while waiting."""
    settle_tolerance: int = Field(default=0, ge=0)
    """With ``settle: auto``: pixels that may change while the screen counts as still."""
    settle_by_kind: dict[str, float] = Field(default_factory=dict)
    """Settle seconds per ``environment.kind``, used when `settle_seconds` is not set; a kind
    not named here uses its own default (a phone redraws faster than a desktop's
    applications start: ``android`` settles 1 s), else `settle_seconds`."""
    cost_limit: float | None = Field(default=None, gt=0)
    """Dollars the rollout's model calls may cost before it ends as ``cost_limit``."""
    max_wait_seconds: float = Field(default=60.0, gt=0)
    """Cap on one ``wait`` action."""
    record: bool = False
    """Record each rollout's screen as ``recording.mp4`` in its folder (from the end of the
    task's setup to the end of its scoring) on environments that can; `report.html` links it."""


class LimitsConfig(Section):
    """How the run shares its providers' rate limits (see `core.llm.rate_budget`)."""

    pacing: bool = True
    """Pace every call of the run through one budget per provider endpoint and model,
    learned from the rate-limit headers, judging first: calls wait before the provider
    would refuse them. false sends each call at once and retries a refused one as the
    provider asks (each call on its own)."""


def _options_of(registry: Registry[Any]) -> Any:
    """The ``Options`` model of the part a section's ``name`` names (None: no name, ``none``,
    or a part without options; an unknown name is said by the name's own check)."""
    def model_of(data: Mapping[str, Any]) -> Any:
        name = data.get("name")
        if not isinstance(name, str) or name == "none":
            return None
        try:
            return getattr(registry.get(name), "Options", None)
        except UnknownName:
            return None
    return model_of


def _each_named(registry: Registry[Any], what: str) -> Any:
    """(``<what>: <name>``, its ``Options``) for every registered part that has options."""
    model_of = _options_of(registry)
    return lambda: [(f"{what}: {n}", m) for n in registry.names() if (m := model_of({"name": n})) is not None]


_CRITIC_OPTIONS = Checks(_options_of(CRITICS), "the critic's `Options` (`themis.critics.critic_options_model`, "
                         "`themis.options`)", noun="options", variants=_each_named(CRITICS, "critic.name"))
_GUIDE_OPTIONS = Checks(_options_of(GUIDES), "the guide's `Options` (`gprm.guide.guide_options_model`, `gprm.options`)",
                        noun="options", variants=_each_named(GUIDES, "guide.name"))
_PROFILES = Checks(lambda data: Profile, "`core.llm.profiles.Profile` (`agent-s3 models check` shows the result)",
                   each=True, partial=True, label="per model", key=".<provider/model>")


class CriticConfig(Section):
    """The outcome critic of the ``retry`` strategy (see `themis`)."""

    name: Annotated[str, CRITICS.named()] = "themis"
    """``themis`` (milestones, verifier, reviewer, judge), a baseline (``lastk``, ``sequential``),
    or a critic of your own as ``package.module:Class``."""
    model: ModelConfig | None = None
    """The critic's model; None uses the policy's."""
    attempts: int = Field(default=3, ge=1)
    """Rollouts at most: retry until the critic accepts one or this many were made."""
    options: Annotated[dict[str, Any], _CRITIC_OPTIONS] = Field(default_factory=dict)
    """The critic's own settings (e.g. ``selector_rounds``, ``k``): the fields of its ``Options``
    model (`themis.options`, listed below)."""


class GuideConfig(Section):
    """The step guide: at each step the policy proposes K candidates and the guide picks one."""

    name: Annotated[str, GUIDES.named("none")] = "none"
    """``gprm`` (GUI-PRA: memory, UI perception tools, rubric), ``prm`` (the standard PRM
    baseline), a guide of your own as ``package.module:Class``, or ``none`` (one candidate,
    no guide)."""
    model: ModelConfig | None = None
    """The guide's model; None uses the policy's."""
    pointer: ModelConfig | None = None
    """A pointing model for GUI-PRA's point tool (e.g. Molmo behind an OpenAI-compatible
    server); None points by matching the text the UI parser read."""
    candidates: int = Field(default=8, ge=1, le=8)
    """K, the candidates proposed at each step (each with its own seed); GUI-PRA's paper used 8."""
    seeds: list[int] | None = None
    """Seeds of the K candidates; None takes GUI-PRA's (30, 42, 3407, 114514, ...)."""
    temperature: float | None = Field(default=None, ge=0)
    """Forces the candidates' temperature; None samples diversely as the model allows (GUI-PRA's
    0.5 where it takes a temperature). A value the model refuses is an error before the run."""
    top_p: float | None = Field(default=None, gt=0, le=1)
    """Forces the candidates' top_p; None uses GUI-PRA's 0.9 where the model takes it."""
    options: Annotated[dict[str, Any], _GUIDE_OPTIONS] = Field(default_factory=dict)
    """The guide's own settings (e.g. ``max_tool_calls``, ``memory_threshold``, ``parser``):
    the fields of its ``Options`` model (`gprm.options`, listed below)."""


class BranchConfig(Section):
    """The ``branch`` strategy: one rollout to step `at`, a checkpoint of its environment
    there, then `branches` rollouts continuing from that checkpoint (the models of
    ``wide.mixture``, judged like a wide run). Needs environments that checkpoint (``qemu``)."""

    at: int = Field(default=5, ge=1)
    """Steps of the shared prefix: the checkpoint is taken after this many steps."""
    branches: int = Field(default=2, ge=1, le=64)
    """Rollouts continuing from the checkpoint."""


class RunConfig(Section):
    """Everything a run needs; written to ``config.json`` (secrets redacted)."""

    policy: ModelConfig = ModelConfig()
    """The worker's model (also reflection, coding agent and grounding unless set below)."""
    grounding: ModelConfig | None = None
    """A separate grounding model (e.g. UI-TARS behind an OpenAI-compatible server)."""
    code_model: ModelConfig | None = None
    """A separate model for the coding agent."""
    reflection_model: ModelConfig | None = None
    """A separate model for reflection."""
    worker: WorkerConfig = Field(default_factory=WorkerConfig)
    """The flat worker: reflection, history, grounding units, coding budget, facts. Its
    platform is taken from the environment."""
    environment: EnvironmentSection = Field(default_factory=default_settings)
    """Where the rollouts run: ``kind`` names an environment kind (``agent-s3 run --help``
    lists them) and the other keys are that kind's settings."""
    rollout: RolloutConfig = RolloutConfig()
    limits: LimitsConfig = LimitsConfig()
    """Rate limits as one budget shared by every call of the run."""
    sim_models: Path | None = None
    """A YAML file merged over core/llm/sim/models.yaml: the figures of simulated models
    (``sim/openai/...``): latencies, tokens, the account's rate limits, their behaviour."""
    executor: ExecutorConfig = ExecutorConfig()
    """In-process asyncio (the default) or a Ray cluster."""
    strategy: Annotated[str, STRATEGIES.named()] = "single"
    """How a task is run: ``single`` is one rollout; ``retry`` runs rollouts until the critic
    accepts one (at most ``critic.attempts``); ``wide`` runs N rollouts and a judge picks one;
    ``branch`` runs one rollout to ``branch.at`` steps, checkpoints it and continues it as
    ``branch.branches`` rollouts, judged as ``wide``."""
    critic: CriticConfig = CriticConfig()
    """The critic that ``retry`` asks."""
    wide: WideConfig = WideConfig()
    """N rollouts and a judge, for the ``wide`` strategy (and the judge and mixture of ``branch``)."""
    branch: BranchConfig = BranchConfig()
    """Where and how wide the ``branch`` strategy forks."""
    guide: GuideConfig = GuideConfig()
    """The step guide of every rollout (any strategy); ``name: none`` runs without one."""
    models: Annotated[dict[str, dict[str, Any]], _PROFILES] = Field(default_factory=dict)
    """Per-model capability overrides, e.g. ``{"openai/my-proxy": {"temperature": "none"}}``
    (fields of `core.llm.profiles.Profile`; `agent-s3 models check` prints the result)."""
    out_dir: Path = Path("runs")
    """Where run folders are written."""
    run_id: str | None = None
    """Name of the run folder; None makes one from the time."""
    label: str | None = None
    """A note carried into the run's files, e.g. that the policy is scripted."""
    durable: bool = True
    """fsync every file of the run folder as it is written (false: a killed process still
    leaves each file whole or absent, a power cut may not; a simulated run at scale writes
    hundreds of thousands of files and need not wait on the disk for each)."""
    seed: int | None = None
    """Seed of the policy's decoding, when the provider honours one."""
    max_module_error_share: float = Field(default=0.0, ge=0, le=1)
    """Share of a module's records (guide steps, narratives, selections, critic verdicts,
    policy calls) that may fail for good before `run` and `bench` exit non-zero (status 3).
    0 by default: a failure is counted only after the model layer's retry budget is spent,
    so each one is a real outage or refusal that left a step unguided, a rollout unnarrated
    or a verdict missing, and the results then do not measure what the configuration says."""
    prices: dict[str, Price] = Field(default_factory=dict)
    """Dollars per million tokens by ``provider/model`` name (``input``, ``output``,
    ``cached_input``, ``cache_write``); wins over the maintained list prices of
    `genai-prices` and prices models it does not list (e.g. your ``vllm/`` server)."""


    @model_validator(mode="after")
    def _settle_for_kind(self) -> RunConfig:
        """Apply the environment kind's settle time unless `rollout.settle_seconds` was given."""
        rollout = self.rollout
        kind = self.environment.kind
        by_kind = rollout.settle_by_kind.get(kind, get_kind(kind).settle_seconds)
        if by_kind is not None and "settle_seconds" not in rollout.model_fields_set:
            self.rollout = rollout.model_copy(update={"settle_seconds": by_kind})
        return self


def load_run_config(sources: Iterable[str | Path | Mapping[str, Any]]) -> RunConfig:
    """Defaults, then each YAML file or ``key=value`` override in order."""
    return load_config(RunConfig, list(sources))
