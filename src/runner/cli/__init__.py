"""The runner's command line: the ``agent-s3`` console script (`app`, built in
`runner.cli.main`) and one module per command, sharing one set of option helpers
(`runner.cli.options`) and one error path (`runner.cli.errors`).

The orchestration (strategies, executors, rollouts, report: the rest of `runner`) never
imports this package; the import contract checks it.
"""

from .main import app

__all__ = ["app"]
