"""Do spans and samples agree on the interpreter share? Runs a control-bound and a kernel-bound case with --profile deep.

Run: python benchmarks/bench_agreement.py [--runs 3] [--cases control,kernel] [--scale 1] [--out runs/agreement]
Cases (the ones issue #6 names):
  control: synthetic:tiny, scenario concurrency-30, 300 requests (30 clients, small model: control flow)
  kernel:  synthetic:base, scenario edge, 8 requests (one user, SmolLM2-sized model: linears)
`--scale N` multiplies each case's requests: N times the engine samples, so about 1/sqrt(N) the noise.
Each run is a separate `infer-prof run` process; the script prints, per run, the engine thread's
interpreter share by each method, the samples' 95% binomial interval (py-spy took 175-730 engine
samples per run here, so one run cannot resolve much better than +-3 to +-7 points), and the gap (samples
minus spans, percentage points); then each case's mean gap over its runs.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

CASES = {
    "control": ["-m", "synthetic:tiny", "-s", "concurrency-30", "-r", "300"],
    "kernel": ["-m", "synthetic:base", "-s", "edge", "-r", "8"],
}


def one_run(case: str, out: Path, scale: int = 1) -> dict[str, float]:
    arguments = list(CASES[case])
    arguments[arguments.index("-r") + 1] = str(int(arguments[arguments.index("-r") + 1]) * scale)
    command = [
        sys.executable,
        "-m",
        "infer_prof.cli",
        "run",
        *arguments,
        "--profile",
        "deep",
        "-o",
        str(out),
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    breakdown = json.loads((out / "result.json").read_text())["breakdown"]
    spans, samples = breakdown["methods"]["spans"], breakdown["methods"]["samples"]
    share, count = samples["categories"]["interpreter"], samples["samples"]
    return {
        "spans": spans["categories"]["interpreter"],
        "samples": share,
        "interval": 1.96 * math.sqrt(share * (1 - share) / count),
        "engine_samples": count,
        "gap_pp": breakdown["disagreement"]["interpreter"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cases", default="control,kernel", help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--scale", type=int, default=1, help="multiply each case's requests")
    parser.add_argument("--out", type=Path, default=Path("runs/agreement"))
    args = parser.parse_args()
    cases = args.cases.split(",")
    unknown = [case for case in cases if case not in CASES]
    if unknown:
        parser.error(f"--cases: {', '.join(unknown)} is not a case; use {', '.join(CASES)}")
    for case in cases:
        gaps = []
        for index in range(args.runs):
            row = one_run(case, args.out / f"{case}-{index}", args.scale)
            gaps.append(row["gap_pp"])
            print(
                f"{case:8s} run {index}: interpreter share spans {row['spans']:.1%}, samples {row['samples']:.1%} "
                f"(+-{row['interval']:.1%}, {row['engine_samples']} engine samples): gap {row['gap_pp']:+.1f} pp",
                flush=True,
            )
        print(
            f"{case:8s} mean gap {statistics.mean(gaps):+.1f} pp, largest {max(gaps, key=abs):+.1f} pp over {len(gaps)} runs"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
