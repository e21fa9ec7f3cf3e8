"""Corpus cases for a launched server and for refusals that must come before work: each ends with exit 2 and one line,
and where a server command is given, a marker file it would create shows whether it ran (`watch`: it must not).
Cases that need an environment of their own, or a server command that fails, are in test_process_corpus.py."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from tests.corpus.cases import SYNTH, Corpus

TARGET_TESTS = Path(__file__).resolve().parent.parent / "profiler" / "session" / "target"
FAKE = TARGET_TESTS / "fake_server.py"
DYING = TARGET_TESTS / "fake_dying_server.py"
LONG_PROMPT = "word " * 5000  # about 5,000 tokens: over synthetic:tiny's 2,048-token context


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server(marker: Path, *extra: str, script: Path = FAKE) -> str:
    """A server command that leaves `marker` behind the moment it runs."""
    return f"touch {marker}; exec {sys.executable} {script} " + " ".join(extra)


def cases(c: Corpus) -> None:
    _prompts(c)
    _launch_refused_before_start(c)


def _prompts(c: Corpus) -> None:
    """`generate` prompts longer than the model's context: refused before the model is built."""
    c.add("generate-prompt-over-context", ["generate", *SYNTH, LONG_PROMPT])
    c.add("generate-prompt-over-context-no-chat", ["generate", *SYNTH, "--no-chat", LONG_PROMPT])
    c.add("generate-second-prompt-over-context", ["generate", *SYNTH, "a short one", LONG_PROMPT])
    c.add("generate-prompt-over-context-max-tokens-1", ["generate", *SYNTH, "-n", "1", "word " * 2100])


def _launch_refused_before_start(c: Corpus) -> None:
    """Input that is wrong before any server starts: the command never runs (its marker is absent), no run
    directory is left."""
    bad = {
        "model-missing-gguf": ["-m", "/nonexistent/model.gguf"],
        "model-unknown": ["-m", "nosuch"],
        "scenario-unknown": ["-s", "no-such-scenario"],
        "requests-zero": ["-r", "0"],
        "duration-negative": ["--duration", "-1"],
        "profile-unknown": ["--profile", "loud"],
        "timeout-zero": ["--launch-timeout", "0"],
        "timeout-negative": ["--launch-timeout", "-5"],
        "with-pid": ["--pid", "1"],
        "port-zero": ["--port", "0"],
        "port-huge": ["--port", "70000"],
        "native-flag": ["--native", "all"],
        "kv-blocks-flag": ["--kv-blocks", "8"],
        "verify": ["--verify"],
        "target-and-port": ["--target", "http://127.0.0.1:1", "--port", "2"],
    }
    for name, args in bad.items():
        marker = c.root / f"ran-{name}"
        c.add(
            f"run-launch-{name}",
            [
                "run",
                "--launch",
                server(marker, "--port", str(free_port())),
                *args,
                "-o",
                f"out-launch-{name}",
            ],
            watch=[marker.name, f"out-launch-{name}"],
        )
    marker = c.root / "ran-no-port"
    c.add(
        "run-launch-names-no-port",
        ["run", "--launch", f"touch {marker}; sleep 30", "-o", "out-launch-no-port"],
        watch=[marker.name, "out-launch-no-port"],
    )
    c.add("run-launch-empty-command", ["run", "--launch", "  ", "--port", str(free_port())])
