"""Do-nothing policies, for checking tasks and the harness without an API key.

``scripted/noop`` answers ``agent.done()`` at its first step of any task, and
``scripted/noop-fail`` answers ``agent.fail()`` (what an ``infeasible`` task expects): the task
is set up, the agent ends at once, and the task's own scorer scores the untouched desktop.
Every task should then score 0 (an infeasible one answered FAIL scores 1); a task that scores 1
untouched cannot tell an agent from no agent here. They are scripts, not models, and labelled
SCRIPTED wherever a run is reported (``config.json`` ``label``, the terminal, the report, each
``rollout.json``'s model). Any other role that asks (reflection, grounding, the coding agent,
a narrator, a judge with no model of its own) gets the demo's fixed replies.
"""

from __future__ import annotations

from core.llm import Script, ScriptRequest

from .demo_judge import demo_judge_reply
from .demo_policy import PlannedReplies, action_reply, role_of

__all__ = ["NOOP_MODELS", "NOOP_NOTE", "is_noop", "register_noop"]

#: Model name → the action it answers at once.
NOOP_MODELS = {"scripted/noop": "agent.done()", "scripted/noop-fail": "agent.fail()"}
NOOP_NOTE = ("scripted do-nothing policy: it ends every task at once without acting, so each score is the "
             "task's score untouched; not a model")
#: Calls a registered script answers (a script is a list of steps; this many cover any benchmark).
_CALLS = 200_000


def is_noop(model: str) -> bool:
    return model in NOOP_MODELS


class _Noop:
    """The policy ends the task with `call`; other roles get fixed replies."""

    def __init__(self, call: str) -> None:
        self.call = call
        self.others = PlannedReplies(plan=[])

    def __call__(self, request: ScriptRequest) -> str:
        role = role_of(request.messages)
        if role == "policy":
            return action_reply("A do-nothing check: end the task at once without acting.", self.call)
        if role == "unknown":  # a narrator or judge sharing the policy's model
            return demo_judge_reply(request)
        return self.others(request)


def register_noop(model: str) -> str:
    """Register `model` (one of `NOOP_MODELS`) as a script; returns its name."""
    call = NOOP_MODELS.get(model)
    if call is None:
        raise KeyError(f"{model!r} is not a do-nothing policy; use one of: {', '.join(NOOP_MODELS)}")
    responder = _Noop(call)
    Script(model.split("/", 1)[1], [responder] * _CALLS)
    return model
