"""OSWorld's metrics run confined: an unprivileged uid, the task's cache read-only, no host
files, no network, each call bounded in time. Real metrics of the pinned desktop-env, real
bubblewrap; the root-only files are made by the test."""

from __future__ import annotations

import os
import secrets
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from environments.tasks.errors import TaskRunError
from environments.tasks.metric_sandbox import MetricSandbox, Missing

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


@pytest.fixture
def root_only() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("root-only host files need root")
    folder = Path("/var/lib") / f"agent-s3-metric-test-{secrets.token_hex(4)}"
    folder.mkdir(mode=0o700)
    with sqlite3.connect(folder / "secret.db") as db:
        db.execute("CREATE TABLE s (v TEXT)")
        db.execute("INSERT INTO s VALUES ('CANARY')")
    (folder / "secret.db").chmod(0o600)
    yield folder
    shutil.rmtree(folder)


def test_metrics_score_what_the_getters_fetched(tmp_path: Path) -> None:
    cache = tmp_path / "run" / "evaluation" / "rollout-0"
    cache.mkdir(parents=True)
    os.chmod(tmp_path / "run", 0o700)  # a run folder is private: the worker sees the cache alone
    (cache / "got.txt").write_text("same\n")
    (cache / "want.txt").write_text("same\n")
    (cache / "other.txt").write_text("different\n")
    with sqlite3.connect(cache / "result.db") as db:
        db.execute("CREATE TABLE t (n INTEGER)")
        db.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
    started = time.monotonic()
    with MetricSandbox(cache) as sandbox:
        sandbox.start(["compare_text_file", "run_sqlite3"])
        same = sandbox.call("compare_text_file", (str(cache / "got.txt"), str(cache / "want.txt")), {})
        differ = sandbox.call("compare_text_file", (str(cache / "got.txt"), str(cache / "other.txt")), {})
        count = sandbox.call("run_sqlite3", (str(cache / "result.db"), {"sql": "SELECT count(*) = 2 FROM t"}), {})
        uid = sandbox.uid
    print(f"confined scoring of three metrics: {time.monotonic() - started:.2f} s")
    assert (same, differ, count) == (1.0, 0.0, 1.0)
    if os.geteuid() == 0:
        assert uid is not None and uid >= 100000


def test_a_task_files_sql_reaches_nothing_outside_its_cache(tmp_path: Path, root_only: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with sqlite3.connect(cache / "legit.db") as db:
        db.execute("CREATE TABLE t (n INTEGER)")
    legit = str(cache / "legit.db")
    attempts = {
        "vacuum into a root folder": (legit, f"VACUUM INTO '{root_only / 'created.db'}'"),
        "attach in a root folder": (legit, f"ATTACH DATABASE '{root_only / 'attached.db'}' AS x"),
        "read a root database": (str(root_only / "secret.db"), "SELECT count(*) FROM s"),
        "drop a table of the cache": (legit, "DROP TABLE t"),
        "vacuum into the cache": (legit, f"VACUUM INTO '{cache / 'copy.db'}'"),
        "read /etc/shadow": (legit, "SELECT readfile('/etc/shadow')"),
    }
    outcomes = {}
    with MetricSandbox(cache) as sandbox:
        for what, (path, sql) in attempts.items():
            try:
                outcomes[what] = sandbox.call("run_sqlite3", (path, {"sql": sql}), {})
            except (TaskRunError, Missing) as exc:
                outcomes[what] = str(exc)
    assert sorted(p.name for p in root_only.iterdir()) == ["secret.db"], outcomes
    assert not (cache / "copy.db").exists()
    with sqlite3.connect(cache / "legit.db") as db:
        assert db.execute("SELECT count(*) FROM t").fetchone() == (0,)  # the table is still there
    for what, outcome in outcomes.items():
        assert isinstance(outcome, str) and "\n" not in outcome, (what, outcome)
    assert "readonly" in outcomes["drop a table of the cache"] or "read-only" in outcomes["drop a table of the cache"]


def test_a_metric_that_never_ends_is_stopped(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with sqlite3.connect(cache / "legit.db") as db:
        db.execute("CREATE TABLE t (n INTEGER)")
    forever = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"
    with MetricSandbox(cache, timeout=3) as sandbox:
        sandbox.start(["run_sqlite3"])
        started = time.monotonic()
        with pytest.raises(TaskRunError, match="did not finish within 3 s"):
            sandbox.call("run_sqlite3", (str(cache / "legit.db"), {"sql": forever}), {})
    assert time.monotonic() - started < 20


def test_a_missing_file_is_osworlds_zero_and_a_crash_one_line(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with MetricSandbox(cache) as sandbox:
        with pytest.raises(Missing):
            sandbox.call("compare_text_file", (str(cache / "absent.txt"), str(cache / "absent2.txt")), {})
        with pytest.raises(TaskRunError, match="metric 'run_sqlite3' failed") as info:
            sandbox.call("run_sqlite3", (str(cache / "x.db"), {}), {})  # no "sql": KeyError
    assert "\n" not in str(info.value)
