"""`run --until resolved` without its cap is refused in one line before any work (the other cases: test_until.py)."""

from __future__ import annotations

from tests.cli.test_cli import assert_user_error, cli


def test_until_resolved_without_a_cap_is_refused_before_work() -> None:
    assert_user_error(
        cli("run", "--model", "synthetic:tiny", "--until", "resolved", timeout=120), "needs --max-time"
    )
