"""What both local protocol servers share: lifecycle, auth, the request log, in-flight
counting, and turning a scripted `Reply` into a success, an HTTP error or a fault."""

from __future__ import annotations

import asyncio
import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Self

from aiohttp import web

from core.llm.errors import ScriptError
from core.llm.scripted import Reply, Script, ScriptRequest, estimate_usage
from core.llm.structured import ReplyFormat
from core.llm.types import ChatMessage, GenerateConfig, Usage

from .schema_rules import nonconformity
from .thinking import spend
from .wire import WireError

__all__ = ["FakeServer", "SeenRequest", "WireError"]

#: Enough for a few full-HD screenshots per request.
MAX_BODY = 64 * 1024 * 1024


@dataclass(frozen=True)
class SeenRequest:
    """One request as the server received it (kept in memory only)."""

    path: str
    #: Lower-cased header names; authorization and x-api-key values are masked.
    headers: dict[str, str]
    #: The JSON body, or None when it was not JSON.
    body: Any
    #: The credential presented (x-api-key, or the bearer token), for auth assertions.
    credential: str | None


class FakeServer(ABC):
    """A loopback HTTP server speaking one provider's protocol, answering from a `Script`.

    Use as `async with OpenAIServer(script) as server:` and point a client at
    `server.base_url`. `Reply.error=<status>` answers that HTTP error (with `retry_after`
    as Retry-After, `message` as the error text); an exception as `Reply.error` answers
    500 with its text; `Reply.delay` holds the answer back, `Reply.fault` drops the
    connection ("drop") or answers a truncated ("malformed") or empty ("empty") body.
    A request beyond the script's end is answered 400 and fails `script.assert_done()`.

    The servers are strict: a request the real service refuses for the model it names
    (a sampling value, the token-limit field, reasoning settings, images, cache
    breakpoints, a retired or unknown model) is refused the same way, with the real error
    body, before the script is consulted; see `testing.llm.strict`.
    """

    #: The route this protocol serves, and the tag recorded as the request's module.
    path: str
    kind: str

    def __init__(self, script: Script | str, *, host: str = "127.0.0.1", port: int = 0,
                 api_key: str | None = None, provider: str | None = None) -> None:
        self.script = script if isinstance(script, Script) else Script.get(script)
        #: Whose models this server pretends to serve (its rules come from their profiles).
        self.provider = provider or self.kind
        self.host = host
        self.port = port
        self._api_key = api_key
        self.requests: list[SeenRequest] = []
        #: Requests refused by the protocol's rules, in order.
        self.refused: list[WireError] = []
        #: Scripted replies that did not conform to the schema their request asked for.
        self.nonconforming: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(script={self.script.name!r}, base_url={self.root_url!r})"

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    @abstractmethod
    def base_url(self) -> str:
        """The base URL the provider's SDK expects."""

    async def start(self) -> Self:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post(self.path, self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # The protocol-specific half.

    @abstractmethod
    def check(self, body: dict[str, Any], headers: dict[str, str]) -> None:
        """Raise `WireError` for a request the real service would refuse (`testing.llm.strict`)."""

    @abstractmethod
    def parse(self, body: Any) -> tuple[list[ChatMessage], GenerateConfig]:
        """Read the request as the real API would; raise `WireError` where it would refuse."""

    @abstractmethod
    def render(self, body: Any, reply: Reply, usage: Usage, thinking: int) -> dict[str, Any]:
        """The protocol's success body (`thinking`: the reasoning tokens within `usage`)."""

    def reply_schema(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The JSON schema the request asks the reply in (`testing.llm.schema_rules`), after
        refusing, with `WireError`, one the real service refuses; None: free text."""
        return None

    def format_name(self, body: dict[str, Any]) -> str:
        """The name the request gives its reply format ("reply" where the protocol has none)."""
        return "reply"

    def thinking(self, body: dict[str, Any], reply: Reply) -> int:
        """Tokens the model thinks before `reply` (`testing.llm.thinking`); none by default."""
        return 0

    def output_limit(self, body: dict[str, Any]) -> int | None:
        """The request's output limit, thinking included (None: the model's own)."""
        return None

    @abstractmethod
    def error_body(self, status: int, message: str, code: str | None = None) -> dict[str, Any]:
        """The protocol's error body (`code`: the protocol's error code or type, if scripted)."""

    @abstractmethod
    def refusal_body(self, error: WireError) -> dict[str, Any]:
        """The protocol's error body for a refused request, with the real code, param and type."""

    # The shared half.

    def _credential(self, request: web.Request) -> str | None:
        key = request.headers.get("x-api-key")
        auth = request.headers.get("authorization", "")
        if not key and auth.lower().startswith("bearer "):
            key = auth[7:].strip()
        return key or None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        headers = {k.lower(): ("***" if k.lower() in ("authorization", "x-api-key") else v)
                   for k, v in request.headers.items()}
        credential = self._credential(request)
        self.requests.append(SeenRequest(request.path, headers, body, credential))
        if self._api_key is not None and credential != self._api_key:
            return self._error(401, "invalid api key")
        try:
            if not isinstance(body, dict):
                raise WireError(400, "the request body is not a JSON object")
            self.check(body, headers)
            schema = self.reply_schema(body)
            messages, config = self.parse(body)
            if schema is not None:  # scripts see what the request asked the reply in
                name = self.format_name(body)
                config = config.model_copy(update={"reply_format": ReplyFormat(
                    name=name if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) else "reply", json_schema=schema)})
            reply = self.script.take(ScriptRequest(messages, config, f"http:{self.kind}"))
        except WireError as exc:
            self.refused.append(exc)
            return web.json_response(self.refusal_body(exc), status=exc.status)
        except ScriptError as exc:
            return self._error(400, str(exc))
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return self._respond(request, body, messages, reply, schema)

    def _respond(self, request: web.Request, body: Any, messages: list[ChatMessage],
                 reply: Reply, schema: dict[str, Any] | None = None) -> web.StreamResponse:
        if isinstance(reply.error, int) and reply.fault != "html":
            headers = {"retry-after": str(reply.retry_after)} if reply.retry_after is not None else {}
            headers.update(reply.headers or {})
            return self._error(reply.error, reply.message or _DEFAULT_MESSAGES.get(reply.error, "error"),
                               headers, reply.code)
        if isinstance(reply.error, BaseException):
            return self._error(500, f"{type(reply.error).__name__}: {reply.error}")
        if reply.fault == "drop":
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)  # never reaches the client: the socket is gone
        if reply.fault == "malformed":
            return web.Response(text='{"id": "trunc', content_type="application/json")
        if reply.fault == "empty":
            return web.json_response({})
        if isinstance(reply.error, int) and reply.fault == "html":
            page = (f"<!DOCTYPE html><html><head><title>{reply.error} Bad Gateway</title></head><body><center>"
                    f"<h1>{reply.error} Bad Gateway</h1></center><hr><center>nginx</center>" + " " * 2000
                    + "</body></html>")
            return web.Response(status=reply.error, text=page, content_type="text/html")
        rules = self.script.image_rules or (self.kind if self.kind in ("openai", "anthropic") else None)
        written = reply.refusal or reply.text if reply.finish_reason == "refusal" else reply.text
        usage = reply.usage or estimate_usage(messages, written, rules)  # type: ignore[arg-type]
        thought = 0
        if reply.usage is None and reply.finish_reason == "stop":
            spent = spend(reply.text, self.thinking(body, reply), self.output_limit(body))
            thought = spent.thinking
            usage = usage.model_copy(update={"output_tokens": spent.thinking + spent.text_tokens})
            if spent.cut:
                reply = replace(reply, text=spent.text, finish_reason="length")
        if schema is not None and reply.finish_reason == "stop":
            problem = nonconformity(schema, reply.text)
            if problem is not None:
                # The real service answers a structured request only in its schema: a script
                # that does not is a broken test, failed loudly (and by `assert_done`).
                message = (f"script {self.script.name!r}: the scripted reply does not conform to the schema "
                           f"its request asked for ({problem}): {reply.text[:120]!r}")
                self.nonconforming.append(message)
                self.script.overruns.append(message)
                return self._error(400, message)
        return web.json_response(self.render(body, reply, usage, thought))

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None,
               code: str | None = None) -> web.Response:
        return web.json_response(self.error_body(status, message, code), status=status, headers=headers)


_DEFAULT_MESSAGES = {
    400: "bad request",
    401: "invalid api key",
    403: "permission denied",
    404: "model not found",
    408: "request timeout",
    429: "rate limit reached, slow down",
    500: "internal server error",
    502: "bad gateway",
    503: "service unavailable",
    529: "overloaded",
}
