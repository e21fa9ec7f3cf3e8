"""What profiling costs a whole run: one scenario on synthetic:tiny with collectors off vs default (and deep), ABBA.

Run: python benchmarks/bench_overhead.py [--pairs 6] [--requests 90] [--scenario concurrency-30] [--deep] [--without sampling] [--aa]
     python benchmarks/bench_overhead.py --in-run [--requests 24000] [--only spans,gc] [--aa] [--rate 100]
What it measures: output tokens/s of the measured requests (warm-up excluded, collector start/stop
outside the window) of runs alternating profile "off" (A) and the profile under test (B) in ABBA
order after one discarded warm-up pair; the ratio is the median over pairs of B/A, so 0.98 means the
profile made the engine 2% slower. The profiled runs' own estimate (1 / (1 + the collectors'
self-measured costs), result.json `overhead`) is printed beside it. The machine is shared: read the
spread of the per-pair ratios before trusting a difference of a few percent; `--aa` runs "off" against
itself, which shows how far apart two identical profiles come out.

`--in-run` measures the default profile inside one long run instead (profiler.overhead.inrun): its
collectors are paused and resumed in ABBA blocks (0.2 s on, 0.4 s off, py-spy at a third of its
rate so that "on" blocks sample at its usual rate) and the blocks' throughputs compared, with a 95%
bootstrap interval over pairs. Neighbouring blocks share the machine's drift, which whole runs do
not, so the interval is what tells whether the cost is under a threshold. `--only` toggles some
collectors (the rest stay on), `--aa` toggles none: the same bookkeeping with nothing switched.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.overhead.ab import measure_overhead
from infer_prof.profiler.overhead.costs import slowdown
from infer_prof.profiler.session.builder import load_for_options
from infer_prof.profiler.session.options import EngineOptions
from infer_prof.scenarios.spec import load_scenario


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="A/B pairs after the warm-up pair")
    parser.add_argument("--requests", type=int, default=90, help="measured requests per run")
    parser.add_argument("--scenario", default="concurrency-30", help="a saturating (closed-loop) scenario")
    parser.add_argument("--model", default="synthetic:tiny")
    parser.add_argument("--deep", action="store_true", help="also measure the deep profile")
    parser.add_argument(
        "--aa", action="store_true", help="measure profile off against itself: the noise floor"
    )
    parser.add_argument("--in-run", action="store_true", help="toggle the default collectors inside one run")
    parser.add_argument("--only", default="", help="--in-run: the collectors to toggle (default: all)")
    parser.add_argument("--on-s", type=float, default=0.2, help="--in-run: seconds per 'on' block")
    parser.add_argument(
        "--rate",
        type=int,
        default=None,
        help="--in-run: py-spy's rate in Hz instead of the profile's (a high rate resolves its cost per sample)",
    )
    parser.add_argument(
        "--without",
        default="",
        help="collectors to leave out of the profile under test, "
        "comma-separated (e.g. sampling, or spans,gc), to see what each one costs",
    )
    args = parser.parse_args()
    if args.without:
        _leave_out(set(args.without.split(",")))

    options = EngineOptions(model=args.model, device="cpu")
    loaded = load_for_options(options)
    spec = load_scenario(args.scenario).with_overrides(num_requests=args.requests)
    if args.in_run:
        return _in_run(args, options, spec, loaded)
    left_out = f", profiles without {args.without}" if args.without else ""
    print(
        f"{args.model}, scenario {spec.name} ({args.requests} requests), {args.pairs} ABBA pairs per profile{left_out}"
    )
    print(
        f"{'profile':8s} {'ratio B/A':>9s} {'slowdown':>9s} {'overhead':>9s} {'pair ratios min..max':>21s} "
        f"{'off tok/s':>10s} {'on tok/s':>10s} {'self-estimate':>14s}"
    )
    profiles = ("off",) if args.aa else ("default", "deep") if args.deep else ("default",)
    for profile in profiles:
        ab, estimates = measure_overhead(options, spec, loaded, profile=profile, pairs=args.pairs)
        ratios = ab.pair_ratios
        assert ab.ratio is not None
        estimate = (
            statistics.median(entry["throughput_ratio"] for entry in estimates) if estimates else float("nan")
        )
        print(
            f"{profile:8s} {ab.ratio:9.3f} {slowdown(ab.ratio):8.3f}x {1 - ab.ratio:9.1%} "
            f"{min(ratios):10.3f}..{max(ratios):.3f} {statistics.median(ab.a):10.0f} {statistics.median(ab.b):10.0f} "
            f"{estimate:14.3f}"
        )
        print(f"         per-pair ratios: {' '.join(f'{r:.3f}' for r in ratios)}; order {''.join(ab.order)}")
        print(
            f"         tok/s off: {' '.join(f'{v:.0f}' for v in ab.a)}; on: {' '.join(f'{v:.0f}' for v in ab.b)}"
        )
    return 0


def _in_run(args: argparse.Namespace, options: EngineOptions, spec, loaded) -> int:
    from infer_prof.profiler.overhead.inrun import measure_inrun_overhead, summarize

    only: list[str] | None = [] if args.aa else (args.only.split(",") if args.only else None)
    what = "nothing (A/A)" if args.aa else (args.only or "all default collectors")
    print(
        f"{args.model}, scenario {spec.name} ({spec.num_requests} requests), default profile, toggling {what}"
    )
    result = measure_inrun_overhead(options, spec, loaded, on_s=args.on_s, only=only, rate_hz=args.rate)
    print(
        f"blocks: {result.on_s:.2f} s on / {result.off_s:.2f} s off; py-spy configured at {result.sampling_rate_hz} Hz; "
        f"paused: {', '.join(result.paused) or 'none'}"
    )
    print(summarize(result))
    return 0


def _leave_out(names: set[str]) -> None:
    """Make every profile's collector list skip `names` (a measuring aid, not a product option). With
    spans left out, the session still injects its tracer, which then records nothing."""
    from infer_prof.profiler.collectors import registry

    full = registry.default_collectors

    def without(profile: str, **kwargs):
        return [collector for collector in full(profile, **kwargs) if collector.name not in names]

    registry.default_collectors = without


if __name__ == "__main__":
    raise SystemExit(main())
