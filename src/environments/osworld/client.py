"""An async client of OSWorld's in-VM server protocol (and of our compatible server).

Every reply is read with a cap (`max_reply_bytes`, from `environments.limits`): a desktop
that answers more is refused, not read. Retries are decided per request: reads (screenshot, sizes, pointer, file, listing) are
retried with backoff on transport errors and 5xx replies; anything that changes the desktop
(`/execute`, `/action`, `/run_*`, `/setup/*`) is retried only when the connection was never
made, so a command whose reply was lost never runs twice (`ReplyLost` instead). A server
that stays unreachable raises `EnvironmentLost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.protocols import EnvError, EnvironmentLost, ExecResult
from environments.limits import FILE_BYTES, REPLY_SLACK, too_large
from environments.tasks.door import DoorRoute

__all__ = ["EndpointMissing", "OSWorldClient", "ReplyLost", "ReplyTooLarge", "ServerError"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: Headers that describe the body as it came over the wire, not the decoded body kept.
_BODY_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding"})
#: Errors after which the request certainly never reached the server.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class ReplyLost(EnvironmentLost):
    """A non-idempotent request may have run but its reply never came; it is not repeated."""


class ServerError(EnvError):
    """The server answered with a status this call does not accept."""

    def __init__(self, path: str, status: int, body: str) -> None:
        super().__init__(f"{path} answered {status}: {body[:300]}")
        self.path = path
        self.status = status
        self.body = body


class ReplyTooLarge(ServerError):
    """The server's reply is larger than a desktop may send (`environments.limits`); none of
    it is kept."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(path, 413, too_large(f"the reply to {path}", size, limit))


class EndpointMissing(ServerError):
    """The server does not have this endpoint (404), e.g. `/action` on an OSWorld VM."""


