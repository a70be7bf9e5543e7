"""``agent-s3 models check``: every model a run would use, what it accepts and costs, and
(when keys are present) one real request each with exactly the run's parameters, so a
10-rollout run never meets a refused parameter at step 1.

`check_models(cfg)` is the resolution half, without calls: ``run`` and ``bench`` call it
before starting any environment, so a retired model or a value a model refuses is one
clear line instead of a 400 in the first step.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from PIL import Image, ImageDraw
from pydantic import BaseModel
from rich.markup import escape

from bjudge import JUDGES, AnswerReply, FactsReply, sees_screens
from core.config import ConfigError
from core.images import encode_png
from core.llm import (
    ChatMessage,
    GenerateConfig,
    ImagePart,
    MissingAPIKeyError,
    ModelError,
    PriceTable,
    RetryPolicy,
    Sampling,
    TextPart,
    is_scripted,
)
from core.llm.profiles import ProfileError, check, resolve, set_overrides
from gprm import GUIDES, PAPER_SEEDS, ScoreReply
from themis import CRITICS

from ..config import ModelConfig, RunConfig, load_run_config
from ..guided import guided_config
from ..mixture import MixtureError, parse_mixture
from ..models import chat_model
from ..strategy import strategy_class
from ..terminal import SafeConsole
from ..wide_config import JudgeModelConfig
from .errors import fail
from .options import Configs

__all__ = ["ModelUse", "check_models", "models_app", "ping_messages", "planned_uses"]

models_app = typer.Typer(help="The models a run uses: profiles, prices, a preflight request each.",
                         no_args_is_help=True)

PING = "Reply with the single word: ok"
#: A check is quick: a few attempts within a minute, not a run's ten-minute budget per call.
CHECK_RETRY = RetryPolicy(budget=60, max_attempts=3)
#: With a reply contract the ping asks for one object in it (any values): the schema is
#: then refused or taken by the provider before the run, not at its first call.
PING_CONTRACT = "This is a connection check before a run: answer with one object in the given format, any values."


@dataclass(frozen=True)
class ModelUse:
    """One role's model and what its calls send: the decoding settings, the ledger module
    (whose output limit a call gets), whether a screenshot goes with it, and the reply
    contract it asks in (natively where the provider enforces schemas)."""

    role: str
    name: str
    base_url: str | None
    api_key: str | None
    config: GenerateConfig
    module: str = "policy"
    image: bool = True
    contract: type[BaseModel] | None = None


def _use(role: str, model: ModelConfig | JudgeModelConfig, config: GenerateConfig, *, module: str,
         image: bool = True, contract: type[BaseModel] | None = None) -> ModelUse:
    return ModelUse(role, model.model, model.base_url,
                    model.api_key.get_secret_value() if model.api_key else None,
                    model.generate.merged(config), module, image, contract)


def _critic_call(name: str, options: dict[str, Any]) -> tuple[GenerateConfig, type[BaseModel] | None]:
    """The decoding and reply contract of the retry strategy's critic's deciding call, as its
    class declares them (``reply_contract``; its options' ``generate_config``)."""
    cls = CRITICS.get(name)
    model = cls.Options
    given = {k: v for k, v in options.items() if k in ("temperature", "max_tokens") and k in model.model_fields}
    make = getattr(model(**given), "generate_config", None)
    return (make() if callable(make) else GenerateConfig.deterministic()), getattr(cls, "reply_contract", None)


def planned_uses(cfg: RunConfig) -> list[ModelUse]:
    """Every (role, model, settings) the run would call, in the order a run meets them.
    Roles without a model of their own use each policy model (each mixture entry's)."""
    cfg = guided_config(cfg)
    worker = cfg.worker
    diverse = GenerateConfig(sampling=Sampling.diverse(cfg.wide.temperature), seed=0)
    # (role, name, base_url, key, the model's own decoding) of each policy model.
    bases: list[tuple[str, str, str | None, str | None, GenerateConfig]] = []
    strategy = strategy_class(cfg)
    if strategy.samples_mixture and cfg.wide.mixture is not None:
        for entry in parse_mixture(cfg.wide.mixture):
            bases.append((f"policy x{entry.count}", entry.model, entry.base_url,
                          entry.api_key.get_secret_value() if entry.api_key else None, entry.decoding))
    else:
        policy = cfg.policy
        bases.append(("policy", policy.model, policy.base_url,
                      policy.api_key.get_secret_value() if policy.api_key else None, policy.generate))
    uses: list[ModelUse] = []
    for role, name, url, key, own in bases:
        decoding = own.merged(worker.generate)
        if strategy.samples_mixture and decoding.temperature is None and decoding.sampling is None:
            decoding = decoding.merged(diverse)  # the wide strategy's stochastic rollouts
        if cfg.guide.name != "none":  # candidates are drawn with seeds
            decoding = decoding.merged(GenerateConfig(seed=(cfg.guide.seeds or PAPER_SEEDS)[0]))
        uses.append(ModelUse(role, name, url, key, decoding, "policy"))
    roles = [("grounding", "grounding", cfg.grounding, worker.grounding.generate, True),
             ("code agent", "code_agent", cfg.code_model, worker.coding.generate, worker.code_agent),
             ("reflection", "reflection", cfg.reflection_model, worker.reflection_generate, worker.reflection)]
    for role, module, separate, generate, used in roles:
        if not used:
            continue
        if separate is not None:
            uses.append(_use(role, separate, generate, module=module))
        else:
            uses += [ModelUse(role, name, url, key, own.merged(generate), module) for _, name, url, key, own in bases]
    if cfg.guide.name != "none":
        deterministic = GenerateConfig.deterministic()
        uses.append(_use("guide", cfg.guide.model or cfg.policy, deterministic, module="prm", contract=ScoreReply))
        if cfg.guide.pointer is not None:
            uses.append(_use("pointer", cfg.guide.pointer, deterministic, module="prm"))
    if "critic" in strategy.roles:
        decoding, contract = _critic_call(cfg.critic.name, cfg.critic.options)
        uses.append(_use(f"critic ({cfg.critic.name})", cfg.critic.model or cfg.policy, decoding, module="critic",
                         contract=contract))
    if "judge" in strategy.roles and cfg.wide.judge != "none":
        wide = cfg.wide
        judge = wide.judge_model or cfg.policy
        narrator = wide.narrator_model or judge
        # The narrator sees each transition's screens; the judge reads narratives (WebJudge
        # looks at screenshots too).
        uses += [_use("narrator", narrator, wide.narrative.generate, module="narrative", contract=FactsReply),
                 _use("judge", judge, wide.judging.generate, module="judge", image=sees_screens(wide.judge),
                      contract=AnswerReply)]
    return uses


def check_models(cfg: RunConfig) -> list[ModelUse]:
    """Resolve every model of the run and raise `ValueError` naming each setting a model
    refuses (and each retired or unknown model), before any environment starts."""
    try:
        set_overrides(cfg.models)
        uses = planned_uses(cfg)
        found = [line for use in uses for line in check(use.name, use.config)]
    except (ProfileError, MixtureError) as e:
        raise ValueError(str(e)) from None
    if found:
        lines = list(dict.fromkeys(found))
        raise ValueError("; ".join(lines) + " (change the model or the setting; `agent-s3 models check` shows "
                         "what each model accepts)")
    return uses


def _price(name: str, prices: PriceTable) -> str:
    """The price the run would charge: its `prices:` override first, else the list price."""
    price = prices.lookup(name)
    if price is None:
        return "no known price (give one under prices: in the run config)"
    given = " (the run's prices:)" if name in prices.overrides else ""
    return f"${price.input:g} in / ${price.output:g} out per Mtok{given}"


@functools.cache
def ping_screenshot() -> bytes:
    """A 1280x800 screen-like PNG: what a role that sees screens sends (a server that cannot
    take images fails here, not at step 1)."""
    img = Image.new("RGB", (1280, 800), (236, 236, 236))
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, 1279, 32), fill=(48, 48, 60))
    draw.rectangle((80, 120, 760, 560), fill=(255, 255, 255), outline=(90, 90, 90))
    draw.text((100, 140), "agent-s3 models check", fill=(0, 0, 0))
    return encode_png(img)


