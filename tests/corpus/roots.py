"""Corpus cases for the roots every command shares (issue 65): every command's output path, external addresses
(`--target` URLs, `--ray` clusters where nothing listens), engine tables nested or not UTF-8 for built-in,
`--target` and `--launch` runs, servers that answer with a nested model list or drip it byte by byte (local fakes on
127.0.0.1, here in the test's process), and damaged steps.csv tables read by `report` and `compare`."""

from __future__ import annotations

import atexit
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.corpus.cases import SYNTH, Corpus, _edit_csv, _write
from tests.corpus.untried import BUDGET_OK, DEEP

MODELS = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode()
DRIP_PAUSE_S = (
    0.5  # one byte of the model list every half second: ~40 s for the whole list, past the probe's 10 s
)
REPLIES = {
    "nested": lambda: ('{"object": "list", "data": ' + DEEP + "}").encode(),
    "not-a-list": lambda: b'{"object": "list", "data": {"id": "fake"}}',
    "ids-not-text": lambda: b'{"object": "list", "data": [{"id": [1, 2]}]}',
    "not-utf8": lambda: b'{"data": [{"id": "caf\xe9"}]}',
    "not-json": lambda: b"<html>hello</html>",
    "huge": lambda: b'{"data": [' + b'{"id": "m"},' * 1_000_000 + b'{"id": "m"}]}',
}


class _Reply(BaseHTTPRequestHandler):
    """GET /v1/models answers the server's kind of bad reply (its first path segment says which)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        kind = self.server.kind  # type: ignore[attr-defined]
        body = MODELS if kind == "drip" else REPLIES[kind]()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        try:
            if kind == "drip":
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(DRIP_PAUSE_S)
            else:
                self.wfile.write(body)
        except OSError:
            pass  # the client gave up: what the case wants


class _Quiet(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up mid-reply is what the drip case wants, not a traceback on the test's stderr


def _serve(kind: str) -> str:
    """A fake server of `kind` on 127.0.0.1 for the rest of this process; its URL."""
    server = _Quiet(("127.0.0.1", 0), _Reply)
    server.kind = kind  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    atexit.register(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}"


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cases(c: Corpus) -> None:
    _outputs(c)
    _addresses(c)
    _engine_tables(c)
    _servers(c)
    _steps(c)


def _outputs(c: Corpus) -> None:
    """Every command's output path goes through rundir/outdir.py, before any run starts."""
    c.file("roots/a-file", "x\n")
    budget = c.file(
        "roots/budget-run.toml", 'scenario = "edge"\nmodel = "synthetic:tiny"\nrequests = 2\n' + BUDGET_OK
    )
    sweep = c.root / "sweep-ok.toml"
    long_name = "n" * 300
    bad = {
        "proc": "/proc/infer-prof-x",
        "existing-file": c.root / "roots/a-file",
        "under-a-file": c.root / "roots/a-file/sub",
        "name-too-long": f"{long_name}/x",
        "empty": "",
    }
    for name, out in bad.items():
        c.add(f"roots-budget-baseline-out-{name}", ["budget", "baseline", budget, "--out", out])
        c.add(f"roots-budget-check-out-{name}", ["budget", "check", budget, "--out", out])
    for name in ("proc", "under-a-file", "empty"):
        c.add(f"roots-sweep-out-{name}", ["sweep", "run", sweep, "-o", bad[name]])
    c.add("roots-selftest-out-a-file", ["selftest", "--only", "idle", "--out", c.root / "roots/a-file"])
    c.add("roots-selftest-out-proc", ["selftest", "--only", "idle", "--out", "/proc/infer-prof-x"])
    for option in ("--junit", "--bmf"):
        c.add(
            f"roots-budget-{option[2:]}-empty",
            ["budget", "check", "budget-ok.toml", "--run", str(c.good_run()), option, ""],
        )


def _addresses(c: Corpus) -> None:
    """Addresses: their form in profiler/inputs/addresses.py, then a connect bounded by seconds."""
    sweep = c.root / "sweep-ok.toml"
    port = _closed_port()
    rays = {
        "nothing-listening": f"127.0.0.1:{port}",
        "url-nothing-listening": f"ray://127.0.0.1:{port}",
        "ipv6-nothing-listening": f"[::1]:{port}",
        "port-zero": "127.0.0.1:0",
        "port-huge": "127.0.0.1:70000",
        "no-host": f":{port}",
        "host-with-space": f"a b:{port}",
        "ip-out-of-range": f"999.1.1.1:{port}",
    }
    for name, address in rays.items():
        c.add(
            f"roots-sweep-ray-{name}",
            ["sweep", "run", sweep, "--ray", address, "-o", f"out-roots-ray-{name}"],
            watch=[f"out-roots-ray-{name}"],
        )
    urls = {
        "port-not-numeric": "http://127.0.0.1:abc",
        "ipv6-unclosed": "http://[::1/",
        "ipv6-not-an-address": "http://[zz::1]:8000",
        "ipv4-out-of-range": "http://999.1.1.1:8000",
        "port-zero": "http://127.0.0.1:0",
        "user-and-password": f"http://user:secret@127.0.0.1:{port}",
        "space-in-host": "http://a b:8000",
        "control-character": "http://127.0.0.1:8000/\x07",
        "port-negative": "http://127.0.0.1:-1",
        "closed-port": f"http://127.0.0.1:{port}",
    }
    for name, url in urls.items():
        c.add(
            f"roots-target-url-{name}",
            ["run", "--target", url, *SYNTH, "-r", "2", "-o", f"out-roots-url-{name}"],
            watch=[f"out-roots-url-{name}"],
        )
    marker = c.root / "roots/launched"
    c.add(
        "roots-launch-target-url-malformed",
        ["run", "--launch", f"touch {marker}; sleep 30", "--target", "http://[::1/", "-r", "2"],
        watch=["roots/launched"],
    )


