"""OSWorld's proxy for a local desktop's ``proxy: true`` task, when OSWorld's pool file is there
(``PROXY_CONFIG_FILE``, else desktop-env's default path; `environments.osworld.proxy`).

The pool's next proxy (OSWorld's own round robin) becomes the upstream of a relay on the
desktop's ``127.0.0.1:18888`` (`proxy_relay`, tinyproxy's part), and the desktop's shell gets
``http(s)_proxy`` as OSWorld's ``_proxy_setup`` writes them into ``~/.bashrc``, pointing at the
relay so the credentials stay on the host. The task's Chrome is then started behind it by
OSWorld's own launch step. The relay lives until the desktop's next revert.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

from environments.osworld.client import OSWorldClient
from environments.osworld.proxy import env_plan, next_proxy

from .proxy_relay import ProxyRelay

if TYPE_CHECKING:
    from .environment import LocalEnvironment

__all__ = ["PROXY_PORT", "close_proxy", "proxied", "start_local_proxy"]

#: Where OSWorld's tasks expect the proxy inside the desktop (tinyproxy's port in its VM).
PROXY_PORT = 18888
_RELAYS: weakref.WeakKeyDictionary[LocalEnvironment, ProxyRelay] = weakref.WeakKeyDictionary()
_EXPORTS = "".join(f"export {name}=http://127.0.0.1:{PROXY_PORT}\n"
                   for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"))


def proxied(env: LocalEnvironment) -> bool:
    """Whether OSWorld's proxy is set up on the desktop now."""
    return env in _RELAYS


def close_proxy(env: LocalEnvironment) -> None:
    relay = _RELAYS.pop(env, None)
    if relay is not None:
        relay.close()


async def start_local_proxy(env: LocalEnvironment, client: OSWorldClient, task_id: str) -> bool:
    """Set up OSWorld's proxy on `env` for task `task_id`; False when no pool file is there."""
    plan = env_plan()
    if not plan.enabled:
        return False
    proxy = next_proxy(plan)
    netns = f"/proc/{env.info.pid}/ns/net"
    relay = await asyncio.to_thread(ProxyRelay, netns, (str(proxy.host), int(proxy.port)),
                                    username=proxy.username, password=proxy.password, port=PROXY_PORT)
    _RELAYS[env] = relay
    command = ["bash", "-c", f"printf %s {_shell_quote(_EXPORTS)} >> ~/.bashrc"]
    result = await client.execute(command, timeout=30.0)
    if not result.ok:
        close_proxy(env)
        raise RuntimeError(f"task {task_id}: could not write the proxy settings into ~/.bashrc: {result.stderr[:200]}")
    return True


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
