"""Model capability profiles: what a model's API accepts, resolved from "provider/model".

The rules live in `model_rules.yaml` beside this module, each with its source; the
adapters shape requests by them, the strict local servers refuse by them, and
`agent-s3 models check` prints them. Callers state intent (`Sampling`), never raw values
a model may refuse; a value a user sets explicitly that the model cannot take is reported
by `check()` before a run starts, and refused by the adapter before it reaches the wire.

Per-model overrides (`models: {"openai/my-proxy": {temperature: none}}` in a run's
config) are installed with `set_overrides()`; they travel in an environment variable so
worker processes resolve the same profiles.
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import re
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import ModelError
from .types import GenerateConfig
from .vision import VisionRules, vision_fields

__all__ = [
    "OVERRIDES_ENV",
    "THINKING_BUDGETS",
    "TODAY_ENV",
    "ImageLimits",
    "Profile",
    "ProfileError",
    "UnsupportedSettingError",
    "anthropic_thinking",
    "check",
    "problems",
    "resolve",
    "sampling_params",
    "sdk_shutdowns",
    "set_overrides",
    "today",
]

#: JSON object {"provider/model": {field: value}} of per-model profile overrides.
OVERRIDES_ENV = "AGENT_S3_MODEL_PROFILES"

#: Thinking budget in tokens per reasoning effort for models with budgeted thinking. The
#: Messages API requires budget_tokens >= 1024 and < max_tokens (extended thinking docs).
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 32768,
                    "max": 32768}
MIN_THINKING_BUDGET = 1024
#: While thinking, Claude on API version 2023-06-01 refuses temperature and top_k and takes
#: top_p only within this range (extended thinking docs, "feature compatibility").
THINKING_TOP_P = (0.95, 1.0)

Status = Literal["active", "legacy", "deprecated", "retired", "unknown"]
Structured = Literal["none", "openai_strict", "json_schema", "anthropic", "anthropic_tool", "vllm", "guided_json"]
#: YYYY-MM-DD that stands for today when deciding whether a shutdown date has passed (the
#: test suite pins it; unset, the real date).
TODAY_ENV = "AGENT_S3_TODAY"


class ProfileError(ModelError, ValueError):
    """The rules file or a profile override is invalid."""


class UnsupportedSettingError(ModelError, ValueError):
    """A setting given explicitly that the model's API refuses; raised before any request."""


class ImageLimits(BaseModel):
    """How many and how large images one request may carry (None: no limit known)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    max_count: int | None = None
    """Images per request."""
    max_bytes: int | None = None
    """Bytes of one image, encoded."""
    max_total_bytes: int | None = None
    """Bytes of all images of a request together."""
    max_side: int | None = None
    """Pixels of an image's longer side."""


