"""`run --what-if-rounds` is refused in one line before any work where it means nothing (the rounds: test_what_if_rounds.py)."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import assert_user_error, cli


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--what-if-rounds", "2"], "add --what-if, or drop it"),
        (["--what-if", "sampler", "--what-if-rounds", "0"], "--what-if-rounds 0: give 1 to 10 runs"),
        (["--what-if", "sampler", "--what-if-rounds", "11"], "--what-if-rounds 11: give 1 to 10 runs"),
        (
            ["--launch", "true --port 9", "--probe", "--what-if", "sampler", "--what-if-rounds", "2"],
            "a server's slowdown runs in turns within its one run",
        ),
    ],
)
def test_rounds_without_a_built_in_slowdown_are_refused(flags: list[str], words: str) -> None:
    assert_user_error(cli("run", "--model", "synthetic:tiny", *flags, timeout=120), words)
