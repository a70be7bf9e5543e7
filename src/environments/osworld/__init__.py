"""OSWorld's in-VM protocol from the host side: the client, the sandbox and the desktop over it."""

from environments.osworld.client import EndpointMissing, OSWorldClient, ReplyLost, ServerError
from environments.osworld.desktop import PYAUTOGUI_PREFIX, OSWorldDesktop
from environments.osworld.sandbox import ServerSandbox

__all__ = [
    "PYAUTOGUI_PREFIX",
    "EndpointMissing",
    "OSWorldClient",
    "OSWorldDesktop",
    "ReplyLost",
    "ServerError",
    "ServerSandbox",
]
