"""Faults the exit-2 corpus cannot stage: a full disk and a read-only mount under every command that writes,
signals during the imports, request bodies `serve` cannot parse, and a run in which no request completed."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.corpus.cases import SYNTH, Case
from tests.corpus.test_corpus import ROOT, _leftovers, _run_worker

QUICK = """description = "three short requests"
num_requests = 3
prompt_tokens = { dist = "fixed", value = 8 }
output_tokens = { dist = "fixed", value = 2 }
[load]
mode = "closed-loop"
clients = 1
"""


def _mount(path: Path, options: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


@pytest.fixture(scope="module")
def mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """A 2 MiB tmpfs (filled to the brim but for a valid run directory), a read-only tmpfs holding a run, and a
    scratch folder with a good run and the small files the commands read."""
    from tests.support.run_dirs import make_run_dir

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    root = tmp_path_factory.mktemp("faults")
    good = make_run_dir(root / "good-run", seed=1, n_requests=40, n_steps=80)
    full, readonly = root / "full", root / "readonly"
    _mount(full, "size=2m")
    try:
        _mount(readonly, "size=8m")
    except BaseException:
        _unmount(full)
        raise
    try:
        shutil.copytree(good, full / "run")
        shutil.copytree(good, readonly / "run")
        subprocess.run(["mount", "-o", "remount,ro", str(readonly)], check=True)
        with open(full / "filler", "wb") as filler:  # every free block taken: the next write is ENOSPC
            try:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
            except OSError:
                pass
        (root / "budget.toml").write_text('[[budget]]\nmetric = "throughput"\nmin = 0\n')
        (root / "sweep.toml").write_text(
            'description = "one cell"\nrepeats = 1\nrequests = 2\n'
            '[axes]\nmodel = ["synthetic:tiny"]\nclients = [1]\n'
        )
        (root / "quick.toml").write_text(QUICK)
        yield root, full, readonly
    finally:
        _unmount(full)
        _unmount(readonly)


def test_a_full_disk_or_a_read_only_mount_is_one_line_and_exit_2_under_every_command(mounts) -> None:  # type: ignore[no-untyped-def]
    root, full, readonly = mounts
    result_before = (full / "run/result.json").read_bytes()
    good = str(root / "good-run")
    cases = [
        Case("full-report", ["report", str(full / "run")]),
        Case("full-compare", ["compare", good, good, "-o", str(full / "cmp")]),
        Case(
            "full-budget-junit",
            ["budget", "check", str(root / "budget.toml"), "--run", good, "--junit", str(full / "j.xml")],
        ),
        Case(
            "full-sweep",
            ["sweep", "run", str(root / "sweep.toml"), "-o", str(full / "sweep")],
            before_work=False,
        ),
        Case(
            "full-run",
            ["run", *SYNTH, "-s", str(root / "quick.toml"), "-o", str(full / "new-run")],
            before_work=False,
        ),
        Case("readonly-report", ["report", str(readonly / "run")]),
        Case(
            "readonly-run-out", ["run", *SYNTH, "-s", str(root / "quick.toml"), "-o", str(readonly / "new")]
        ),
        Case("readonly-compare", ["compare", good, good, "-o", str(readonly / "cmp")]),
        Case(
            "readonly-budget-junit",
            ["budget", "check", str(root / "budget.toml"), "--run", good, "--junit", str(readonly / "j.xml")],
        ),
    ]
    results = _run_worker(cases, root)
    # no --out, in a read-only working directory: the default runs/ folder is refused before the model loads
    results.update(
        _run_worker([Case("readonly-cwd", ["run", *SYNTH, "-s", str(root / "quick.toml")])], root, readonly)
    )
    wrong = []
    for case in [*cases, Case("readonly-cwd", [])]:
        result = results[case.id]
        errors = [line for line in result["stderr"].splitlines() if line.startswith("infer-prof: error:")]
        if result["code"] != 2 or len(errors) != 1 or "Traceback" in result["stderr"]:
            wrong.append(
                f"{case.id}: exit {result['code']}, {len(errors)} error lines: {result['stderr'][-300:]}"
            )
        elif case.before_work and result["loaded_model"]:
            wrong.append(f"{case.id}: loaded {result['loaded_model']} before refusing")
        elif not any(word in errors[0] for word in ("No space left", "Read-only", "cannot write")):
            wrong.append(f"{case.id}: the line does not say why: {errors[0]}")
    assert wrong == []
    assert _leftovers(full) == [] and _leftovers(readonly) == []
    assert (full / "run/result.json").read_bytes() == result_before  # the run it was reporting on is intact
    json.loads(result_before)


def test_two_runs_into_one_out_the_second_refuses_before_building_a_model(tmp_path: Path) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    (out / ".infer-prof.lock").write_text(f"{os.getpid()}\n")  # a live run holds it
    results = _run_worker([Case("second", ["run", *SYNTH, "-o", str(out)])], tmp_path)
    assert results["second"]["code"] == 2 and results["second"]["loaded_model"] == []
    assert "pid" in results["second"]["stderr"]


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_imports_is_one_line_and_128_plus_the_signal(
    signum: int, code: int, tmp_path: Path
) -> None:
    command = ["-m", "infer_prof.cli", "run", *SYNTH, "-o", str(tmp_path / "out")]
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    threading.Event().wait(0.5)  # the imports (torch, typer, the commands) take seconds longer than this
    process.send_signal(signum)
    _out, err = process.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == code, err[-500:]
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize(
    "body",
    [
        b'{"prompt": "\\ud800x", "max_tokens": 2}',
        b'{"prompt": "hi", "stop": ["\\udfff"]}',
        b'{"\\ud800": 1, "prompt": "hi"}',
        b"[" * 200_000 + b"]" * 200_000,
        b'{"prompt": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"prompt": "hi", "logit_bias": ' + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}",
    ],
    ids=[
        "lone-surrogate-prompt",
        "lone-surrogate-stop",
        "lone-surrogate-key",
        "deep-array-200k",
        "deep-prompt",
        "deep-object",
    ],
)
def test_serve_answers_400_with_openais_error_to_any_body_it_cannot_parse(body: bytes) -> None:
    from tests.profiler.serve.conftest import running_server

    with running_server() as server:
        response = httpx.post(
            f"{server.url}/v1/completions",
            content=body,
            timeout=30,
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 400, response.text[:300]
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
        assert (
            httpx.post(
                f"{server.url}/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=30
            ).status_code
            == 200
        )


class _BrokenStream(http.server.BaseHTTPRequestHandler):
    """A server whose /v1/models is valid and whose completions stream `data: {not json}`."""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        body = json.dumps(
            {"object": "list", "data": [{"id": "broken", "object": "model", "owned_by": "x"}]}
        ).encode()
        self.send_response(200 if self.path.startswith("/v1/models") else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: {not json}\n\ndata: [DONE]\n\n")


def test_a_run_in_which_no_request_completed_exits_1_and_says_why(tmp_path: Path) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _BrokenStream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    (tmp_path / "quick.toml").write_text(QUICK)
    try:
        results = _run_worker(
            [
                Case(
                    "target",
                    [
                        "run",
                        "--target",
                        f"http://127.0.0.1:{server.server_port}",
                        "-s",
                        str(tmp_path / "quick.toml"),
                        "-o",
                        str(tmp_path / "out"),
                        "--no-report",
                    ],
                )
            ],
            tmp_path,
        )
    finally:
        server.shutdown()
    result = results["target"]
    why = [line for line in result["stderr"].splitlines() if "no request completed" in line]
    assert result["code"] == 1, result["stderr"][-500:]
    assert len(why) == 1 and "failed" in why[0]
    assert "Traceback" not in result["stderr"]
