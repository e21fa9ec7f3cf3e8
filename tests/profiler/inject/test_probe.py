"""The injected span probe (profiler/inject/sitecustomize.py), run as a real sitecustomize in fresh interpreters."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[3] / "profiler" / "inject" / "sitecustomize.py"
TIMEOUT_S = 60  # a fresh interpreter takes well under a second; generous for a loaded machine
SLEEP_NS = 20_000_000  # every probed sync body sleeps 20 ms
ENV = "INFER_PROF_PROBE_DIR"

# The module the probes target, imported by the host script after start-up.
WORK = """
import asyncio
import time
import types

cleanup = []


def slow(x):
    time.sleep(0.02)
    return x * 2


def outer(x):
    return slow(x) + 1
def boom():
    time.sleep(0.02)
    raise ValueError("boom from work")


class Box:
    def method(self, x):
        time.sleep(0.02)
        return ("method", x)

    @staticmethod
    def static(x):
        time.sleep(0.02)
        return ("static", x)

    @classmethod
    def klass(cls, x):
        time.sleep(0.02)
        return (cls.__name__, x)


class Base:
    def run(self):
        time.sleep(0.02)
        return "base ran"


class Child(Base):
    pass


async def handler(x):
    time.sleep(0.02)
    await asyncio.sleep(0.2)
    time.sleep(0.02)
    return x + 1


async def failing():
    await asyncio.sleep(0)
    raise KeyError("from the coroutine")


async def forever():
    await asyncio.sleep(60)


@types.coroutine
def pause():
    got = yield "paused"
    return got


async def echo():
    try:
        return await pause()
    finally:
        cleanup.append("finally ran")


def gen():
    yield 1


async def agen():
    yield 1


class Planned:
    def __init__(self, tokens):
        self.tokens = tokens


def plan(tokens):
    return Planned(tokens)
"""

# A sitecustomize later on the path, which ours must still run, and a script that shows whether it ran.
CHAINED = "import builtins\nbuiltins.CHAINED = 'yes'\n"
SHOW_CHAINED = "import builtins, work\nprint(getattr(builtins, 'CHAINED', 'no'), work.slow(1))\n"


def _probe(module: str, function: str, component: str = "scheduler") -> dict[str, str]:
    return {"component": component, "module": module, "function": function}


def _setup(tmp_path: Path, probes: object = None, switch: bytes | None = None) -> Path:
    """The probe folder (a copy of sitecustomize.py), a module folder and the probe dir; returns the probe dir."""
    inject = tmp_path / "inject"
    inject.mkdir()
    shutil.copy(SOURCE, inject / "sitecustomize.py")
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "work.py").write_text(WORK)
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    if probes is not None:
        text = probes if isinstance(probes, str) else json.dumps({"probes": probes})
        (probe_dir / "probes.json").write_text(text)
    if switch is not None:
        (probe_dir / "switch").write_bytes(switch)
    return probe_dir


def _run(
    tmp_path: Path, script: str, active: bool = True, later: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run a script in a fresh interpreter with the probe first on PYTHONPATH, the modules and `later` after it."""
    paths = [tmp_path / "inject", tmp_path / "modules", *later]
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", ENV)}
    env.update(PYTHONPATH=os.pathsep.join(map(str, paths)), PYTHONDONTWRITEBYTECODE="1")
    if active:
        env[ENV] = str(tmp_path / "probe")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def _other_sitecustomize(tmp_path: Path, code: str) -> Path:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(code)
    return other


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def _spans(probe_dir: Path, pid: int | None = None) -> list[tuple[int, int, int, int, int]]:
    files = [probe_dir / f"spans-{pid}.tsv"] if pid else sorted(probe_dir.glob("spans-*.tsv"))
    rows = []
    for path in files:
        for line in path.read_text().splitlines():
            thread_id, index, start, end, on = map(int, line.split("\t"))
            rows.append((thread_id, index, start, end, on))
    return rows


