"""The strategies by name: what ``strategy`` in the run configuration and ``--strategy`` choose.

A strategy is a subclass of `runner.strategy.BaseStrategy` with a ``name`` whose instances
are `runner.strategy.Strategy` (an async callable over a `TaskRun`); its class answers what
the runner asks before a run (rollouts per task, environments at once, model roles, checks,
how it resumes), so the runner never reads a strategy's name. The built-in ones are registered here as ``module:Class``
strings, imported when first chosen (they are built on `runner.strategy`, which reads the
run configuration that validates against this registry); a dotted path
``package.module:Class`` names one of your own.
"""

from __future__ import annotations

from typing import Any

from core.registry import Registry

__all__ = ["QUESTIONS", "STRATEGIES"]

#: What a strategy's class answers (`runner.strategy.BaseStrategy` has every answer).
QUESTIONS = ("roles", "samples_mixture", "board", "finished_by_result", "own_section", "rollouts", "width", "check",
             "resuming")


def _problem(found: Any) -> str | None:
    if not callable(found) or not isinstance(getattr(found, "name", None), str):
        return "not a strategy: a class with a name, whose instances are called with a TaskRun"
    missing = [q for q in QUESTIONS if not hasattr(found, q)]
    if missing:
        return f"not a strategy: it does not answer {', '.join(missing)} (subclass runner.strategy.BaseStrategy)"
    return None


#: Strategy name -> its class (instantiated with no arguments for each run).
STRATEGIES: Registry[Any] = Registry("strategy", check=_problem, name_of=lambda cls: cls.name)
STRATEGIES.register("single", "runner.strategy:SingleRollout", "one rollout")
STRATEGIES.register("retry", "runner.retry:RetryUntilSuccess", "until the critic accepts")
STRATEGIES.register("wide", "runner.wide:WideScaling", "N rollouts and a judge")
STRATEGIES.register("branch", "runner.branch:BranchScaling",
                    "one rollout to --branch-at, then --branches forks of its checkpoint and a judge; --env qemu")