def ping_messages(use: ModelUse) -> list[ChatMessage]:
    """The check's request for `use`: the role's kind of content, a screenshot if it sees one."""
    text = PING_CONTRACT if use.contract is not None else PING
    if not use.image:
        return [ChatMessage(role="user", content=text)]
    return [ChatMessage(role="user", content=[TextPart(text=text), ImagePart(data=ping_screenshot())])]


async def _ping(use: ModelUse) -> str:
    """One request with the run's settings, as the role sends it; the outcome as a short phrase."""
    if is_scripted(use.name):  # a script or a recording: resolved, never called by the preflight
        return "not called (a test provider)"
    try:
        model = chat_model(ModelConfig.named(use.name, use.base_url, use.api_key), retry=CHECK_RETRY)
    except MissingAPIKeyError as e:
        return f"not called: no key ({e.variable} unset)"
    started = time.perf_counter()
    config = model.reply_config(use.config, use.contract) if use.contract is not None else use.config
    try:
        out = await model.generate(ping_messages(use), module=use.module, config=config)
    except ModelError as e:
        return f"FAILED: {e}"
    finally:
        await model.aclose()
    sent = "with a screenshot" + (", " if use.contract is not None else "") if use.image else ""
    if use.contract is not None:
        sent += "structured" if out.structured else "free text"
    return (f"ok in {time.perf_counter() - started:.1f} s ({out.usage.input_tokens} in / {out.usage.output_tokens} out"
            f"{'; ' + sent if sent else ''})")


