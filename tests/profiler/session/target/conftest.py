"""The fake multi-process server, started for a test and stopped (with every child) after it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


def fake_command(*extra: str) -> str:
    return " ".join([sys.executable, str(FAKE_SERVER), *extra])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def wait_for(condition, timeout_s: float = 15.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


class FakeServer:
    def __init__(self, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(FAKE_SERVER), "--port", "0", *extra],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert "listening on" in line, line
        self.url = line.split("listening on ")[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1])
        self.pid = self.process.pid

    def complete(self, count: int = 1) -> None:
        for _ in range(count):
            httpx.post(
                f"{self.url}/v1/completions", json={"prompt": "hi", "max_tokens": 2}, timeout=10
            ).read()

    def stop(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


@pytest.fixture
def fake_server() -> Iterator[FakeServer]:
    server = FakeServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def tokenizer():  # type: ignore[no-untyped-def]
    """The tokenizer a target run sizes its prompts with (SmolLM2's), or the test skipped where it is not here."""
    from infer_prof.engine.loader import _local_smollm2
    from infer_prof.profiler.session.target.target_plan import prompt_tokenizer
    from tests.engine.conftest import SMOLLM2_MISSING

    if _local_smollm2() is None:
        pytest.skip(SMOLLM2_MISSING)
    return prompt_tokenizer("synthetic:tiny")