def _by_index(rows: list[tuple[int, int, int, int, int]]) -> dict[int, list[tuple[int, int, int, int, int]]]:
    grouped: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for row in rows:
        grouped.setdefault(row[1], []).append(row)
    return grouped


def _status(probe_dir: Path) -> dict:
    (path,) = probe_dir.glob("probe-*.json")
    return json.loads(path.read_text())


def test_sync_functions_and_methods_record_one_span_per_call(tmp_path):
    probe_dir = _setup(
        tmp_path,
        [
            _probe("work", "slow"),
            _probe("work", "boom"),
            _probe("work", "Box.method"),
            _probe("work", "Box.static"),
            _probe("work", "Box.klass"),
        ],
    )
    out = _ok(
        _run(
            tmp_path,
            """
            import work
            assert work.slow(21) == 42
            try:
                work.boom()
            except ValueError as exc:
                assert str(exc) == "boom from work"
            else:
                raise AssertionError("boom did not raise")
            assert work.Box().method(1) == ("method", 1)
            assert work.Box.static(2) == ("static", 2)
            assert work.Box().klass(3) == ("Box", 3)
            assert isinstance(work.Box.__dict__["static"], staticmethod)
            assert isinstance(work.Box.__dict__["klass"], classmethod)
            assert work.slow.__name__ == "slow" and work.slow.__wrapped__.__name__ == "slow"
            print("host ok")
            """,
        )
    )
    assert out.strip() == "host ok"
    spans = _by_index(_spans(probe_dir))
    assert sorted(spans) == [0, 1, 2, 3, 4]
    for index, rows in spans.items():
        assert len(rows) == 1, index
        _, _, start, end, on = rows[0]
        assert end - start >= SLEEP_NS and on == 1
    status = _status(probe_dir)
    assert [(p["index"], p["kind"], p["owner"]) for p in status["patched"]] == [
        (0, "sync", "work"),
        (1, "sync", "work"),
        (2, "sync", "Box"),
        (3, "sync", "Box"),
        (4, "sync", "Box"),
    ]
    assert status["missing"] == status["skipped"] == status["pending"] == status["errors"] == []


def test_an_inherited_method_is_patched_on_the_class_that_defines_it(tmp_path):
    probe_dir = _setup(tmp_path, [_probe("work", "Child.run")])
    _ok(
        _run(
            tmp_path,
            """
            import work
            assert work.Child().run() == "base ran"
            assert work.Base().run() == "base ran"
            assert "run" not in vars(work.Child)
            """,
        )
    )
    rows = _spans(probe_dir)
    assert [row[1] for row in rows] == [0, 0]
    assert all(end - start >= SLEEP_NS for _, _, start, end, _ in rows)
    (patched,) = _status(probe_dir)["patched"]
    assert patched["owner"] == "Base" and "inherited" in patched["note"] and "work.Base" in patched["note"]


def test_a_coroutine_records_its_slices_not_its_suspensions(tmp_path):
    probe_dir = _setup(
        tmp_path,
        [
            _probe("work", "handler"),
            _probe("work", "failing"),
            _probe("work", "forever"),
            _probe("work", "echo"),
        ],
    )
    _ok(
        _run(
            tmp_path,
            """
            import asyncio
            import work

            async def main():
                assert await work.handler(1) == 2
                try:
                    await work.failing()
                except KeyError as exc:
                    assert exc.args == ("from the coroutine",)
                else:
                    raise AssertionError("failing did not raise")
                task = asyncio.ensure_future(work.forever())
                await asyncio.sleep(0.01)
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                else:
                    raise AssertionError("forever was not cancelled")

            asyncio.run(main())

            # send, throw and close by hand pass through the probe to the coroutine
            coro = work.echo()
            assert coro.send(None) == "paused"
            try:
                coro.send("value")
            except StopIteration as stop:
                assert stop.value == "value"
            coro = work.echo()
            coro.send(None)
            try:
                coro.throw(LookupError("thrown in"))
            except LookupError as exc:
                assert exc.args == ("thrown in",)
            coro = work.echo()
            coro.send(None)
            coro.close()
            assert work.cleanup == ["finally ran"] * 3, work.cleanup
            """,
        )
    )
    spans = _by_index(_spans(probe_dir))
    handler = spans[0]
    assert len(handler) == 2  # until asyncio.sleep suspends, and from its wake-up to the return
    assert all(end - start >= SLEEP_NS for _, _, start, end, _ in handler)
    assert 2 * SLEEP_NS <= sum(end - start for _, _, start, end, _ in handler) < 150_000_000
    assert len(spans[1]) == 2 and len(spans[2]) == 2  # failing: 2 slices; forever: started, then cancelled
    assert len(spans[3]) == 2 + 2 + 1  # echo: send/send, send/throw, send (close is not a slice)
    assert [p["kind"] for p in _status(probe_dir)["patched"]] == ["coroutine"] * 4


