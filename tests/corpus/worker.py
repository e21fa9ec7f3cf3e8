"""Runs corpus cases one after another in this process through the real CLI entry point, and reports each as JSON.

Run as `python -m tests.corpus.worker CASES.json`: one process imports torch once for all cases. Each
case prints a `start` line before it runs (so a parent that has to kill a hung worker knows which
case hung) and a result line after. Loading a model is recorded, so a case can require that its
input was refused before any work started.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from typing import Any


def _run_case(case: dict[str, Any], loads: list[str]) -> dict[str, Any]:
    from infer_prof.cli.main import main

    loads.clear()
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    code: Any = 0
    previous = os.getcwd()
    saved = {name: os.environ.get(name) for name in case.get("env", {})}
    os.environ.update(case.get("env", {}))
    os.chdir(case["cwd"])
    sys.argv = ["infer-prof", *case["args"]]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException as exc:  # a crash of any kind is this case's finding
        code = f"raised {type(exc).__name__}: {exc}"
    finally:
        os.chdir(previous)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return {
        "id": case["id"],
        "code": code,
        "stdout": out.getvalue(),
        "stderr": err.getvalue(),
        "seconds": time.perf_counter() - started,
        "loaded_model": list(loads),
    }


def main() -> None:
    from infer_prof.engine import loader

    cases = json.loads(open(sys.argv[1], encoding="utf-8").read())
    loads: list[str] = []
    real_load = loader.load_model

    def recording_load(name, *args, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(str(name))
        return real_load(name, *args, **kwargs)

    loader.load_model = recording_load
    report = sys.__stdout__
    for case in cases:
        print(json.dumps({"start": case["id"]}), file=report, flush=True)
        print(json.dumps(_run_case(case, loads)), file=report, flush=True)


if __name__ == "__main__":
    main()
