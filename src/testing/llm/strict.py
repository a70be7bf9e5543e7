"""The request rules the strict local servers enforce, read from the model's profile.

The rules themselves (which model takes which parameter, its image limits, whether it is
still served) live in `core/llm/model_rules.yaml` with their sources; this module only
says how each protocol refuses a request that breaks them, with the real error bodies'
status, `type`, `code` and `param`. Protocol-wide rules that are no model's property are
here, each with its source:

- Anthropic: at most 4 `cache_control` breakpoints per request (prompt caching docs);
  tool_choice `any` / `tool` refused while the model thinks, also by default (extended
  thinking docs, "tool use with thinking"; Claude Opus 5.5 notes);
  the `anthropic-version` header is required (API versioning docs); with more than 20
  images each side must be at most 2000 px (vision docs).
- OpenAI: `max_tokens` is refused by reasoning models, which take `max_completion_tokens`
  (Chat Completions reference).
"""

from __future__ import annotations

from typing import Any

from core.llm.image_tokens import image_size
from core.llm.profiles import MIN_THINKING_BUDGET, THINKING_TOP_P, Profile, resolve

from ._decode import decode_b64, decode_data_url
from .base import WireError

__all__ = ["check_anthropic", "check_openai"]

MAX_BREAKPOINTS = 4
#: Above this many images in one Anthropic request, each side is limited to MANY_IMAGES_SIDE.
MANY_IMAGES = 20
MANY_IMAGES_SIDE = 2000


def _bad(message: str, *, code: str | None = None, param: str | None = None) -> WireError:
    return WireError(400, message, code=code, param=param)


def _served(profile: Profile, model: str, *, anthropic: bool) -> None:
    if profile.served:
        return
    if anthropic:
        raise WireError(404, f"model: {model}", kind="not_found_error")
    raise WireError(404, f"The model `{model}` does not exist or you do not have access to it.",
                    code="model_not_found", kind="invalid_request_error")


def _check_images(profile: Profile, images: list[bytes], *, anthropic: bool) -> None:
    limits = profile.images
    if limits.max_count is not None and len(images) > limits.max_count:
        raise _bad(f"Too many images: {len(images)} given, at most {limits.max_count} per request")
    if limits.max_total_bytes is not None and sum(map(len, images)) > limits.max_total_bytes:
        raise _bad(f"The images total more than {limits.max_total_bytes} bytes")
    side = limits.max_side
    if anthropic and len(images) > MANY_IMAGES:
        side = min(side or MANY_IMAGES_SIDE, MANY_IMAGES_SIDE)
    for index, data in enumerate(images):
        if limits.max_bytes is not None and len(data) > limits.max_bytes:
            raise _bad(f"image {index}: image exceeds {limits.max_bytes // (1024 * 1024)} MB maximum: "
                       f"{len(data)} bytes")
        size = image_size(data)
        if side is not None and size is not None and max(size) > side:
            raise _bad(f"image {index}: image dimensions exceed max allowed size: {side} pixels")


def check_openai(body: dict[str, Any], provider: str) -> None:
    """Refuse a Chat Completions body the model named in it would refuse."""
    model = str(body.get("model"))
    profile = resolve(f"{provider}/{model}")
    _served(profile, model, anthropic=False)
    for name in ("temperature", "top_p", "seed", "top_k"):
        if name in body and not _takes(profile, name):
            raise _bad(f"Unsupported parameter: '{name}' is not supported with this model.",
                       code="unsupported_parameter", param=name)
    temperature = body.get("temperature")
    if temperature is not None:
        if profile.temperature == "one" and temperature != 1:
            raise _bad(f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                       "Only the default (1) value is supported.", code="unsupported_value", param="temperature")
        if not 0 <= temperature <= profile.temperature_max:
            raise _bad(f"Invalid 'temperature': decimal out of range: {temperature}.", code="invalid_value",
                       param="temperature")
    if "max_tokens" in body and profile.token_field == "max_completion_tokens" and profile.reasoning != "none":
        raise _bad("Unsupported parameter: 'max_tokens' is not supported with this model. "
                   "Use 'max_completion_tokens' instead.", code="unsupported_parameter", param="max_tokens")
    effort = body.get("reasoning_effort")
    if effort is not None:
        if profile.reasoning == "none":
            raise _bad("Unsupported parameter: 'reasoning_effort' is not supported with this model.",
                       code="unsupported_parameter", param="reasoning_effort")
        if profile.efforts and effort not in profile.efforts:
            allowed = ", ".join(f"'{e}'" for e in profile.efforts)
            raise _bad(f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
                       f"Supported values are: {allowed}.", code="unsupported_value", param="reasoning_effort")
    images: list[bytes] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "image_url" and isinstance(part.get("image_url"), dict):
                images.append(decode_data_url(part["image_url"].get("url"))[1])
    _check_images(profile, images, anthropic=False)


