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
collectors are paused and resumed in ABBA blocks (0.2 s on, then off for as long as py-spy's slower
rate needs so that "on" blocks sample at its usual rate: 0.2 s at the default 2 Hz) and the blocks'
throughputs compared, with a 95% bootstrap interval over pairs. Neighbouring blocks share the machine's drift, which whole runs do
not, so the interval is what tells whether the cost is under a threshold. `--only` toggles some
collectors (the rest stay on), `--aa` toggles none: the same bookkeeping with nothing switched.
`--plant-us N` adds a known cost to check the method itself: a collector that spins N us at the start
of every step while on (toggle it alone with `--only planted`); the summary then prints the cost the
spins took of the "on" blocks' time beside what the A/B reads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from infer_prof.profiler.collectors.base import Collector
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
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="--in-run: toggled runs one after another, each printed, then their pairs pooled into one estimate",
    )
    parser.add_argument(
        "--plant-us",
        type=float,
        default=0.0,
        help="--in-run: add a known cost, N us of spinning at every step's start while on (the 'planted' collector)",
    )
    args = parser.parse_args()
    if args.plant_us < 0 or (args.plant_us and not args.in_run):
        parser.error("--plant-us takes a positive number of microseconds, with --in-run")
    if args.runs < 1 or (args.runs > 1 and not args.in_run):
        parser.error("--runs takes a whole number of runs, at least 1, with --in-run")
    if args.without:
        _leave_out(set(args.without.split(",")))
    planted = _plant(args.plant_us) if args.plant_us else None

    options = EngineOptions(model=args.model, device="cpu")
    loaded = load_for_options(options)
    spec = load_scenario(args.scenario).with_overrides(num_requests=args.requests)
    if args.in_run:
        return _in_run(args, options, spec, loaded, planted)
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
        # Each profiled run's self-estimate (overhead_section always gives one).
        ratios_estimated = [
            ratio for entry in estimates if (ratio := entry.get("throughput_ratio")) is not None
        ]
        estimate = statistics.median(ratios_estimated) if ratios_estimated else float("nan")
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


def _in_run(args: argparse.Namespace, options: EngineOptions, spec, loaded, planted: list[Any] | None) -> int:
    from infer_prof.profiler.overhead.inrun import describe, measure_inrun_overhead, pooled, summarize

    only: list[str] | None = [] if args.aa else (args.only.split(",") if args.only else None)
    what = "nothing (A/A)" if args.aa else (args.only or "all default collectors")
    print(
        f"{args.model}, scenario {spec.name} ({spec.num_requests} requests), default profile, toggling {what}"
    )
    results = []
    for run in range(1, args.runs + 1):
        if args.runs > 1:
            print(f"run {run} of {args.runs}, {time.strftime('%H:%M:%S')}")
        result = measure_inrun_overhead(options, spec, loaded, on_s=args.on_s, only=only, rate_hz=args.rate)
        results.append(result)
        print(
            f"blocks: {result.on_s:.2f} s on / {result.off_s:.2f} s off; py-spy configured at "
            f"{result.sampling_rate_hz} Hz; paused: {', '.join(result.paused) or 'none'}"
        )
        print(summarize(result))
        if planted:
            spun, on_ns = planted[-1].spun_in(result.blocks)
            print(
                f"planted: {args.plant_us:g} us a step took {spun / on_ns:.2%} of the on blocks' time "
                f"(expected ratio {1 - spun / on_ns:.4f}; the A/B above should read it)"
            )
    if len(results) > 1:
        # Runs minutes apart have differed by more than one run's interval: read the runs above beside it.
        print(f"pooled over {len(results)} runs: {describe(pooled(results))}")
    return 0


class PlantedCost(Collector):
    """A known cost for checking the in-run A/B: spins `spin_us` at the start of every step while on."""

    name = "planted"

    def __init__(self, tracer: Any, spin_us: float) -> None:
        super().__init__()
        self._tracer = tracer
        self._spin_ns = int(spin_us * 1e3)
        self._on = True
        self.spins: list[tuple[int, int]] = []  # (start_ns, end_ns) of every spin, on the tracer's clock

    def _start(self) -> None:
        self._tracer.add_step_listener(self._on_step)

    def _stop(self) -> None:
        self._on = False

    def _can_pause(self) -> bool:
        return True

    def _pause(self) -> None:
        self._on = False

    def _resume(self) -> None:
        self._on = True

    def _on_step(self, _step: int, begin: bool) -> None:
        if begin and self._on:
            start = time.perf_counter_ns()
            while time.perf_counter_ns() - start < self._spin_ns:
                pass
            self.spins.append((start, time.perf_counter_ns()))

    def _result(self) -> dict[str, Any]:
        return {"spins": len(self.spins)}

    def spun_in(self, blocks: list[Any]) -> tuple[int, int]:
        """(ns spent spinning inside the "on" blocks, those blocks' total ns); spins and blocks are both in
        time order, so one pass over each."""
        on = [(block.start_ns, block.end_ns) for block in blocks if block.on]
        spun, first = 0, 0
        for start, end in self.spins:
            while first < len(on) and on[first][1] <= start:
                first += 1
            index = first
            while index < len(on) and on[index][0] < end:
                spun += min(end, on[index][1]) - max(start, on[index][0])
                index += 1
        return spun, sum(end - start for start, end in on)


def _plant(spin_us: float) -> list[Any]:
    """Make the profile's collectors include a PlantedCost on the spans tracer; the list gets each one made."""
    from infer_prof.profiler.collectors.spans import SpanCollector

    made: list[Any] = []

    def add_planted(collectors: list[Any]) -> list[Any]:
        spans = next(collector for collector in collectors if isinstance(collector, SpanCollector))
        made.append(PlantedCost(spans.tracer, spin_us))
        return [*collectors, made[-1]]

    _edit_collectors(add_planted)
    return made


def _leave_out(names: set[str]) -> None:
    """Make every profile's collector list skip `names` (a measuring aid, not a product option). With
    spans left out, the session still injects its tracer, which then records nothing."""
    _edit_collectors(
        lambda collectors: [collector for collector in collectors if collector.name not in names]
    )


def _edit_collectors(edit: Callable[[list[Any]], list[Any]]) -> None:
    """Pass every profile's collector list through `edit` (sessions import the registry lazily, so this
    runs before any of them reads it)."""
    from infer_prof.profiler.collectors import registry

    full = registry.default_collectors

    def edited(profile: str, **kwargs):
        return edit(full(profile, **kwargs))

    registry.default_collectors = edited


if __name__ == "__main__":
    raise SystemExit(main())