class Profile(BaseModel):
    """What one model's API accepts. `sources` says where each rule applied comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    name: str
    """``provider/model``, as resolved (set by the lookup, not by an override)."""
    family: str
    """The rule of `model_rules.yaml` that matched the name."""
    temperature: Literal["any", "one", "none"] = "any"
    """Temperatures it takes: any in 0..`temperature_max`, only 1, or none at all."""
    temperature_max: float = 2.0
    """The highest temperature it takes."""
    top_p: bool = True
    """Whether it takes top_p."""
    top_k: bool = False
    """Whether it takes top_k."""
    seed: bool = False
    """Whether it takes a seed."""
    sampling_exclusive: bool = False
    """Temperature and top_p may not be sent together."""
    thinking_limits_sampling: bool = False
    """While thinking: no temperature or top_k, top_p only in THINKING_TOP_P."""
    reasoning: Literal["none", "effort", "budget", "adaptive", "budget_or_adaptive"] = "none"
    """How reasoning is asked for: not at all, by effort, by a token budget, adaptive, or either."""
    efforts: tuple[str, ...] = ()
    """The reasoning efforts it takes (e.g. low, medium, high)."""
    default_effort: str | None = None
    """The effort the model reasons at when the request names none (None: it does not)."""
    thinking_off: bool = True
    """Whether reasoning can be switched off (Claude's thinking.type "disabled")."""
    token_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    """The request field that carries the output limit."""
    max_output: int | None = None
    """Output tokens at most; a larger limit is refused (None: unknown)."""
    images: ImageLimits = ImageLimits()
    """How many and how large images one request may carry."""
    structured: Structured = "none"
    """How a reply in a JSON schema is asked for (`core.llm.structured`); "none": free text."""
    vision: VisionRules = VisionRules()
    """The largest screenshot it sees unshrunk and how it states points (`core.llm.vision`)."""
    status: Status = "active"
    """Its lifecycle at the provider: active, legacy, deprecated, retired or unknown."""
    shutdown: str | None = None
    """The date (YYYY-MM-DD) the provider stops serving it, when announced."""
    replacement: str | None = None
    """The model the provider names in its place."""
    sources: tuple[str, ...] = ()
    """Where each rule applied comes from (set by the lookup)."""

    @property
    def thinks_by_default(self) -> bool:
        """The model reasons (and spends output tokens on it) when the request says nothing."""
        return self.reasoning != "none" and self.default_effort not in (None, "none")

    @property
    def served(self) -> bool:
        """False for a retired or unknown model: the API answers 404."""
        return self.status not in ("retired", "unknown")

    def summary(self) -> str:
        """One line for the CLI."""
        temp = {"any": f"temperature 0-{self.temperature_max:g}", "one": "temperature 1 only",
                "none": "no temperature"}[self.temperature]
        bits = [temp, "top_p" if self.top_p else "no top_p"]
        if self.sampling_exclusive and self.top_p and self.temperature != "none":
            bits.append("not both")
        bits += ["top_k" if self.top_k else "no top_k", "seed" if self.seed else "no seed"]
        reasoning: str = self.reasoning if self.reasoning != "none" else "no reasoning"
        if self.efforts:
            reasoning += f" ({'/'.join(self.efforts)})"
        if self.thinks_by_default:
            reasoning += f", thinks by default ({self.default_effort})"
        bits += [reasoning, self.token_field]
        if self.structured != "none":
            bits.append(f"structured outputs ({self.structured})")
        status = self.status + ((f" since {self.shutdown}" if self.status == "retired" else f" until {self.shutdown}")
                                if self.shutdown else "")
        if self.replacement and self.status != "active":
            status += f", use {self.replacement}"
        return f"{self.family}: {', '.join(bits)}; {status}"


@functools.cache
def _rules() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("model_rules.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "providers" not in data:
        raise ProfileError("core/llm/model_rules.yaml: expected a mapping with 'providers'")
    return data


def _overrides() -> dict[str, dict[str, Any]]:
    raw = os.environ.get(OVERRIDES_ENV)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ProfileError(f"{OVERRIDES_ENV} is not JSON ({exc}); unset it or fix it") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{OVERRIDES_ENV} must be a JSON object of model name -> profile fields")
    return data


def set_overrides(overrides: dict[str, dict[str, Any]]) -> None:
    """Install per-model profile overrides for this process and the ones it starts.

    Each is validated now, so a misspelt field is one clear error before the run."""
    for name, fields in overrides.items():
        resolve(name, extra=fields)
    if overrides:
        os.environ[OVERRIDES_ENV] = json.dumps(overrides)
    else:
        os.environ.pop(OVERRIDES_ENV, None)


def resolve(name: str, *, anthropic_version: str | None = None,
            extra: dict[str, Any] | None = None) -> Profile:
    """The profile of "provider/model" (a provider outside the rules accepts everything:
    the scripted and replay test providers). `anthropic_version` defaults to what the
    installed SDK sends."""
    provider, _, model = name.partition("/")
    rules = _rules()
    fields: dict[str, Any] = dict(rules.get("defaults", {}))
    sources: list[str] = []
    spec = rules["providers"].get(provider)
    if spec is None:
        fields.update(top_k=True, seed=True, reasoning="effort",
                      efforts=["none", "minimal", "low", "medium", "high", "xhigh", "max"])
        family = f"{provider}-any"
        sources.append("a test provider: accepts every setting")
    else:
        _merge(fields, spec.get("base", {}))
        sources.append(str(spec.get("base_source", "")).strip())
        chosen = next((f for f in spec.get("families", []) if re.search(f["match"], model)), None)
        if chosen is None:
            chosen = dict(spec.get("fallback", {"name": f"{provider}-generic"}))
            naming = spec.get("naming")
            if naming and re.search(naming, model) and chosen.get("status") is None:
                chosen["status"] = "unknown"
        family = str(chosen["name"])
        _merge(fields, {k: v for k, v in chosen.items() if k not in ("name", "match", "source")})
        sources.append(str(chosen.get("source", "")).strip())
        if provider == "anthropic":
            version = anthropic_version or default_anthropic_version()
            rule = rules.get("anthropic_versions", {}).get(version, {})
            _merge(fields, {k: v for k, v in rule.items() if k != "source"})
            if rule.get("source"):
                sources.append(f"anthropic-version {version}: {str(rule['source']).strip()}")
    _lifecycle(provider, model, fields, sources)
    seen, seen_source = vision_fields(rules.get("vision", []), name)
    if seen:
        _merge(fields, {"vision": seen})
        sources.append(f"vision: {seen_source.strip()}")
    override = {**_overrides().get(name, {}), **(extra or {})}
    if override:
        _merge(fields, override)
        sources.append(f"overridden in config: {', '.join(sorted(override))}")
    try:
        return Profile(name=name, family=family, sources=tuple(s for s in sources if s), **fields)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise ProfileError(f"profile of {name}: {where}: {problem['msg']} (see core/llm/model_rules.yaml "
                           "for the fields)") from None


def today() -> datetime.date:
    """The date shutdowns are measured against: `TODAY_ENV` when set, else the real one."""
    raw = os.environ.get(TODAY_ENV, "").strip()
    if raw:
        try:
            return datetime.date.fromisoformat(raw)
        except ValueError:
            raise ProfileError(f"{TODAY_ENV}={raw!r} is not a YYYY-MM-DD date; unset it or fix it") from None
    return datetime.date.today()


def _lifecycle(provider: str, model: str, fields: dict[str, Any], sources: list[str]) -> None:
    """The installed SDK's shutdown date of `model`, if it lists one, and the status its
    date implies: a date that has passed retires the model (404), one ahead deprecates it."""
    listed = sdk_shutdowns().get(f"{provider}/{model}")
    if listed is not None:
        date, source = listed
        if date is None:  # listed as not a model at all
            fields["status"] = "unknown"
            sources.append(source)
            return
        fields["shutdown"] = date
        sources.append(source)
    shutdown = fields.get("shutdown")
    if not shutdown or fields.get("status") in ("retired", "unknown"):
        return
    if datetime.date.fromisoformat(str(shutdown)) <= today():
        fields["status"] = "retired"
        sources.append(f"shut down on {shutdown}, which has passed")
    elif fields.get("status", "active") == "active":
        fields["status"] = "deprecated"


_OPENAI_DEPRECATED = re.compile(r'^- ((?:"[^"]+",?\s*)+):\s*(.*?)(?=^- |\Z)', re.M | re.S)
_SHUTDOWN_DATE = re.compile(r"shutdown date:\s*(\d{4}-\d{2}-\d{2})", re.I)
_LONG_DATE = re.compile(r"([A-Z][a-z]+) (\d{1,2})(?:st|nd|rd|th)?, (\d{4})")


@functools.cache
def sdk_shutdowns() -> dict[str, tuple[str | None, str]]:
    """{"provider/model": (YYYY-MM-DD or None for "not a model", source)} from the installed
    SDKs' own lists: openai's `types/shared/chat_model.py` ("Deprecated values", announced
    shutdown dates) and anthropic's `_data/deprecated_models.py` (end-of-life dates)."""
    found: dict[str, tuple[str | None, str]] = {}
    try:
        import openai
        text = resources.files("openai").joinpath("types/shared/chat_model.py").read_text(encoding="utf-8")
        version = openai.__version__
    except (ImportError, OSError):  # pragma: no cover - the SDK is a dependency
        text, version = "", "?"
    notes = text.split("Deprecated values:", 1)[1] if "Deprecated values:" in text else ""
    for names, note in _OPENAI_DEPRECATED.findall(notes):
        found_date = _SHUTDOWN_DATE.search(note)
        if found_date is None and "not a supported model" not in note.lower():
            continue
        value = found_date.group(1) if found_date else None
        for name in re.findall(r'"([^"]+)"', names):
            found[f"openai/{name}"] = (value, f"openai SDK {version} types/shared/chat_model.py: "
                                       + (f"shutdown date {value}" if value else "not a supported model ID"))
    try:
        import anthropic
        from anthropic._data.deprecated_models import DEPRECATED_MODELS
    except ImportError:  # pragma: no cover
        return found
    for name, when in DEPRECATED_MODELS.items():
        parsed = _LONG_DATE.search(when)
        if parsed is None:
            continue
        month, day, year = parsed.groups()
        date = datetime.datetime.strptime(f"{month} {day} {year}", "%B %d %Y").date().isoformat()
        found[f"anthropic/{name}"] = (date, f"anthropic SDK {anthropic.__version__} _data/deprecated_models.py: "
                                      f"end of life {date}")
    return found


def _merge(into: dict[str, Any], layer: dict[str, Any]) -> None:
    for key, value in layer.items():
        if key in ("images", "vision") and isinstance(value, dict):
            into[key] = {**into.get(key, {}), **value}
        else:
            into[key] = value


def default_anthropic_version() -> str:
    """The `anthropic-version` header the installed anthropic SDK sends."""
    try:
        from anthropic._constants import ANTHROPIC_API_VERSION
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return "2023-06-01"
    return str(ANTHROPIC_API_VERSION)


def _preferred(config: GenerateConfig) -> tuple[float | None, float | None]:
    """(temperature, top_p) the caller's intent asks for, where the model takes them."""
    sampling = config.sampling
    if sampling is None or sampling.intent == "default":
        return (sampling.temperature if sampling else None), (sampling.top_p if sampling else None)
    base = 0.0 if sampling.intent == "deterministic" else 1.0
    return (sampling.temperature if sampling.temperature is not None else base), sampling.top_p


def problems(profile: Profile, config: GenerateConfig, *, thinking: bool = False) -> list[str]:
    """Why the explicitly set values of `config` would be refused by this model (empty: none)."""
    out: list[str] = []
    t, p = config.temperature, config.top_p
    if t is not None:
        if profile.temperature == "none" or (thinking and profile.thinking_limits_sampling):
            out.append(f"temperature {t:g} is not accepted (this model takes no temperature"
                       f"{' while thinking' if thinking else ''})")
        elif profile.temperature == "one" and t != 1:
            out.append(f"temperature {t:g} is not accepted (this model takes only temperature 1)")
        elif not 0 <= t <= profile.temperature_max:
            out.append(f"temperature {t:g} is outside 0-{profile.temperature_max:g}")
    if p is not None:
        if not profile.top_p:
            out.append(f"top_p {p:g} is not accepted (this model takes no top_p)")
        elif thinking and profile.thinking_limits_sampling and not THINKING_TOP_P[0] <= p <= THINKING_TOP_P[1]:
            out.append(f"top_p {p:g} is not accepted while thinking (only {THINKING_TOP_P[0]}-1)")
        elif t is not None and profile.sampling_exclusive:
            out.append("temperature and top_p are not accepted together; set one of them")
    effort = config.reasoning_effort
    if effort is not None and effort != "none":
        if profile.reasoning == "none":
            out.append(f"reasoning_effort {effort!r} is not accepted (this model does not reason)")
        elif profile.reasoning in ("effort", "adaptive", "budget_or_adaptive") and profile.efforts \
                and _effort(profile, effort) not in profile.efforts:
            out.append(f"reasoning_effort {effort!r} is not accepted; use one of {', '.join(profile.efforts)}")
        elif profile.reasoning == "budget" and effort not in THINKING_BUDGETS:
            out.append(f"reasoning_effort {effort!r} has no thinking budget; use one of "
                       f"{', '.join(THINKING_BUDGETS)}")
    elif effort == "none" and profile.reasoning == "effort" and "none" not in profile.efforts:
        out.append(f"reasoning_effort 'none' is not accepted; use one of {', '.join(profile.efforts)}")
    elif effort == "none" and profile.thinks_by_default and not profile.thinking_off:
        out.append(f"reasoning_effort 'none' is not accepted (this model always thinks); use one of "
                   f"{', '.join(profile.efforts)}")
    if not profile.served:
        what = "retired" if profile.status == "retired" else "not a model the provider serves"
        tail = f"; use {profile.replacement}" if profile.replacement else "; check the model name"
        out.append(f"the model is {what}{tail}")
    return out


def _effort(profile: Profile, effort: str) -> str:
    """Anthropic's adaptive effort has no "minimal": the nearest is "low"."""
    if profile.reasoning in ("adaptive", "budget_or_adaptive") and effort == "minimal":
        return "low"
    return effort


def check(name: str, config: GenerateConfig) -> list[str]:
    """`problems()` of model `name`, each line naming the model; for the run's preflight."""
    return [f"{name}: {p}" for p in problems(resolve(name), config)]


def sampling_params(profile: Profile, config: GenerateConfig, *, thinking: bool = False) -> dict[str, Any]:
    """temperature / top_p / top_k / seed to send: explicit values (refused with
    `UnsupportedSettingError` when the model cannot take them), else the intent's
    preferences where the model takes them; a model without a temperature samples by its
    own default, which is already diverse."""
    found = problems(profile, config.model_copy(update={"reasoning_effort": None}), thinking=thinking)
    if found:
        raise UnsupportedSettingError(f"{found[0]}; remove it from the config")
    want_t, want_p = _preferred(config)
    t = config.temperature if config.temperature is not None else want_t
    p = config.top_p if config.top_p is not None else want_p
    out: dict[str, Any] = {}
    takes_t = profile.temperature == "any" and not (thinking and profile.thinking_limits_sampling)
    if t is not None and takes_t and not (config.top_p is not None and config.temperature is None
                                          and profile.sampling_exclusive):
        out["temperature"] = min(max(t, 0.0), profile.temperature_max)
    if p is not None and profile.top_p and not (profile.sampling_exclusive and "temperature" in out):
        if not thinking or THINKING_TOP_P[0] <= p <= THINKING_TOP_P[1] or not profile.thinking_limits_sampling:
            out["top_p"] = p
    k = config.sampling.top_k if config.sampling is not None else None
    if k is not None and profile.top_k and not (thinking and profile.thinking_limits_sampling):
        out["top_k"] = k
    if config.seed is not None and profile.seed:
        out["seed"] = config.seed
    return out


def anthropic_thinking(profile: Profile, effort: str | None, max_tokens: int) -> dict[str, Any]:
    """`thinking` / `output_config` / `max_tokens` for a Claude request at this effort
    (effort "none" on a model that thinks by default switches its thinking off)."""
    if effort == "none" and profile.thinks_by_default and profile.thinking_off:
        return {"max_tokens": max_tokens, "thinking": {"type": "disabled"}}
    if effort is None or effort == "none" or profile.reasoning == "none":
        return {"max_tokens": max_tokens}
    if profile.reasoning in ("adaptive", "budget_or_adaptive"):
        return {"max_tokens": max_tokens, "thinking": {"type": "adaptive"},
                "output_config": {"effort": _effort(profile, effort)}}
    budget = max(THINKING_BUDGETS.get(effort, MIN_THINKING_BUDGET), MIN_THINKING_BUDGET)
    total = max_tokens + budget  # the answer keeps its own allowance
    if profile.max_output is not None and total > profile.max_output:
        total = profile.max_output
        budget = min(budget, total - 1)
    if budget < MIN_THINKING_BUDGET:
        return {"max_tokens": max_tokens}
    return {"max_tokens": total, "thinking": {"type": "enabled", "budget_tokens": budget}}