def _engine_tables(c: Corpus) -> None:
    """Engine tables (INFER_PROF_ENGINE_TABLES) through errors.read_toml: nested, not UTF-8, huge, not TOML."""
    tables = {
        "deep": f'name = "x"\nx = {DEEP}\n',
        "not-utf8": b'name = "caf\xe9"\n',
        "huge": "# " + "a" * (2 << 20) + '\nname = "x"\n',
        "not-toml": "name = = 1\n",
        "name-a-list": 'name = ["x"]\n',
        "detect-a-number": 'name = "x"\ndetect = 3\n',
    }
    for name, text in tables.items():
        path = c.file(f"roots/tables/{name}.toml", text)
        env = {"INFER_PROF_ENGINE_TABLES": str(path)}
        c.add(
            f"roots-table-{name}-builtin",
            ["run", *SYNTH, "-s", "edge", "-r", "2", "-o", f"out-roots-table-{name}"],
            watch=[f"out-roots-table-{name}"],
            env=env,
        )
    for name in ("deep", "not-utf8"):
        env = {"INFER_PROF_ENGINE_TABLES": str(c.root / f"roots/tables/{name}.toml")}
        c.add(
            f"roots-table-{name}-target",
            [
                "run",
                "--target",
                f"http://127.0.0.1:{_closed_port()}",
                "-r",
                "2",
                "-o",
                f"out-roots-tt-{name}",
            ],
            watch=[f"out-roots-tt-{name}"],
            env=env,
        )
        marker = c.root / f"roots/launched-{name}"
        c.add(
            f"roots-table-{name}-launch",
            [
                "run",
                "--launch",
                f"touch {marker}; sleep 30",
                "--port",
                str(_closed_port()),
                "--probe",
                "-r",
                "2",
            ],
            watch=[f"roots/launched-{name}"],
            env=env,
        )


def _servers(c: Corpus) -> None:
    """Servers whose model list is malformed, nested, not UTF-8, oversized, or dripped byte by byte."""
    for kind in (*REPLIES, "drip"):
        c.add(
            f"roots-server-models-{kind}",
            ["run", "--target", _serve(kind), *SYNTH, "-r", "2", "-o", f"out-roots-server-{kind}"],
            watch=[f"out-roots-server-{kind}"],
        )


def _steps(c: Corpus) -> None:
    """steps.csv damaged in ways the first corpus had not tried, read by `report` and by `compare` alike."""

    def header(change: str, to: str):  # type: ignore[no-untyped-def]
        def edit(run: Path) -> None:
            path = run / "steps.csv"
            lines = path.read_text(encoding="utf-8").split("\n", 1)
            path.write_text(lines[0].replace(change, to, 1) + "\n" + lines[1], encoding="utf-8")

        return edit

    def short_row(run: Path) -> None:
        path = run / "steps.csv"
        lines = path.read_text(encoding="utf-8").splitlines()
        lines[4] = ",".join(lines[4].split(",")[:4])
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    damages = {
        "no-step-column": header("step,", "stop,"),
        "header-names-a-column-twice": header("batch_size", "step"),
        "short-row": short_row,
        "one-column": _write("steps.csv", "x\n1\n2\n"),
        "phase-huge": _edit_csv("steps.csv", "model_ms", "1e308"),
        "duration-inf": _edit_csv("steps.csv", "duration_ms", "inf"),
        "start-beyond-int64": _edit_csv("steps.csv", "start_ns", "1e30"),
    }
    for name, change in damages.items():
        run = c.corrupt_run(f"roots-steps-{name}", change)
        c.add(f"roots-report-steps-{name}", ["report", run])
        c.add(
            f"roots-compare-steps-{name}",
            ["compare", run, str(c.good_run()), "-o", f"out-roots-compare-{name}"],
            watch=[f"out-roots-compare-{name}"],
        )


if __name__ == "__main__":  # a look at the cases: python -m tests.corpus.roots DIR
    corpus = Corpus(Path(sys.argv[1]))
    cases(corpus)
    for case in corpus.cases:
        print(case.id, case.args[:6])
