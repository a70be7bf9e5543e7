"""Setup steps, getters and evaluate() through a client that runs real commands in a private home."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from core.protocols import ExecResult
from environments.tasks import TaskRunError, UnsupportedGetter, UnsupportedMetric, UnsupportedStep
from environments.tasks.client import command_not_run, command_output
from environments.tasks.evaluate import evaluate, run_setup


def _step(kind: str, **parameters: object) -> dict:
    return {"type": kind, "parameters": parameters}


async def test_execute_fills_placeholders_and_saves_outputs(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        {
            "config": [
                _step(
                    "execute",
                    command="echo {SCREEN_WIDTH_HALF}x{SCREEN_HEIGHT_HALF} {CLIENT_PASSWORD}",
                    shell="true",
                    stdout="out.txt",
                ),
                _step(
                    "command",
                    command=["bash", "-c", "echo oops >&2; echo $HOME"],
                    stderr="err.txt",
                    stdout="home.txt",
                ),
            ]
        }
    )
    ctx.client_password = "s3cret"
    await run_setup(shell_client, ctx)
    assert (ctx.cache_dir / "out.txt").read_text() == "960x540 s3cret\n"
    assert (ctx.cache_dir / "err.txt").read_text() == "oops\n"
    assert (ctx.cache_dir / "home.txt").read_text().strip() == str(shell_client.home)
    assert [c for c in shell_client.calls if c[0] == "screen_size"] == [("screen_size", None)]


async def test_execute_until_repeats_until_condition(shell_client, make_ctx) -> None:
    script = "n=$(cat ~/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > ~/n; echo count=$n"
    ctx = make_ctx({"config": [_step("execute", command=script, shell=True, until={"stdout": "count=3"})]})
    await run_setup(shell_client, ctx)
    assert (shell_client.home / "n").read_text().strip() == "3"


async def test_upload_and_download_from_local_files(shell_client, make_ctx, tmp_path: Path) -> None:
    absolute = tmp_path / "b.txt"
    absolute.write_text("beta")
    remote = "https://example.invalid/c.txt"
    ctx = make_ctx(
        {
            "config": [
                _step("upload_file", files=[{"local_path": "fixtures/a.txt", "path": "~/in/a.txt"}]),
                _step("download", files=[{"url": f"file://{absolute}", "path": "~/b.txt"}]),
                _step("download", files=[{"url": remote, "path": "~/deep/c.txt"}]),
            ]
        }
    )
    (ctx.task.base_dir / "fixtures").mkdir(parents=True)
    (ctx.task.base_dir / "fixtures" / "a.txt").write_text("alpha")
    ctx.cache_dir.mkdir(parents=True)
    (ctx.cache_dir / f"{uuid.uuid5(uuid.NAMESPACE_URL, remote)}_c.txt").write_text("gamma")
    await run_setup(shell_client, ctx)
    assert (shell_client.home / "in" / "a.txt").read_text() == "alpha"
    assert (shell_client.home / "b.txt").read_text() == "beta"
    assert (shell_client.home / "deep" / "c.txt").read_text() == "gamma"


async def test_remote_download_without_cache_is_one_clear_error(shell_client, make_ctx) -> None:
    url = "https://example.invalid/data.xlsx"
    ctx = make_ctx(
        {"id": "net-task", "config": [_step("download", files=[{"url": url, "path": "~/d.xlsx"}])]}
    )
    with pytest.raises(TaskRunError) as info:
        await run_setup(shell_client, ctx)
    message = str(info.value)
    assert message.startswith("task net-task: cannot fetch") and url in message and "no network" in message
    assert not (shell_client.home / "d.xlsx").exists()


async def test_window_launch_open_and_sleep_steps_reach_the_client(shell_client, make_ctx) -> None:
    (shell_client.home / "notes.txt").write_text("x")
    ctx = make_ctx(
        {
            "config": [
                _step("launch", command="mousepad --disable-server ~/notes.txt"),
                _step("launch", command="xterm -e true", shell=True),
                _step("open", path="~/notes.txt"),
                _step("sleep", seconds=0.01),
                _step("activate_window", window_name="notes.txt - Mousepad", strict=True),
                _step("close_window", window_name="xterm", by_class="true"),
            ]
        }
    )
    await run_setup(shell_client, ctx)
    assert shell_client.calls == [
        ("launch", ["mousepad", "--disable-server", "~/notes.txt"]),
        ("launch", "xterm -e true"),
        ("open", "~/notes.txt"),
        ("activate_window", ("notes.txt - Mousepad", True, False)),
        ("close_window", ("xterm", False, True)),
    ]


async def test_unknown_step_fails_before_anything_runs(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        {
            "id": "tabs",
            "config": [_step("execute", command="touch ~/ran"), _step("googledrive", settings_file="x")],
        }
    )
    with pytest.raises(UnsupportedStep) as info:
        await run_setup(shell_client, ctx)
    assert "task tabs" in str(info.value) and "'googledrive'" in str(info.value)
    assert not (shell_client.home / "ran").exists()


async def test_step_missing_parameter_names_it(shell_client, make_ctx) -> None:
    ctx = make_ctx({"config": [_step("open")]})
    with pytest.raises(TaskRunError, match=r"task t-1: setup step 0 \(open\) has wrong parameters: .*'path'"):
        await run_setup(shell_client, ctx)


def _evaluator(**fields: object) -> dict:
    return {"evaluator": fields}


async def test_evaluate_command_line_exact_match(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        _evaluator(
            func="exact_match",
            result={
                "type": "vm_command_line",
                "command": "[ -d ~/done ] && echo yes || echo no",
                "shell": True,
            },
            expected={"type": "rule", "rules": {"expected": "yes\n"}},
        )
    )
    assert await evaluate(shell_client, ctx) == 0.0
    (shell_client.home / "done").mkdir()
    assert await evaluate(shell_client, ctx) == 1.0
    assert await evaluate(shell_client, ctx, last_action="FAIL") == 0.0


async def test_evaluate_runs_postconfig_then_fetches_file(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        _evaluator(
            postconfig=[_step("execute", command="ls ~/box | sort > ~/listing.txt", shell=True)],
            func="compare_text_file",
            result={"type": "vm_file", "path": "~/listing.txt", "dest": "listing.txt"},
            expected={"type": "cloud_file", "path": "gold/listing.txt", "dest": "gold.txt"},
        )
    )
    (ctx.task.base_dir / "gold").mkdir(parents=True)
    (ctx.task.base_dir / "gold" / "listing.txt").write_text("a\nb\n")
    (shell_client.home / "box").mkdir()
    assert await evaluate(shell_client, ctx) == 0.0
    (shell_client.home / "box" / "b").touch()
    (shell_client.home / "box" / "a").touch()
    assert await evaluate(shell_client, ctx) == 1.0
    assert (ctx.cache_dir / "listing.txt").read_text() == "a\nb\n"


async def test_missing_result_file_scores_zero(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        _evaluator(
            func="check_include_exclude",
            result={"type": "vm_file", "path": "~/nowhere.txt", "dest": "n.txt"},
            expected={"type": "rule", "rules": {"include": ["x"]}},
        )
    )
    assert await evaluate(shell_client, ctx) == 0.0


@pytest.mark.parametrize(
    ("conj", "present", "score"),
    [("and", {"a"}, 0.0), ("and", {"a", "b"}, 1.0), ("or", {"b"}, 1.0), ("or", set(), 0.0)],
)
async def test_conj_over_metric_lists(
    shell_client, make_ctx, conj: str, present: set[str], score: float
) -> None:
    def probe(name: str) -> dict:
        return {
            "type": "vm_command_line",
            "command": f"test -e ~/{name} && echo here || echo gone",
            "shell": True,
        }

    ctx = make_ctx(
        _evaluator(
            func=["exact_match", "check_include_exclude"],
            conj=conj,
            result=[probe("a"), probe("b")],
            expected=[
                {"type": "rule", "rules": {"expected": "here\n"}},
                {"type": "rule", "rules": {"include": ["here"]}},
            ],
        )
    )
    for name in present:
        (shell_client.home / name).touch()
    assert await evaluate(shell_client, ctx) == score


async def test_infeasible_scores_the_last_action(shell_client, make_ctx) -> None:
    ctx = make_ctx(_evaluator(func="infeasible"))
    assert await evaluate(shell_client, ctx, last_action="FAIL") == 1.0
    assert await evaluate(shell_client, ctx, last_action="DONE") == 0.0
    assert await evaluate(shell_client, ctx) == 0.0


async def test_unsupported_metric_getter_and_postconfig_are_named(shell_client, make_ctx) -> None:
    rule = {"type": "rule", "rules": {"expected": "x"}}
    cases = [
        (
            _evaluator(func="compare_image_text", result=rule, expected=rule),
            UnsupportedMetric,
            "metric 'compare_image_text' is not supported (OSWorld's metric compare_image_text (module docs",
        ),
        (
            _evaluator(func="compare_tables_magically", result=rule),
            UnsupportedMetric,
            "has no metric 'compare_tables_magically'",
        ),
        (
            _evaluator(func="exact_match", result={"type": "open_tabs_info"}, expected=rule),
            UnsupportedGetter,
            "'open_tabs_info'",
        ),
        (
            _evaluator(func="exact_match", result=rule, expected=rule, postconfig=[_step("login")]),
            UnsupportedStep,
            "'login'",
        ),
    ]
    for data, error, needle in cases:
        ctx = make_ctx({"id": "unsup"} | data)
        with pytest.raises(error) as info:
            await evaluate(shell_client, ctx)
        assert str(info.value).startswith("task unsup:") and needle in str(info.value)
    assert shell_client.calls == []


async def test_local_files_outside_the_task_tree_are_refused(shell_client, make_ctx) -> None:
    ctx = make_ctx({"id": "leak", "config": [_step("upload_file", files=[{"local_path": "/etc/hostname", "path": "~/h"}])]})
    with pytest.raises(TaskRunError, match="task leak: local file /etc/hostname is outside the task's folders"):
        await run_setup(shell_client, ctx)
    assert not (shell_client.home / "h").exists()


async def test_command_that_cannot_run_fails_setup_but_nonzero_exit_does_not(shell_client, make_ctx) -> None:
    ctx = make_ctx({"config": [_step("execute", command=["false"]), _step("execute", command=["no-such-program-4711"])]})
    with pytest.raises(TaskRunError, match=r"task t-1: setup step 1 \(execute\) failed: .*no-such-program-4711"):
        await run_setup(shell_client, ctx)


def test_command_not_run_reads_both_reply_shapes() -> None:
    assert command_not_run({"status": "error", "message": "timed out"}) == "timed out"
    assert command_not_run({"status": "success", "output": "", "error": "", "returncode": 2}) is None
    assert command_not_run(ExecResult("timeout", -1)) == "timed out"
    assert command_not_run(ExecResult("error", -1, "", "No such file")) == "No such file"
    assert command_not_run(ExecResult("error", 1, "", "grep: x")) is None
    assert command_output(ExecResult("ok", 0, "out", "err")) == (0, "out", "err")
    assert command_output({"output": "o", "error": "", "return_code": 3}).returncode == 3


async def test_setup_refuses_a_task_it_could_never_score(shell_client, make_ctx) -> None:
    ctx = make_ctx(
        {"id": "ocr", "config": [_step("execute", command="touch ~/ran", shell=True)], "evaluator": {"func": "compare_image_text"}}
    )
    with pytest.raises(UnsupportedMetric, match=r"task ocr: metric 'compare_image_text'.*pip install easyocr"):
        await run_setup(shell_client, ctx)
    assert not (shell_client.home / "ran").exists()


async def test_a_command_that_exits_non_zero_is_a_warning_not_silence(shell_client, make_ctx, caplog) -> None:
    """OSWorld's controller goes on past a setup command that ran but failed (some are meant
    to), and so does setup here; each one is named in a warning line, and the controller's
    own INFO lines reach no handler that did not see them before."""
    import logging

    ctx = make_ctx(
        {
            "config": [
                _step("execute", command="echo fine", shell=True),
                _step("execute", command="echo 'E: Unable to locate package jq' >&2; exit 100", shell="true"),
            ]
        }
    )
    with caplog.at_level(logging.WARNING):
        warnings = await run_setup(shell_client, ctx)
    assert warnings == [f"task {ctx.task_id}: setup step 1 (execute) exited 100: E: Unable to locate package jq"]
    assert not [r for r in caplog.records if r.name == "desktopenv.setup" and r.levelno < logging.WARNING]
    assert logging.getLogger("desktopenv.setup").level == logging.NOTSET  # as it was


async def test_setup_twice_leaves_the_shared_task_record_as_loaded(shell_client, make_ctx) -> None:
    """OSWorld's launch step appends its proxy flag to the command list it is given: the
    task record every rollout shares hands it a copy, so a second set-up sends one flag."""
    ctx = make_ctx({"config": [{"type": "launch", "parameters": {"command": ["google-chrome", "--x"]}}]})
    ctx.use_proxy = True
    before = ctx.task.model_dump()
    await run_setup(shell_client, ctx)
    await run_setup(shell_client, ctx)
    flagged = ["google-chrome", "--x", "--proxy-server=http://127.0.0.1:18888"]
    assert [c for c in shell_client.calls if c[0] == "launch"] == [("launch", flagged), ("launch", flagged)]
    assert ctx.task.model_dump() == before
