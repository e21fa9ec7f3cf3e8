"""Progress without a terminal: one plain line per tenth of the work or per ten seconds, with phase,
done/total, rate and ETA (a fake clock drives the cadence); Rich bars stay on terminals."""

from __future__ import annotations

import io
import re
import subprocess
import sys

from rich.console import Console

from infer_prof.cli.progress import LineProgress, Reporter, duration_text, rate_text


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines_of(**kwargs):  # type: ignore[no-untyped-def]
    clock, lines = FakeClock(), []
    return LineProgress("requests", lines.append, clock=clock, **kwargs), clock, lines


def test_a_line_at_each_tenth_when_the_work_is_quick():
    progress, clock, lines = lines_of(total=200)
    progress.start()
    for done in range(1, 201):
        clock.now += 0.01  # 2 s in all: time alone would never print
        progress.update(done)
    progress.finish()
    assert lines[0] == "requests: started, 200 requests"
    counts = [int(re.match(r"requests: (\d+)/200", line).group(1)) for line in lines[1:]]  # type: ignore[union-attr]
    assert counts == list(range(20, 201, 20))


def test_a_line_every_ten_seconds_when_the_work_is_slow():
    progress, clock, lines = lines_of(total=1000)
    progress.start()
    for done in range(1, 40):  # 39 requests, one per 3 s: under a tenth, so only time prints
        clock.now += 3
        progress.update(done)
    counts = [int(re.match(r"requests: (\d+)/1000", line).group(1)) for line in lines[1:]]  # type: ignore[union-attr]
    assert counts == list(
        range(4, 37, 4)
    )  # the first update at or after 10 s since the last line: every 12 s
    assert "12s elapsed" in lines[1] and "1m48s elapsed" in lines[-1]


def test_a_quiet_stretch_still_prints_on_tick():
    progress, clock, lines = lines_of(total=10)
    progress.tick()
    clock.now = 30
    progress.tick()
    assert lines == [], "nothing before the work starts"
    progress.start()
    progress.update(3)  # a tenth crossed: printed
    clock.now += 9.9
    progress.tick()
    assert len(lines) == 2
    clock.now += 0.1
    progress.tick()
    assert len(lines) == 3 and lines[-1].startswith("requests: 3/10 (30%)")
    progress.finish()
    clock.now += 60
    progress.tick()
    assert len(lines) == 3, "a finished phase is quiet (and its last count was already printed)"


def test_the_line_says_phase_count_rate_and_eta():
    progress, clock, lines = lines_of(total=200, unit="requests")
    progress.start()
    clock.now = 10
    progress.update(50, note="123.4 tok/s")
    assert lines[-1] == "requests: 50/200 (25%), 5.0 requests/s, 10s elapsed, ETA 30s; 123.4 tok/s"
    clock.now = 100  # idle after the last request: the rate counts to the last progress, the ETA with it
    assert (
        progress.line(clock.now)
        == "requests: 50/200 (25%), 5.0 requests/s, 1m40s elapsed, ETA 30s; 123.4 tok/s"
    )
    fresh, clock, _ = lines_of(total=200)
    clock.now = 12
    assert fresh.line(clock.now) == "requests: 0/200 (0%), 12s elapsed", (
        "no rate nor ETA before the first one"
    )


def test_steps_zero_prints_by_time_only_and_finish_once():
    progress, _, lines = lines_of(total=4, steps=0)
    progress.start()
    for done in range(1, 5):
        progress.update(done)
    assert len(lines) == 1
    progress.finish()
    progress.finish()
    assert len(lines) == 2 and lines[-1].startswith("requests: 4/4 (100%)")


def test_a_phase_that_never_starts_prints_nothing():
    progress, _, lines = lines_of()
    progress.finish()
    assert lines == []


def test_duration_and_rate_text():
    assert [duration_text(s) for s in (0.4, 59, 61, 3600 + 120)] == ["0s", "59s", "1m01s", "1h02m"]
    assert [rate_text(r, "runs") for r in (2.5, 0.05, 0.0001)] == ["2.5 runs/s", "3.0 runs/min", "0.4 runs/h"]


