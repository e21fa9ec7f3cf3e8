"""A run directory shaped like `run --target` against a foreign server: py-spy samples only, no spans, no steps."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from infer_prof.profiler.rundir.results import STEP_COLUMNS
from tests.support.run_dirs import make_run_dir


def make_target_run_dir(path: str | Path, *, seed: int, n_requests: int = 60) -> Path:
    """A fabricated run rewritten as a foreign server's: the breakdown has samples but no spans (the donut's
    and the verdict's usual source), the verdict has no rule, the engine and steps are empty."""
    run = make_run_dir(path, seed=seed, n_requests=n_requests, n_steps=200, verify=False)
    data = json.loads((run / "result.json").read_text())
    breakdown = data["breakdown"]
    breakdown["methods"]["spans"] = None
    breakdown["methods"]["samples"]["resolution"] = "python"
    breakdown["methods"]["samples"]["samples"] = 4_000
    breakdown["disagreement"], breakdown["component_disagreement"] = {}, {}
    breakdown["client_threads"] = None
    data["verdict"] = {
        "category": None,
        "component": None,
        "share": None,
        "interpreter_share": None,
        "rule": None,
        "reasons": ["Neither spans nor native stack samples are available: no verdict."],
        "predictions": {},
        "blind_spots": [
            (
                "py-spy ran without --native: samples cannot tell a Python line from the native code it "
                "calls, and GIL waits are unseen (use --profile deep for native stacks)."
            )
        ],
        "source": None,
    }
    data["engine"], data["counters"], data["overhead"] = {}, {}, {}
    data["collectors"] = {"sampling": {"status": "ok", "reason": None}}
    data["config"].update(target="http://127.0.0.1:8000", collectors=["sampling"], profile="default")
    data["target"] = {
        "url": "http://127.0.0.1:8000",
        "ours": False,
        "server": {"name": "vllm", "version": "0.32.0", "model": "smollm2", "source": "/version"},
        "pid": 4242,
        "pid_source": "--pid",
        "split": {"available": True, "methods": ["samples"], "reason": None, "engine_thread": "MainThread"},
        "threads": {
            "MainThread": {
                "samples": 4000,
                "categories": {"interpreter": 0.6, "kernel": 0.4},
                "components": {"model_kernels": 0.4, "sampler": 0.2},
                "gil_wait": None,
            }
        },
        "gil": None,
        "client": {"note": "the client used 12% of one core and sent its requests 0.4 ms late at p99"},
    }
    (run / "result.json").write_text(json.dumps(data))
    pd.DataFrame(columns=list(STEP_COLUMNS)).to_csv(run / "steps.csv", index=False)
    for name in ("spans.csv", "kernel_events.csv"):
        (run / name).unlink(missing_ok=True)
    return run
