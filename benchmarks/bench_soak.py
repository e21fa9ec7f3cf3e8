"""Soak: a long closed-loop load on synthetic:tiny, each twin set in a fresh process, counting every request and sampling memory.

Run: python benchmarks/bench_soak.py [--requests 10000] [--native none,all] [--profile default]
What it reports, per twin set: requests asked for, finished (rows with an output), rejected, rows
written to requests.csv, lost (asked for but without a row) and duplicated (two rows for one request),
KV blocks not back in the pool at the end (result.json engine.blocks_total - blocks_free_at_end), and
the process's resident memory (VmRSS) when 10%, 50% and 100% of the requests had finished, with the
100% / 10% ratio. A child process runs each set so that one set's memory does not carry into the next.

RSS moves by ~20 MB within a step (the step's tensors come and go), so one reading at a mark is as
much the step's phase as the run's growth: each mark's figure is the median of readings taken every
50 ms over the 2 s before it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MARKS = (0.10, 0.50, 1.00)
GROWTH_BOUND = 1.05  # the bar: RSS at 100% of the run within 5% of RSS at 10%
READ_EVERY_S = 0.05
MEDIAN_OVER_S = 2.0


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class RssReadings:
    """VmRSS read every READ_EVERY_S on a thread; median() is the median of the last MEDIAN_OVER_S."""

    def __init__(self) -> None:
        self._readings: deque[float] = deque(maxlen=int(MEDIAN_OVER_S / READ_EVERY_S))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-rss", daemon=True)

    def __enter__(self) -> RssReadings:
        self._readings.append(rss_mib())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(READ_EVERY_S):
            self._readings.append(rss_mib())

    def median(self) -> float:
        return statistics.median(list(self._readings))


def child(requests: int, native: str, profile: str, out: Path) -> dict:
    """One soak run in this process: the session's progress hook samples RSS at the marks."""
    from infer_prof.native_paths.toggles import parse_native
    from infer_prof.profiler.rundir.results import read_run
    from infer_prof.profiler.session.builder import load_for_options
    from infer_prof.profiler.session.options import EngineOptions
    from infer_prof.profiler.session.session import SessionHooks, run_session
    from infer_prof.scenarios.spec import load_scenario

    options = EngineOptions(model="synthetic:tiny", native=parse_native(native), device="cpu")
    loaded = load_for_options(options)
    spec = load_scenario("concurrency-30").with_overrides(num_requests=requests)
    samples: dict[str, float] = {"start": rss_mib()}
    pending = list(MARKS)
    readings = RssReadings()

    def on_done(done: int, _tokens: int) -> None:
        while pending and done >= pending[0] * requests:
            samples[f"{int(pending.pop(0) * 100)}%"] = readings.median()

    with readings:
        outcome = run_session(
            options, spec, out, loaded=loaded, profile=profile, hooks=SessionHooks(on_request_done=on_done)
        )
    run = read_run(out)
    indices = run.requests["index"].tolist() if "index" in run.requests else []
    measured = run.requests[~run.requests["warmup"].astype(bool)] if len(run.requests) else run.requests
    engine = run.result.engine
    return {
        "native": sorted(outcome.result.config["native"]),
        "requested": requests + spec.warmup_requests,
        "finished": int((run.requests["finish_reason"].isin(["stop", "length"])).sum()),
        "rejected": int((run.requests["finish_reason"] == "rejected").sum()),
        "rows": len(indices),
        "lost": requests + spec.warmup_requests - len(set(indices)),
        "duplicated": len(indices) - len(set(indices)),
        "measured_rows": len(measured),
        "blocks_not_returned": engine["blocks_total"] - engine["blocks_free_at_end"],
        "rss_mib": samples,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--native", default="none,all", help="twin sets to soak, comma separated (none, all)")
    parser.add_argument("--profile", default="default")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.requests, args.native, args.profile, args.out)))
        return 0
    rows = []
    for native in args.native.split(","):
        print(
            f"soaking --native {native}: {args.requests:,} requests in a fresh process...",
            file=sys.stderr,
            flush=True,
        )
        with tempfile.TemporaryDirectory(prefix="infer-prof-soak-") as scratch:
            command = [
                sys.executable,
                __file__,
                "--child",
                "--requests",
                str(args.requests),
                "--native",
                native,
                "--profile",
                args.profile,
                "--out",
                str(Path(scratch) / "run"),
            ]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    labels = ["+".join(row["native"]) or "none" for row in rows]
    width = max(10, *map(len, labels))
    print(f"soak: synthetic:tiny, concurrency-30, {args.requests} measured requests, profile {args.profile}")
    print(
        f"{'native':<{width}} {'asked':>6} {'finished':>8} {'rejected':>8} {'rows':>6} {'lost':>5} {'dup':>4} "
        f"{'blocks':>6}   RSS MiB at start / 10% / 50% / 100%   100%/10%"
    )
    verdicts = []
    for label, row in zip(labels, rows):
        rss = row["rss_mib"]
        ratio = rss["100%"] / rss["10%"]
        print(
            f"{label:<{width}} {row['requested']:>6} {row['finished']:>8} {row['rejected']:>8} "
            f"{row['rows']:>6} {row['lost']:>5} {row['duplicated']:>4} {row['blocks_not_returned']:>6}   "
            f"{rss['start']:.0f} / {rss['10%']:.0f} / {rss['50%']:.0f} / {rss['100%']:.0f}   {ratio:.3f}"
        )
        kept = not (row["lost"] or row["duplicated"] or row["blocks_not_returned"])
        verdicts.append(
            f"  {'met' if kept and ratio <= GROWTH_BOUND else 'MISSED':6} {label}: nothing lost, "
            f"duplicated or left allocated, RSS at 100% within {GROWTH_BOUND - 1:.0%} of 10% ({ratio:.3f})"
        )
    print("\ntargets:\n" + "\n".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