class OSWorldClient:
    """One pooled HTTP connection to a controller server, a method per endpoint."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
        uds: str | None = None,
        netns: Callable[[], str] | None = None,
        door_url: Callable[[], str | None] | None = None,
        max_reply_bytes: int = FILE_BYTES + REPLY_SLACK,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        #: The most a reply may carry (a file, a recording); more is `ReplyTooLarge`.
        self.max_reply_bytes = max_reply_bytes
        self._token = token or None
        self._uds = uds
        self._netns = netns
        self._door_url = door_url
        if uds is not None and transport is None:
            transport = httpx.AsyncHTTPTransport(uds=uds)
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=timeout,
            limits=httpx.Limits(max_connections=4, max_keepalive_connections=1),
            transport=transport,
            trust_env=False,
        )

    def door_route(self) -> DoorRoute:
        """How OSWorld's own controllers reach this server: its Unix socket or its URL (``door_url``
        when the base URL only names a server whose address changes), and the token."""
        if self._uds is not None:
            return DoorRoute(self._uds, self._token, netns=self._netns)
        current = self._door_url() if self._door_url is not None else self.base_url
        if current is None:
            raise EnvError(f"{self.base_url} has no server address right now")
        url = urlsplit(current)
        if url.hostname is None:
            raise EnvError(f"{current} names no host for OSWorld's controllers to reach")
        return DoorRoute((url.hostname, url.port or 80), self._token, direct=True)

    async def __aenter__(self) -> OSWorldClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- transport ---------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        idempotent: bool,
        timeout: float | None = None,
        ok: Sequence[int] = (200,),
        **kwargs: Any,
    ) -> httpx.Response:
        attempts = self.retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                response = await self._bounded(method, path, timeout=timeout or self.timeout, **kwargs)
            except _NOT_SENT as exc:
                last = exc
                continue
            except httpx.TransportError as exc:
                if not idempotent:
                    raise ReplyLost(
                        f"{method} {path}: no reply ({type(exc).__name__}); not repeated"
                    ) from exc
                last = exc
                continue
            if response.status_code == 401:
                raise EnvError(f"{self.base_url} refused the token (401): pass the server's bearer token")
            if response.status_code == 404 and 404 not in ok:
                raise EndpointMissing(path, 404, response.text)
            if response.status_code in ok:
                return response
            if idempotent and response.status_code >= 500 and attempt + 1 < attempts:
                continue
            raise ServerError(path, response.status_code, response.text)
        raise EnvironmentLost(f"{self.base_url}{path} unreachable after {attempts} attempts: {last!r}")

    async def _bounded(self, method: str, path: str, *, timeout: float, **kwargs: Any) -> httpx.Response:
        """The response with its body read, refused (`ReplyTooLarge`) past `max_reply_bytes`:
        declared larger, or found larger while reading, so no more than that is ever held."""
        request = self._http.build_request(method, path, timeout=timeout, **kwargs)
        response = await self._http.send(request, stream=True)
        limit = self.max_reply_bytes
        try:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise ReplyTooLarge(path, int(declared), limit)
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ReplyTooLarge(path, size, limit)
                chunks.append(chunk)
        finally:
            await response.aclose()
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _BODY_HEADERS]
        return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks), request=request)

    async def _json(
        self, path: str, body: dict[str, Any], *, timeout: float, ok: Sequence[int] = (200,)
    ) -> Any:
        response = await self._request("POST", path, idempotent=False, timeout=timeout, json=body, ok=ok)
        try:
            data = response.json()
        except ValueError as exc:
            raise ServerError(path, response.status_code, response.text) from exc
        if not isinstance(data, dict):
            raise ServerError(path, response.status_code, response.text)
        return data

    # -- recording ---------------------------------------------------------------------------

    async def start_recording(self) -> None:
        """``POST /start_recording``: the server starts an mp4 of its screen (one at a time)."""
        await self._request("POST", "/start_recording", idempotent=False, timeout=30.0)

    async def end_recording(self) -> bytes:
        """``POST /end_recording``: stop the recording and return the mp4's bytes."""
        response = await self._request("POST", "/end_recording", idempotent=False, timeout=60.0)
        return response.content

    # -- reading the screen ------------------------------------------------------------------

    async def screenshot(self) -> bytes:
        """PNG bytes of the whole screen, pointer drawn."""
        response = await self._request("GET", "/screenshot", idempotent=True)
        if not response.content.startswith(_PNG_MAGIC):
            raise ServerError("/screenshot", response.status_code, "reply is not a PNG")
        return response.content

    async def screen_size(self) -> tuple[int, int]:
        data = (await self._request("POST", "/screen_size", idempotent=True)).json()
        return int(data["width"]), int(data["height"])

    async def cursor_position(self) -> tuple[int, int]:
        x, y = (await self._request("GET", "/cursor_position", idempotent=True)).json()
        return int(x), int(y)

    async def platform(self) -> str:
        return (await self._request("GET", "/platform", idempotent=True)).text

    async def accessibility_tree(self) -> str | None:
        """The XML tree, or None when the server cannot produce one."""
        try:
            response = await self._request("GET", "/accessibility", idempotent=True, ok=(200,), timeout=60.0)
        except ServerError:
            return None
        return response.json().get("AT")

    async def wait_ready(self, timeout: float = 60.0, interval: float = 0.2) -> None:
        """Poll until the server answers; `EnvironmentLost` if it never does."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                await self._http.get("/platform", timeout=min(self.timeout, 5.0))
                return
            except httpx.TransportError as exc:
                if asyncio.get_running_loop().time() >= deadline:
                    raise EnvironmentLost(f"{self.base_url} did not come up within {timeout:g} s") from exc
                await asyncio.sleep(interval)

    # -- running things ----------------------------------------------------------------------

    async def execute(
        self,
        command: Sequence[str] | str,
        *,
        shell: bool = False,
        timeout: float | None = None,
        setup: bool = False,
    ) -> ExecResult:
        """`/execute` (or `/setup/execute`); a non-zero exit is `status="error"` here."""
        body: dict[str, Any] = {
            "command": command if isinstance(command, str) else list(command),
            "shell": shell,
        }
        if timeout is not None:
            body["timeout"] = timeout
        path = "/setup/execute" if setup else "/execute"
        data = await self._json(path, body, timeout=(timeout or 120.0) + 30.0, ok=(200, 500))
        if data.get("status") == "error" and "returncode" not in data:
            message = str(data.get("message", ""))
            return ExecResult("timeout" if "timed out" in message else "error", -1, "", message)
        returncode = int(data.get("returncode", -1))
        return ExecResult(
            "ok" if returncode == 0 else "error",
            returncode,
            data.get("output") or "",
            data.get("error") or "",
        )

    async def action(self, code: str, *, timeout: float = 30.0) -> ExecResult:
        """One compiled action in the server's warm executor (`EndpointMissing` elsewhere)."""
        data = await self._json("/action", {"code": code, "timeout": timeout}, timeout=timeout + 15.0)
        return ExecResult(
            data["status"], int(data["returncode"]), data.get("stdout", ""), data.get("stderr", "")
        )

    async def run_python(self, code: str, *, timeout: float = 60.0) -> ExecResult:
        """Python code: `/run_python_script` (CoAct shape), else OSWorld's `/run_python`."""
        try:
            data = await self._json(
                "/run_python_script",
                {"code": code, "timeout": timeout},
                timeout=timeout + 30.0,
                ok=(200, 500),
            )
        except EndpointMissing:
            data = await self._json(
                "/run_python", {"code": code, "timeout": timeout}, timeout=timeout + 30.0, ok=(200, 500)
            )
        if data.get("timed_out") or data.get("error") == "TimeoutExpired":
            return ExecResult("timeout", -1, data.get("output") or "", data.get("error") or "")
        returncode = int(data.get("returncode", data.get("return_code", -1)))
        return ExecResult(
            "ok" if returncode == 0 else "error",
            returncode,
            data.get("output") or "",
            data.get("error") or "",
        )

    async def run_bash_script(
        self, script: str, *, timeout: float = 30.0, working_dir: str | None = None
    ) -> ExecResult:
        """A bash script; OSWorld's shape merges stderr into stdout."""
        body = {"script": script, "timeout": timeout, "working_dir": working_dir}
        data = await self._json("/run_bash_script", body, timeout=timeout + 30.0, ok=(200, 400, 500))
        returncode = int(data.get("returncode", -1))
        output = data.get("output") or ""
        if data.get("timed_out") or (returncode == -1 and "timed out" in output):
            return ExecResult("timeout", -1, output, data.get("error") or "")
        return ExecResult("ok" if returncode == 0 else "error", returncode, output, data.get("error") or "")

    # -- files -------------------------------------------------------------------------------

    async def file(self, path: str) -> bytes | None:
        """The file's bytes, or None when the server has no such file (as OSWorld's controller)."""
        response = await self._request(
            "POST", "/file", idempotent=True, data={"file_path": path}, ok=(200, 404), timeout=120.0
        )
        if response.status_code == 404:
            return None
        return response.content

    async def upload(self, path: str, data: bytes) -> None:
        """Write `data` at `path` in the environment (parent folders created)."""
        await self._request(
            "POST",
            "/setup/upload",
            idempotent=True,
            data={"file_path": path},
            files={"file_data": ("file", data, "application/octet-stream")},
            timeout=600.0,
        )

    async def list_directory(self, path: str) -> dict[str, Any]:
        response = await self._request("POST", "/list_directory", idempotent=True, json={"path": path})
        return dict(response.json()["directory_tree"])

    # -- setup -------------------------------------------------------------------------------

    async def launch(self, command: Sequence[str] | str, *, shell: bool = False) -> None:
        body = {"command": command if isinstance(command, str) else list(command), "shell": shell}
        await self._request("POST", "/setup/launch", idempotent=False, json=body)

    async def open_file(self, path: str, *, timeout: float = 120.0) -> None:
        """Open a file (or start a program) and wait until its window is raised.

        OSWorld's own wait is 30 minutes (slow VMs); two minutes bounds a task's setup here
        while leaving LibreOffice's first start plenty of room. Pass `timeout` to change it.
        """
        body = {"path": path, "timeout": timeout}
        await self._request("POST", "/setup/open_file", idempotent=False, json=body, timeout=timeout + 30.0)

    async def activate_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> None:
        body = {"window_name": window_name, "strict": strict, "by_class": by_class}
        await self._request("POST", "/setup/activate_window", idempotent=False, json=body)

    async def close_window(self, window_name: str, *, strict: bool = False, by_class: bool = False) -> None:
        body = {"window_name": window_name, "strict": strict, "by_class": by_class}
        await self._request("POST", "/setup/close_window", idempotent=False, json=body)