def test_the_control_file_turns_component_probes_off_but_not_the_step_probe(tmp_path):
    probe_dir = _setup(
        tmp_path,
        [_probe("work", "slow"), _probe("work", "Box.method", component="step")],
        switch=b"0",
    )
    _ok(
        _run(
            tmp_path,
            f"""
            import work
            assert work.slow(1) == 2 and work.Box().method(1) == ("method", 1)
            with open({str(probe_dir / "switch")!r}, "r+b") as switch:  # in place: the probe maps this file
                switch.write(b"1")
            assert work.slow(1) == 2 and work.Box().method(1) == ("method", 1)
            """,
        )
    )
    spans = _by_index(_spans(probe_dir))
    assert [row[4] for row in spans[0]] == [1]  # the component probe: only once the flag said on
    assert [row[4] for row in spans[1]] == [0, 1]  # the step probe: both calls, with the flag at their start
    assert _status(probe_dir)["switch"] == "mapped"


def test_with_the_step_switch_each_outermost_step_takes_the_next_abba_turn_and_components_follow(tmp_path):
    # Box.method is the step, Box.static a step nested in it (keeps its caller's turn), slow a component.
    probes = [
        _probe("work", "slow"),
        _probe("work", "Box.method", component="step"),
        _probe("work", "Box.static", component="step"),
    ]
    probe_dir = _setup(tmp_path, json.dumps({"probes": probes, "switch": "step"}), switch=b"1")
    _ok(
        _run(
            tmp_path,
            """
            import work
            for _ in range(6):
                work.Box().method(1)
                work.Box.static(1)  # a step of its own: the next turn, not nested
                work.slow(1)  # between steps: the last step's turn holds
            """,
        )
    )
    spans = _by_index(_spans(probe_dir))
    # Outermost steps alternate method, static, method, ...: twelve turns of 1, 0, 0, 1.
    turns = sorted(spans[1] + spans[2], key=lambda row: row[2])
    assert [row[4] for row in turns] == [1, 0, 0, 1] * 3
    # slow runs after each static step, whose turn is 0, 1, 0, 1, 0, 1: it records only under the on turns.
    assert len(spans[0]) == 3 and all(row[4] == 1 for row in spans[0])
    assert _status(probe_dir)["switch"] == "mapped, switched by the steps"
    assert (probe_dir / "switch").read_bytes() == b"1"  # the last turn, written in place for every process