def _given(model: str | None, mixture: str | None, guide: str | None, guide_model: str | None,
           critic: str | None, critic_model: str | None, judge: str | None) -> dict[str, Any]:
    given: dict[str, Any] = {}
    if model:
        given["policy"] = {"model": model}
    if mixture:
        given["strategy"] = "wide"
        given.setdefault("wide", {})["mixture"] = mixture
    if judge:
        given.setdefault("wide", {})["judge"] = judge
    if guide or guide_model:
        given["guide"] = {"name": guide or "gprm", **({"model": {"model": guide_model}} if guide_model else {})}
    if critic or critic_model:
        given["strategy"] = "retry"
        given["critic"] = {"name": critic or "themis",
                           **({"model": {"model": critic_model}} if critic_model else {})}
    return given


@models_app.command("check")
def check_command(
    config: Configs = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Policy model as provider/model.")] = None,
    mixture: Annotated[str | None, typer.Option("--mixture", help="Wide scaling: provider/model*count,...")] = None,
    guide: Annotated[str | None, typer.Option("--guide", help=GUIDES.help("Step guide: "))] = None,
    guide_model: Annotated[str | None, typer.Option("--guide-model", help="The guide's model.")] = None,
    critic: Annotated[str | None, typer.Option("--critic", help=CRITICS.help("Critic of the retry strategy: "))] = None,
    critic_model: Annotated[str | None, typer.Option("--critic-model", help="The critic's model.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help=JUDGES.help("Wide scaling's judge: "))] = None,
    call: Annotated[bool, typer.Option("--call/--no-call", help="Make one request per model whose key is set.")] = True,
) -> None:
    """Resolve every model the run would use (policy, grounding, code agent, reflection,
    guide, narrator, judge, critic); print each one's profile and price; with keys, make one
    minimal request per model with exactly the parameters the run would send."""
    console = SafeConsole(highlight=False)
    try:
        cfg = load_run_config([*(config or []), _given(model, mixture, guide, guide_model, critic, critic_model, judge)])
        set_overrides(cfg.models)
        uses = planned_uses(cfg)
    except (ConfigError, ProfileError, MixtureError, ValueError) as e:
        raise fail(str(e)) from None
    prices = PriceTable(cfg.prices)
    failed = False
    pings: dict[tuple[str, str | None, str, str, bool, str], str] = {}
    shown: set[str] = set()
    for use in uses:
        profile = resolve(use.name)
        console.print(f"[bold]{escape(use.role)}[/bold] {escape(use.name)}: {escape(profile.summary())}")
        if use.name not in shown:  # price and sources once per model
            shown.add(use.name)
            console.print(f"  price: {escape(_price(use.name, prices))}")
            for source in profile.sources:
                console.print(f"  source: {escape(source)}")
        problems = check(use.name, use.config)
        for line in problems:
            console.print(f"  [red]refused:[/red] {escape(line)}")
        failed = failed or bool(problems)
        if call and not problems:
            key = (use.name, use.base_url, use.config.model_dump_json(), use.module, use.image,
                   use.contract.__name__ if use.contract else "")
            if key not in pings:
                pings[key] = asyncio.run(_ping(use))
            outcome = pings[key]
            failed = failed or outcome.startswith("FAILED")
            console.print(f"  request: {escape(outcome)}")
    if failed:
        raise typer.Exit(code=1)
