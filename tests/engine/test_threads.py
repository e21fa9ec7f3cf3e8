"""Who decides torch's OpenMP wait policy and thread count: infer-prof by default, never over the user's choice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from infer_prof.engine.threads import DEFAULT_WAIT_POLICY, OPT_OUT, choose_wait_policy

ROOT = Path(__file__).resolve().parents[2]
CLEAN = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", OPT_OUT)


def test_by_default_libgomp_spins_the_count_adapts_and_nothing_is_written_to_the_environment() -> None:
    env: dict[str, str] = {}
    record = choose_wait_policy(env, torch_loaded=False)
    assert env == {}
    assert record["wait_policy"] == DEFAULT_WAIT_POLICY and record["adaptive_threads"] is True
    assert record["set_by"] == "infer-prof" and record["applied"] and record["why"]


def test_user_choice_is_kept_and_the_count_is_left_alone() -> None:
    env = {"OMP_WAIT_POLICY": "PASSIVE"}
    record = choose_wait_policy(env, torch_loaded=False)
    assert record["set_by"] == "user" and record["adaptive_threads"] is False
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert (
        choose_wait_policy({"GOMP_SPINCOUNT": "1000"}, torch_loaded=False)["wait_policy"]
        == "GOMP_SPINCOUNT=1000"
    )


def test_opt_out_leaves_libgomp_default_with_a_fixed_count() -> None:
    record = choose_wait_policy({OPT_OUT: "off"}, torch_loaded=False)
    assert record["wait_policy"] == "libgomp default" and record["adaptive_threads"] is False


def test_too_late_when_torch_is_already_loaded() -> None:
    assert choose_wait_policy({}, torch_loaded=True)["applied"] is False


def test_threads_the_user_pins_are_not_adapted() -> None:
    code = (
        "import infer_prof.engine.threads as t, torch\n"
        "before = t.adaptive_threads()\n"
        "t.pin_threads(1)\n"
        "print(before, t.adaptive_threads(), torch.get_num_threads(), t.wait_policy_decision()['threads_set_by'])"
    )
    env = {key: value for key, value in os.environ.items() if key not in CLEAN}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.split() == ["True", "False", "1", "user"]


def test_a_launched_server_gets_the_users_environment_and_the_extra_variables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A fresh process that imported the engine: the command it launches sees no OpenMP variable it did not have.
    script = (
        "import os, engine\n"
        "from pathlib import Path\n"
        "from infer_prof.profiler.session.target.launch import LaunchedServer\n"
        f"server = LaunchedServer('echo policy=${{OMP_WAIT_POLICY:-unset}} extra=$EXTRA', 'http://127.0.0.1:9', Path({str(tmp_path / 'log')!r}), env={{'EXTRA': 'yes'}})\n"
        "server.start(); server.process.wait(timeout=30)\n"
    )
    env = {key: value for key, value in os.environ.items() if key not in CLEAN}
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60, env=env, cwd=ROOT)
    assert (tmp_path / "log").read_text().strip() == "policy=unset extra=yes"
