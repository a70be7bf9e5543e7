"""One set-up, one scorer: every step and getter type the 369 tasks use goes to OSWorld's own code.

Each type is either run by the pinned desktop-env (a ``SetupController._<type>_setup`` method,
a ``desktop_env.evaluators.getters`` function) or refused with its reason; the project has no
step or getter implementation left to disagree with OSWorld's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from environments.tasks import TaskRunError, iter_task_files, load_task, run_setup
from environments.tasks import getters as getters_module
from environments.tasks import steps as steps_module
from environments.tasks.door import NO_BROWSER, Endpoint
from environments.tasks.getters import REFUSED_GETTERS, getter_refusal
from environments.tasks.official import getter, setup_controller_class
from environments.tasks.steps import REFUSED_STEPS, step_refusal
from reference_data import OSWORLD_TASKS as REFERENCE
from reference_data import requires_osworld_tasks


@pytest.fixture(scope="module")
def used_types() -> tuple[Counter[str], Counter[str]]:
    steps: Counter[str] = Counter()
    getters: Counter[str] = Counter()
    for domain, path in iter_task_files(REFERENCE / "examples"):
        task = load_task(path, domain)
        steps.update(s.type for s in task.all_steps())
        for call in task.evaluator.calls():
            getters.update(spec.type for spec in (call.result, call.expected) if spec is not None)
    return steps, getters


@requires_osworld_tasks
def test_every_step_type_is_the_official_controllers_or_refused(used_types: Any) -> None:
    steps, _ = used_types
    controller = setup_controller_class()
    assert controller.__module__ == "desktop_env.controllers.setup"
    assert len(steps) == 13
    refused = {}
    for step_type in steps:
        assert hasattr(controller, f"_{step_type}_setup"), step_type
        reason = step_refusal(step_type)
        if reason is not None:
            refused[step_type] = reason
    assert refused == {k: REFUSED_STEPS[k] for k in ("googledrive", "login") if k in steps}
    local = Endpoint("127.0.0.1", 1, browser_unreachable=NO_BROWSER)
    assert step_refusal("chrome_open_tabs", local) == NO_BROWSER
    assert step_refusal("execute", local) is None


@requires_osworld_tasks
def test_every_getter_type_is_an_official_function_or_refused(used_types: Any) -> None:
    _, getters = used_types
    assert len(getters) == 47
    for getter_type in getters:
        reason = getter_refusal(getter_type)
        if reason is None:
            fn = getter(getter_type).fn
            assert fn.__module__.startswith("desktop_env.evaluators.getters."), getter_type
            assert fn.__name__ == f"get_{getter_type}"
        else:
            assert getter_type in REFUSED_GETTERS or "pip install" in reason or "has no getter" in reason, (
                reason
            )
    refused = {t: getter_refusal(t) for t in getters if getter_refusal(t) is not None}
    print("refused getters:", refused)
    local = Endpoint("127.0.0.1", 1, browser_unreachable=NO_BROWSER)
    assert getter_refusal("open_tabs_info", local) == NO_BROWSER  # reads env.chromium_port
    assert getter_refusal("vm_file", local) is None


def test_no_project_step_or_getter_implementations_remain() -> None:
    src = Path(steps_module.__file__).parent
    for module in (steps_module, getters_module):
        text = Path(module.__file__ or "").read_text()
        assert "STEP_TYPES" not in text and "GETTER_TYPES" not in text
    assert not (src / "browser_steps.py").exists()


def _step(kind: str, **parameters: object) -> dict[str, Any]:
    return {"type": kind, "parameters": parameters}


async def test_a_failing_official_step_stops_the_setup_with_one_line(
    shell_client: Any, make_ctx: Any
) -> None:
    ctx = make_ctx(
        {
            "id": "stops",
            "config": [
                _step("execute", command="touch ~/first", shell=True),
                _step("open", path="~/missing.txt"),
                _step("execute", command="touch ~/after", shell=True),
            ],
        }
    )
    with pytest.raises(TaskRunError) as info:
        await run_setup(shell_client, ctx)
    message = str(info.value)
    assert message.startswith("task stops: setup step 1 (open) failed: ") and "\n" not in message
    assert "missing.txt" in message
    assert (shell_client.home / "first").exists() and not (shell_client.home / "after").exists()
