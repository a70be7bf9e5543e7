"""Which of a desktop's ports OSWorld's own code dials for a task, read from that code.

A setup step needs Chrome's DevTools port when OSWorld's ``SetupController._<type>_setup``
reads ``self.chromium_port`` (opening, closing tabs, logging in); a getter needs a port when
it reads ``env.chromium_port`` or ``env.vlc_port`` (`environments.tasks.official`). So a
desktop whose DevTools or VLC port is blocked can refuse, before anything runs, the tasks
that would fail on it, naming the port.
"""

from __future__ import annotations

import functools
import inspect

from core.trajectory import Task
from environments.tasks.official import MissingScorer, reads_attribute, setup_controller_class

__all__ = ["PORT_ATTRIBUTES", "task_ports"]

#: The desktop ports a task may need beyond the controller server, by the attribute OSWorld reads.
PORT_ATTRIBUTES = {"chromium": "chromium_port", "vlc": "vlc_port"}


@functools.cache
def _step_reads(step_type: str, attribute: str) -> bool:
    try:
        method = getattr(setup_controller_class(), f"_{step_type}_setup", None)
    except MissingScorer:
        return False
    if method is None:
        return False
    try:
        return f"self.{attribute}" in inspect.getsource(method)
    except (OSError, TypeError):
        return False


@functools.cache
def _getter_reads(getter_type: str, attribute: str) -> bool:
    try:
        return reads_attribute(getter_type, attribute)
    except (KeyError, MissingScorer):
        return False


def task_ports(task: Task) -> set[str]:
    """The ports (``chromium``, ``vlc``) `task`'s setup, postconfig or getters dial."""
    steps = task.all_steps()
    getters = [spec.type for call in task.metric_calls() for spec in (call.result, call.expected)
               if spec is not None]
    return {name for name, attribute in PORT_ATTRIBUTES.items()
            if any(_step_reads(s.type, attribute) for s in steps) or any(_getter_reads(g, attribute) for g in getters)}
