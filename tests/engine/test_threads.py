"""The engine's OpenMP wait policy: set before torch loads libgomp, never over the user's choice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.threads import DEFAULT_WAIT_POLICY, OPT_OUT, choose_wait_policy

ROOT = Path(__file__).resolve().parents[2]


def test_unset_policy_becomes_the_default_and_says_why() -> None:
    env: dict[str, str] = {}
    record = choose_wait_policy(env, torch_loaded=False)
    assert env["OMP_WAIT_POLICY"] == DEFAULT_WAIT_POLICY
    assert record["set_by"] == "infer-prof" and record["applied"] and record["why"]


def test_user_choice_is_kept() -> None:
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert choose_wait_policy(env, torch_loaded=False)["set_by"] == "user"
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}
    spin = {"GOMP_SPINCOUNT": "1000"}
    assert choose_wait_policy(spin, torch_loaded=False)["wait_policy"] == "GOMP_SPINCOUNT=1000"
    assert "OMP_WAIT_POLICY" not in spin


def test_opt_out_leaves_libgomp_default() -> None:
    env = {OPT_OUT: "off"}
    record = choose_wait_policy(env, torch_loaded=False)
    assert "OMP_WAIT_POLICY" not in env and record["wait_policy"] == "libgomp default"


def test_too_late_when_torch_is_already_loaded() -> None:
    assert choose_wait_policy({}, torch_loaded=True)["applied"] is False


def test_importing_the_engine_sets_the_policy_before_torch_loads() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", OPT_OUT)}
    env["PYTHONPATH"] = str(ROOT)
    code = "import os, engine.models, engine.threads as t; print(os.environ['OMP_WAIT_POLICY'], t.wait_policy_decision()['applied'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == [DEFAULT_WAIT_POLICY, "True"]