def test_a_size_probe_keeps_each_calls_size_on_and_off_and_its_span_only_on(tmp_path):
    plan = {**_probe("work", "plan"), "size": "tokens"}
    probes = [plan, _probe("work", "Box.method", component="step")]
    probe_dir = _setup(tmp_path, json.dumps({"probes": probes, "switch": "step"}), switch=b"1")
    _ok(
        _run(
            tmp_path,
            """
            import work
            for tokens in (5, 6, 7, 8):
                work.Box().method(1)  # the step's turn: 1, 0, 0, 1
                assert work.plan(tokens).tokens == tokens  # the result goes back to the caller unchanged
            work.plan("many")  # not an int: no size
            """,
        )
    )
    spans = _by_index(_spans(probe_dir))
    # plan's spans: only under the on turns (after the first and the last step, and the call of "many")
    assert [row[4] for row in spans[0]] == [1, 1, 1]
    (sizes_path,) = probe_dir.glob("sizes-*.tsv")
    rows = [tuple(map(int, line.split("\t"))) for line in sizes_path.read_text().splitlines()]
    assert [size for _at, size in rows] == [5, 6, 7, 8]  # every call, on or off
    steps = spans[1]
    assert all(step[3] <= at for step, (at, _size) in zip(steps, rows))  # read as plan returned


def test_a_size_that_is_not_an_attribute_name_is_an_invalid_entry(tmp_path):
    plan = {**_probe("work", "plan"), "size": "tokens.count"}
    probe_dir = _setup(tmp_path, [plan])
    _ok(_run(tmp_path, "import work\nwork.plan(3)\n"))
    status = _status(probe_dir)
    assert status["skipped"][0]["why"] == "invalid entry in probes.json"
    assert any("size 'tokens.count' is not an attribute name" in error for error in status["errors"])


def test_a_step_nested_in_a_step_keeps_its_callers_turn(tmp_path):
    probes = [_probe("work", "outer", component="step"), _probe("work", "slow", component="step")]
    probe_dir = _setup(tmp_path, json.dumps({"probes": probes, "switch": "step"}), switch=b"1")
    _ok(_run(tmp_path, "import work\nfor _ in range(4):\n    work.outer(1)\n"))  # outer calls slow
    spans = _by_index(_spans(probe_dir))
    assert [row[4] for row in spans[0]] == [1, 0, 0, 1]
    assert [row[4] for row in spans[1]] == [1, 0, 0, 1]  # nested: its caller's turn, not a turn of its own


def test_missing_and_unpatchable_probes_are_listed_and_the_host_runs_normally(tmp_path):
    probe_dir = _setup(
        tmp_path,
        [
            _probe("work", "nothere"),
            _probe("work", "gen"),
            _probe("work", "agen"),
            _probe("work", "cleanup"),
            _probe("work", "slow.inner"),
            _probe("broken", "fn"),
            _probe("never.imported", "fn"),
        ],
    )
    (tmp_path / "modules" / "broken.py").write_text("import no_such_module_for_the_probe_test\n")
    script = """
        import work
        assert work.slow(2) == 4 and list(work.gen()) == [1]
        try:
            import broken
        except ImportError as exc:
            print(type(exc).__name__, exc.name, exc)
        """
    with_probe = _ok(_run(tmp_path, script))
    without = _ok(_run(tmp_path, script, active=False))
    expected = "ModuleNotFoundError no_such_module_for_the_probe_test No module named 'no_such_module_for_the_probe_test'"
    assert with_probe == without == expected + "\n"
    status = _status(probe_dir)
    assert [m["index"] for m in status["missing"]] == [0]
    skipped = {s["index"]: s["why"] for s in status["skipped"]}
    assert sorted(skipped) == [1, 2, 3, 4]
    assert "generator" in skipped[1] and "async generator" in skipped[2]
    assert "not a Python function" in skipped[3] and "not a class or module" in skipped[4]
    assert status["pending"] == [5, 6]  # broken never finished importing; never.imported never started
    assert status["patched"] == [] and status["errors"] == []
    assert not list(probe_dir.glob("spans-*.tsv"))


