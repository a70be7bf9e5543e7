"""OSWorld's proxy for a local desktop's ``proxy: true`` task, when OSWorld's pool file is there
(``PROXY_CONFIG_FILE``, else desktop-env's default path; `environments.osworld.proxy`).

The pool's next proxy (OSWorld's own round robin) becomes the upstream of a relay on the
desktop's ``127.0.0.1:18888`` (`proxy_relay`, tinyproxy's part), and the desktop's shell gets
``http(s)_proxy`` as OSWorld's ``_proxy_setup`` writes them into ``~/.bashrc``, pointing at the
relay so the credentials stay on the host. The task's Chrome is then started behind it by
OSWorld's own launch step. The relay lives until the desktop's next revert: its owner
(`tasking.DesktopTasks`) closes it then.
"""

from __future__ import annotations

import asyncio

from environments.osworld.client import OSWorldClient
from environments.osworld.proxy import env_plan, next_proxy

from .proxy_relay import ProxyRelay

__all__ = ["PROXY_PORT", "start_local_proxy"]

#: Where OSWorld's tasks expect the proxy inside the desktop (tinyproxy's port in its VM).
PROXY_PORT = 18888
_EXPORTS = "".join(f"export {name}=http://127.0.0.1:{PROXY_PORT}\n"
                   for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"))


async def start_local_proxy(pid: int, client: OSWorldClient, task_id: str) -> ProxyRelay | None:
    """Set up OSWorld's proxy for task `task_id` on the desktop whose sandbox is process `pid`
    (`client` reaches its controller); the relay, to close at the next revert, or None when
    no pool file is there."""
    plan = env_plan()
    if not plan.enabled:
        return None
    proxy = next_proxy(plan)
    netns = f"/proc/{pid}/ns/net"
    relay = await asyncio.to_thread(ProxyRelay, netns, (str(proxy.host), int(proxy.port)),
                                    username=proxy.username, password=proxy.password, port=PROXY_PORT)
    command = ["bash", "-c", f"printf %s {_shell_quote(_EXPORTS)} >> ~/.bashrc"]
    result = await client.execute(command, timeout=30.0)
    if not result.ok:
        relay.close()
        raise RuntimeError(f"task {task_id}: could not write the proxy settings into ~/.bashrc: {result.stderr[:200]}")
    return relay


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