def _takes(profile: Profile, name: str) -> bool:
    if name == "temperature":
        return profile.temperature != "none"
    return bool(getattr(profile, name))


def check_anthropic(body: dict[str, Any], headers: dict[str, str]) -> None:
    """Refuse a Messages body the model would refuse under the request's API version."""
    version = headers.get("anthropic-version")
    if not version:
        raise _bad("anthropic-version: header is required")
    model = str(body.get("model"))
    profile = resolve(f"anthropic/{model}", anthropic_version=version)
    _served(profile, model, anthropic=True)
    for name in ("temperature", "top_p", "top_k"):
        if name in body and not _takes(profile, name):
            raise _bad(f"{name}: Extra inputs are not permitted" if version >= "2026-10-21"
                       else f"{name} is not supported for this model")
    temperature, top_p = body.get("temperature"), body.get("top_p")
    if temperature is not None and not 0 <= temperature <= profile.temperature_max:
        raise _bad(f"temperature: Input should be less than or equal to {profile.temperature_max:g}")
    if profile.sampling_exclusive and temperature is not None and top_p is not None:
        raise _bad("`temperature` and `top_p` cannot both be specified for this model. Please use only one.")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and profile.max_output is not None and max_tokens > profile.max_output:
        raise _bad(f"max_tokens: {max_tokens} > {profile.max_output}, which is the maximum allowed number "
                   f"of output tokens for {model}")
    _check_thinking(profile, body)
    marks, images = _scan_blocks(body)
    if marks > MAX_BREAKPOINTS:
        raise _bad(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}.")
    _check_images(profile, images, anthropic=True)


def _check_thinking(profile: Profile, body: dict[str, Any]) -> None:
    found = body.get("thinking")
    thinking: dict[str, Any] = found if isinstance(found, dict) else {}
    effort = (body.get("output_config") or {}).get("effort") if isinstance(body.get("output_config"), dict) else None
    if effort is not None and profile.efforts and effort not in profile.efforts:
        raise _bad(f"output_config.effort: Input should be {', '.join(map(repr, profile.efforts))}")
    kind = thinking.get("type") if found is not None else None
    if kind == "disabled" and not profile.thinking_off:
        raise _bad('"thinking.type.disabled" is not supported for this model. Use "thinking.type.adaptive" '
                   'and "output_config.effort" to control thinking behavior.')
    thinks = kind in ("enabled", "adaptive") or (kind is None and profile.thinks_by_default)
    forced = body.get("tool_choice")
    choice: dict[str, Any] = forced if isinstance(forced, dict) else {}
    if thinks and choice.get("type") in ("any", "tool"):
        raise _bad("Thinking may not be enabled when tool_choice forces tool use.")
    if kind is None or kind == "disabled":
        return
    if profile.reasoning == "none":
        raise _bad("thinking: this model does not support thinking")
    if kind == "enabled":
        if profile.reasoning == "adaptive":
            raise _bad('"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
                       'and "output_config.effort" to control thinking behavior.')
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            raise _bad(f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}")
        if not isinstance(body.get("max_tokens"), int) or budget >= body["max_tokens"]:
            raise _bad("`max_tokens` must be greater than `thinking.budget_tokens`.")
    elif kind == "adaptive":
        if profile.reasoning == "budget":
            raise _bad('"thinking.type.adaptive" is not supported for this model; use "thinking.type.enabled" '
                       "with budget_tokens")
    else:
        raise _bad(f"thinking.type: Input tag {kind!r} is not one of 'enabled', 'adaptive', 'disabled'")
    if profile.thinking_limits_sampling:
        for name in ("temperature", "top_k"):
            if name in body:
                raise _bad(f"`{name}` may not be set when thinking is enabled")
        top_p = body.get("top_p")
        if top_p is not None and not THINKING_TOP_P[0] <= top_p <= THINKING_TOP_P[1]:
            raise _bad(f"`top_p` must be between {THINKING_TOP_P[0]} and 1 when thinking is enabled")


def _scan_blocks(body: dict[str, Any]) -> tuple[int, list[bytes]]:
    """(cache_control breakpoints, image bytes) over the system prompt and the messages."""
    blocks: list[Any] = []
    if isinstance(body.get("system"), list):
        blocks += body["system"]
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            blocks += content
    marks, images = 0, []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        marks += "cache_control" in block
        source = block.get("source")
        if block.get("type") == "image" and isinstance(source, dict) and source.get("type") == "base64":
            images.append(decode_b64(source.get("data")))
    return marks, images