def test_reporter_prints_lines_without_a_terminal_and_bars_with_one():
    log = io.StringIO()
    with Reporter(Console(file=log, force_terminal=False, width=200), clock=FakeClock()) as reporter:
        task = reporter.task("shadow run", total=5)
        for done in range(1, 6):
            task.update(done)
    assert "shadow run: 5/5 (100%)" in log.getvalue()
    assert "━" not in log.getvalue()
    screen = io.StringIO()
    with Reporter(Console(file=screen, force_terminal=True, width=100)) as reporter:
        task = reporter.task("shadow run", total=5)
        task.update(5)
    assert "━" in screen.getvalue() and "5/5" in screen.getvalue()
    assert "(100%)" not in screen.getvalue()


# Twenty short requests arriving within a second: the run is a few seconds even on a busy machine.
QUICK_SCENARIO = """
description = "twenty short requests"
num_requests = 20
warmup_requests = 1
prompt_tokens = { dist = "fixed", value = 16 }
output_tokens = { dist = "fixed", value = 8 }

[load]
mode = "open-loop"
rate = 50.0
"""


def test_run_with_stderr_to_a_file_writes_progress_lines(tmp_path):
    scenario, log = tmp_path / "quick.toml", tmp_path / "log"
    scenario.write_text(QUICK_SCENARIO)
    with log.open("w") as stderr:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "infer_prof.cli",
                "run",
                "-m",
                "synthetic:tiny",
                "-s",
                str(scenario),
                "--no-report",
                "--profile",
                "off",
                "--out",
                str(tmp_path / "run"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            timeout=300,
            check=False,
        )
    text = log.read_text()
    assert done.returncode == 0, text
    assert "requests: load started, 20 requests" in text
    counts = [
        int(m.group(1))
        for m in re.finditer(r"^requests: (\d+)/20 \(\d+%\), [\d.]+ requests/(s|min|h)", text, re.MULTILINE)
    ]
    assert counts and counts == sorted(counts) and counts[-1] == 20, text
    assert re.search(r"ETA \d+", text), text


def test_the_stop_notice_bypasses_the_console_so_a_handler_cannot_reenter_its_write(tmp_path):
    """A signal handler runs between any two bytecodes of the main thread, which may be inside the console's
    own write to stderr (Python's buffered writer then raises "reentrant call" out of the handler, and a run
    stopped while printing exited 1): the notice goes out in one os.write on the console's descriptor."""
    import signal

    from infer_prof.cli import ANNOUNCED_STOPS
    from infer_prof.cli.progress import GracefulStop

    with open(tmp_path / "stderr", "w") as stream:
        console = Console(file=stream, force_terminal=False)

        def busy_console(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("reentrant call inside <_io.BufferedWriter name='<stderr>'>")

        console.print = busy_console  # type: ignore[method-assign]
        stop = GracefulStop(console)
        try:
            stop._handle(signal.SIGINT, None)
        finally:
            ANNOUNCED_STOPS.remove(signal.SIGINT)  # process-wide: main() reads it to word its own exit line
    assert stop.event.is_set() and stop.exit_code == 130
    written = (tmp_path / "stderr").read_text()
    assert (
        written
        == "Ctrl-C: stopping; in-flight requests are aborted and a partial result is written (send it again to quit now)\n"
    )


def test_after_a_look_every_line_carries_the_new_estimate() -> None:
    from types import SimpleNamespace

    from infer_prof.cli.progress import session_progress

    log, clock = io.StringIO(), FakeClock()
    with session_progress(Console(file=log, force_terminal=False, width=300), clock=clock) as hooks:
        assert hooks.on_start and hooks.on_request_done and hooks.on_look and hooks.on_more
        hooks.on_start(10)
        clock.now += 1
        hooks.on_request_done(10, 80)
        look = SimpleNamespace(rounds=1, progress_text=lambda: "interpreter 0.8% [0.4%, 1.7%]; waiting on it")
        hooks.on_look(look)
        clock.now += 11  # a quiet stretch of the next round: no request done yet, a line by time
        hooks.on_more(20)
    lines = log.getvalue().splitlines()
    assert "requests: round 1, interpreter 0.8% [0.4%, 1.7%]; waiting on it" in lines
    assert lines[-1].startswith("requests: 10/20") and lines[-1].endswith(
        "80.0 tok/s; interpreter 0.8% [0.4%, 1.7%]; waiting on it"
    )
