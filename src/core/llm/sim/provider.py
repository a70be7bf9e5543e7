"""`sim/<provider>/<model>`: a simulated model that answers like the real one, in time.

It stands for the real model named after ``sim/`` (``sim/openai/gpt-5-2025-08-07``) and
is held to that model's rules: each request is built and checked by the real provider's
adapter (a setting the model refuses fails here too), it is priced as the real model, and
the account's rate limits (`limits`) refuse a request with the provider's own 429, built
by its SDK from a response carrying its rate-limit headers. Every answer carries those
headers too, so the run's shared rate budget learns from them as from the real API.

A call takes the simulated time the module's figures draw (`models.yaml`), through
`core.clock.sleep`: on a simulated run's clock it costs no real time. What the model
*says* comes from the responder the runner registers (`set_responder`), which knows each
role's reply format; usage comes from the figures, so costs follow the paper's, not the
size of the simulated screenshots.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx2

from core import clock

from ..errors import ScriptError
from ..profiles import Profile, resolve
from ..provider import ModelAPI, current_module, provider_class, split_name
from ..retry import RetryDecision
from ..types import ChatMessage, GenerateConfig, ModelOutput, Usage
from .config import sim_models
from .limits import body_bytes, limiter_for

__all__ = ["SIM_LABEL", "SimAPI", "SimRequest", "set_responder"]

#: How every simulated model's calls are labelled.
SIM_LABEL = "SIMULATED model: replies, latencies and token counts are simulated (core/llm/sim/models.yaml)"
#: Round trip of a refused request (the provider answers 429 at once).
_REFUSAL_SECONDS = 0.05
_IMITATED = ("openai", "anthropic")


@dataclass(frozen=True)
class SimRequest:
    """What a simulated model was asked, for the responder."""

    model: str
    """The real model it stands for, e.g. ``openai/gpt-5-2025-08-07``."""
    module: str
    messages: list[ChatMessage]
    config: GenerateConfig
    behaviour: Mapping[str, Any]
    """The ``behaviour`` section of the simulated models' figures."""


Responder = Callable[[SimRequest], str]
_RESPONDER: list[Responder] = []


def set_responder(responder: Responder) -> None:
    """Register what simulated models say (the runner's replies for each role)."""
    _RESPONDER[:] = [responder]


class SimAPI(ModelAPI):
    """A simulated stand-in for the model named after ``sim/``."""

    provider = "sim"
    default_max_connections: ClassVar[int] = 32
    #: Labelled wherever a result of a run that used it appears.
    label: ClassVar[str] = SIM_LABEL

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 120.0) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, timeout=timeout)
        imitated, real = split_name(model)  # sim/openai/gpt-5 -> ("openai", "gpt-5")
        if imitated not in _IMITATED:
            raise ScriptError(f"sim/{model}: a simulated model stands for a real one, sim/openai/... or "
                              f"sim/anthropic/..., not {imitated!r}")
        self.imitated = imitated
        self.real_model = real
        wire = provider_class(imitated)
        # Concurrent calls per endpoint unless the run says otherwise: the real adapter's
        # (an instance value over the class's, since it depends on the model stood for).
        setattr(self, "default_max_connections", wire.default_max_connections)  # noqa: B010
        self._wire: Any = wire(real, api_key="sim-key", base_url="http://sim.invalid/v1" if imitated == "openai"
                          else "http://sim.invalid", timeout=timeout)
        self._rng = random.Random(zlib.crc32(model.encode()))
        self._checked: set[str] = set()

    @property
    def stands_for(self) -> str:
        return f"{self.imitated}/{self.real_model}"

    @property
    def profile(self) -> Profile:
        """The real model's rules, so a setting it refuses is refused here too."""
        return resolve(self.stands_for)

    async def generate(self, messages: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        shape_key = config.model_dump_json()
        if shape_key not in self._checked:  # built and checked as for the real model, once per settings
            self._wire.request(messages, config)
            self._checked.add(shape_key)
        figures = sim_models()
        module = current_module.get() or "default"
        shape = figures.module(module)
        rng = self._rng
        prompt = int(shape.input_tokens.draw(rng))
        cached = int(prompt * shape.cached_share)
        output = max(int(shape.output_tokens.draw(rng)), 1)
        finish = "stop"
        if config.max_tokens is not None and output > config.max_tokens:
            output, finish = config.max_tokens, "length"
        limiter = limiter_for(self.imitated, self.real_model, figures.limits(self.imitated))
        verdict = limiter.charge(prompt, output, cached)
        if not verdict.admitted:
            await clock.sleep(_REFUSAL_SECONDS)
            raise self._refusal(verdict.status, verdict.headers, body_bytes(verdict))
        await clock.sleep(shape.latency.draw(rng))
        if not _RESPONDER:
            raise ScriptError("simulated models answer through a responder and none is registered "
                              "(the runner registers its simulated replies: runner.sim_replies)")
        text = _RESPONDER[0](SimRequest(self.stands_for, module, list(messages), config, figures.behaviour))
        return ModelOutput(text=text, model=self.real_model,
                           usage=Usage(input_tokens=prompt, output_tokens=output, cached_tokens=cached),
                           finish_reason=finish, rate_headers=dict(verdict.headers))

    def _refusal(self, status: int, headers: Mapping[str, str], body: bytes) -> Exception:
        """The provider SDK's own exception for this response."""
        url = "http://sim.invalid/v1/chat/completions" if self.imitated == "openai" else "http://sim.invalid/v1/messages"
        response = httpx2.Response(status, headers={**headers, "content-type": "application/json"}, content=body,
                                   request=httpx2.Request("POST", url))
        error: Exception = self._wire.client._make_status_error_from_response(response)  # type: ignore[attr-defined]
        return error

    def announces_rate_limits(self) -> bool:
        return True  # every answer carries the account's headers, as the providers' APIs do

    def classify(self, error: BaseException) -> RetryDecision:
        return self._wire.classify(error)

    def concurrency_key(self) -> str:
        return f"sim:{self.imitated}:{self.base_url or ''}"

    async def aclose(self) -> None:
        await self._wire.aclose()
