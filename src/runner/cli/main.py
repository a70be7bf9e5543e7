"""The ``agent-s3`` console script: one app, each command in a module of its own.

``run`` (`runner.cli.run`), ``bench`` (`runner.cli.bench`), ``env``, ``aws``, ``judge`` and
``report``, ``critic``, ``filter`` and ``critic-bench``, ``sweep``, ``models``, ``tasks`` and
``config``. The app is a `GuardedTyper`: an error a user can fix is one ``error:`` line.
"""

from __future__ import annotations

from .aws import app as aws_app
from .bench import app as bench_app
from .config import config_app
from .critic import register as register_critic_commands
from .env import app as env_app
from .errors import GuardedTyper
from .judge import judge_command, report_command
from .models import models_app
from .run import run
from .sweep import sweep_command
from .tasks import app as tasks_app

__all__ = ["app"]

app = GuardedTyper(help="Test-time scaling runner for computer-use agents.", no_args_is_help=True)
app.add_typer(env_app, name="env")
register_critic_commands(app)
app.command("judge")(judge_command)
app.command("report")(report_command)
app.add_typer(bench_app, name="bench")
app.add_typer(aws_app, name="aws")
app.command("sweep")(sweep_command)
app.add_typer(models_app, name="models")
app.add_typer(tasks_app, name="tasks")
app.add_typer(config_app, name="config")
app.command("run")(run)