def test_a_forked_child_writes_its_own_spans(tmp_path):
    probe_dir = _setup(tmp_path, [_probe("work", "slow"), _probe("work", "Box.method")])
    out = _ok(
        _run(
            tmp_path,
            f"""
            import os, time
            import work
            work.slow(1)
            work.slow(2)
            pid = os.fork()
            if pid == 0:
                work.Box().method(1)
                work.Box().method(2)
                # the child's own flusher writes its own file while the child runs: no atexit after os._exit
                mine = os.path.join({str(probe_dir)!r}, f"spans-{{os.getpid()}}.tsv")

                def lines():
                    return len(open(mine).readlines()) if os.path.exists(mine) else 0

                deadline = time.monotonic() + 20
                while lines() < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                os._exit(0 if lines() == 2 else 3)
            _, code = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(code) == 0, code
            print(os.getpid(), pid)
            """,
        )
    )
    parent, child = map(int, out.split())
    assert [row[1] for row in _spans(probe_dir, parent)] == [0, 0]
    assert [row[1] for row in _spans(probe_dir, child)] == [1, 1]  # none of the parent's unflushed records
    assert {row[0] for row in _spans(probe_dir, child)} == {child}  # the native id of the child's thread


def test_without_the_variable_nothing_is_written_and_the_next_sitecustomize_still_runs(tmp_path):
    probe_dir = _setup(tmp_path, [_probe("work", "slow")])
    other = _other_sitecustomize(tmp_path, CHAINED)
    assert _ok(_run(tmp_path, SHOW_CHAINED, active=False, later=(other,))).strip() == "yes 2"
    assert sorted(path.name for path in probe_dir.iterdir()) == ["probes.json"]

    assert _ok(_run(tmp_path, SHOW_CHAINED, active=True, later=(other,))).strip() == "yes 2"
    assert [row[1] for row in _spans(probe_dir)] == [0]


def test_a_second_copy_of_the_probe_later_on_the_path_neither_loops_nor_probes_twice(tmp_path):
    probe_dir = _setup(tmp_path, [_probe("work", "slow")])
    second = tmp_path / "second"
    second.mkdir()
    shutil.copy(SOURCE, second / "sitecustomize.py")
    other = _other_sitecustomize(tmp_path, CHAINED)
    assert _ok(_run(tmp_path, SHOW_CHAINED, later=(second, other))).strip() == "yes 2"
    assert [row[1] for row in _spans(probe_dir)] == [0]
    assert [p["index"] for p in _status(probe_dir)["patched"]] == [0]


def test_a_failing_next_sitecustomize_is_a_warning_as_site_would_print(tmp_path):
    _setup(tmp_path, [_probe("work", "slow")])
    other = _other_sitecustomize(tmp_path, "raise RuntimeError('the other one failed')\n")
    result = _run(tmp_path, "print('host ran')", later=(other,))
    assert _ok(result).strip() == "host ran"
    assert "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: the other one failed" in (
        result.stderr
    )


def test_the_status_file_describes_the_process_and_the_probe_cost(tmp_path):
    probe_dir = _setup(tmp_path, [_probe("work", "slow")])
    pid = int(_ok(_run(tmp_path, "import os, sys, work\nprint(os.getpid())")))
    status = json.loads((probe_dir / f"probe-{pid}.json").read_text())
    assert status["pid"] == pid and status["ppid"] == os.getpid()
    assert status["argv"] == ["-c"]
    assert status["python"] == sys.version.split()[0] and status["clock"] == "perf_counter_ns"
    assert isinstance(status["cost_ns"], int) and 0 < status["cost_ns"] < 100_000
    assert status["switch"] == "absent" and status["dropped"] == 0
    assert [p["index"] for p in status["patched"]] == [0]


def test_a_corrupt_probes_file_is_an_error_in_the_status_not_in_the_host(tmp_path):
    probe_dir = _setup(tmp_path, "{not json")
    assert _ok(_run(tmp_path, "import work\nprint(work.slow(3))")).strip() == "6"
    status = _status(probe_dir)
    (error,) = status["errors"]
    assert error.startswith("reading probes.json: JSONDecodeError")
    assert status["patched"] == status["pending"] == []


def test_the_probe_imports_the_standard_library_only():
    tree = ast.parse(SOURCE.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add((node.module or "").split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported
