"""Read and validate a performance budget file (TOML) into dataclasses; see docs/budgets.md."""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from ...errors import BudgetError, InferProfError, check_nesting, read_bounded
from ...scenarios.spec import MAX_DURATION_S, MAX_REQUESTS, MAX_SEED
from ..rundir.results import CATEGORIES, COMPONENTS, LATENCY_METRICS, RunResult

MAX_REPEATS = 100

LEVELS = ("error", "warn")
AGGREGATES = ("median", "mean", "min", "max")
RUN_KEYS = ("scenario", "model", "requests", "repeats", "seed", "duration_s", "native", "threads")
TOP_KEYS = ("name", "description", *RUN_KEYS, "alpha", "baseline", "budget")
ENTRY_KEYS = (
    "name",
    "description",
    "metric",
    "ratio",
    "min",
    "max",
    "min_ratio",
    "max_ratio",
    "level",
    "aggregate",
)
BASELINE_KEYS = ("model", "requests", "seed", "duration_s", "native", "threads")
MAX_THREADS = 1024
SECTIONS = tuple(name for name in RunResult.__dataclass_fields__ if name != "schema_version")

# Counters recorded by profiler.collectors.counters; a bare counter name means `counters.<name>`.
KNOWN_COUNTERS = (
    "python_calls_per_token",
    "python_calls_per_step",
    "torch_ops_per_step",
    "native_calls_per_step",
    "allocations_per_step",
    "bytes_copied_per_step",
)


def _build_aliases() -> dict[str, str]:
    spans = "breakdown.methods.spans"
    aliases = {
        "throughput": "metrics.output_token_throughput",
        "output_token_throughput": "metrics.output_token_throughput",
        "total_token_throughput": "metrics.total_token_throughput",
        "request_throughput": "metrics.request_throughput",
        "goodput": "metrics.goodput",
        "completed": "metrics.completed",
        "failed": "metrics.failed",
        "steps": "engine.steps",
        "preemptions": "engine.preemptions",
        "mean_batch_size": "engine.batch_size.mean",
        "kv_utilization": "engine.kv_utilization.mean",
        "dispatch_share": f"{spans}.dispatch",
        "profiling_overhead": "overhead.throughput_ratio",
        # A GPU run's device timeline (result.json's gpu_time; absent on a CPU run).
        "gpu_idle_host_share": "gpu_time.idle_host_share",
        "gpu_idle_no_work_share": "gpu_time.idle_no_work_share",
        "gpu_busy_share": "gpu_time.busy_share",
        "launches_per_step": "gpu_time.launches_per_step",
    }
    for latency in LATENCY_METRICS:  # p99_ttft_ms, mean_tpot_ms, ...
        for stat in ("mean", "p50", "p90", "p99"):
            aliases[f"{stat}_{latency}"] = f"metrics.{latency}.{stat}"
    for category in CATEGORIES:  # interpreter_share, lock_share, ...
        aliases[f"{category}_share"] = f"{spans}.categories.{category}"
    for component in COMPONENTS:  # sampler_share, scheduler_share, ...
        aliases[f"{component}_share"] = f"{spans}.components.{component}"
    for counter in KNOWN_COUNTERS:
        aliases[counter] = f"counters.{counter}"
    return aliases


ALIASES: dict[str, str] = _build_aliases()
# `native_speedup.<component>` is the measured native speedup the verdict records for a component.
NATIVE_SPEEDUP_PREFIX = "native_speedup."


@dataclass(frozen=True, slots=True)
class Assertion:
    """One [[budget]] entry: a metric (or a ratio of two) and its bounds."""

    name: str
    metric: str  # as written in the file, for messages
    paths: tuple[str, ...]  # one resolved dotted path, or two for an in-run ratio (numerator, denominator)
    min: float | None = None
    max: float | None = None
    min_ratio: float | None = None  # vs the baseline's value of the same metric
    max_ratio: float | None = None
    level: str = "error"
    aggregate: str = "median"
    description: str = ""
    line: int | None = None

    @property
    def is_ratio(self) -> bool:
        return len(self.paths) == 2

    @property
    def is_counter(self) -> bool:
        """Counters are exact: compared without any noise handling."""
        return all(path.startswith("counters.") for path in self.paths)

    @property
    def needs_baseline(self) -> bool:
        return self.min_ratio is not None or self.max_ratio is not None

    def bound_text(self) -> str:
        parts = []
        if self.min is not None:
            parts.append(f">= {self.min:g}")
        if self.max is not None:
            parts.append(f"<= {self.max:g}")
        if self.min_ratio is not None:
            parts.append(f">= {self.min_ratio:g} x baseline")
        if self.max_ratio is not None:
            parts.append(f"<= {self.max_ratio:g} x baseline")
        return ", ".join(parts)


class RunOverrides(TypedDict, total=False):
    """The run options a budget sets (only those given), as a budget's run_fn receives them; checked on reading."""

    scenario: str
    model: str
    requests: int
    seed: int
    duration_s: float
    native: list[str] | str  # a [baseline] table's native as written: a list of twins, or one word
    threads: int  # torch's intra-op threads, fixed (the thread governor then leaves the count alone)
    profile: str  # set by the runner, not by the file: the counting run's "counters"


@dataclass(frozen=True, slots=True)
class BudgetFile:
    """A whole budget: what to run (scenario and overrides) and what must hold."""

    path: Path | None
    assertions: tuple[Assertion, ...]
    name: str = ""
    description: str = ""
    scenario: str | None = None
    model: str | None = None
    requests: int | None = None
    repeats: int = 1
    seed: int | None = None
    duration_s: float | None = None
    native: tuple[str, ...] | None = None
    threads: int | None = None  # None: the engine's own choice, which the thread governor moves with the load
    alpha: float = 0.01  # one-sided significance level of a baseline regression
    baseline: RunOverrides = field(default_factory=lambda: RunOverrides())  # what makes the baseline config

    def run_overrides(self) -> RunOverrides:
        """The run options this budget sets (only those given), as the runner receives them."""
        overrides: RunOverrides = {}
        if self.scenario is not None:
            overrides["scenario"] = self.scenario
        if self.model is not None:
            overrides["model"] = self.model
        if self.requests is not None:
            overrides["requests"] = self.requests
        if self.seed is not None:
            overrides["seed"] = self.seed
        if self.duration_s is not None:
            overrides["duration_s"] = self.duration_s
        if self.native is not None:
            overrides["native"] = list(self.native)
        if self.threads is not None:
            overrides["threads"] = self.threads
        return overrides

    @property
    def needs_counters(self) -> bool:
        return any(path.startswith("counters.") for a in self.assertions for path in a.paths)

    @property
    def needs_timed_runs(self) -> bool:
        return any(not path.startswith("counters.") for a in self.assertions for path in a.paths)


def resolve_metric(metric: str) -> str:
    """Map an alias, a counter name or `native_speedup.<component>` to a dotted result path."""
    if metric in ALIASES:
        return ALIASES[metric]
    if metric.startswith(NATIVE_SPEEDUP_PREFIX):
        component = metric[len(NATIVE_SPEEDUP_PREFIX) :]
        if component:
            return f"verdict.predictions.{component}.native_speedup"
    if "." in metric and metric.split(".", 1)[0] in SECTIONS:
        return metric
    raise KeyError(metric)


def metric_suggestions(metric: str, candidates: list[str] | None = None) -> str:
    """`; did you mean a, b?` for the closest known names, or an empty string."""
    pool = candidates if candidates is not None else [*ALIASES, *(f"{s}." for s in SECTIONS)]
    close = difflib.get_close_matches(metric, pool, n=3, cutoff=0.5)
    return f"; did you mean {', '.join(close)}?" if close else ""


def load_budget(path: str | Path) -> BudgetFile:
    """Read a budget file; BudgetError names the line or key of any problem and how to fix it."""
    budget_path = Path(path)
    try:
        text = read_bounded(budget_path, BudgetError)
    except OSError as exc:
        raise BudgetError(f"{budget_path}: cannot read the budget file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise BudgetError(
            f"{budget_path}: not a text file (byte {exc.start} is not UTF-8); give a budget TOML file"
        ) from None
    return parse_budget(text, source=budget_path)


def parse_budget(text: str, *, source: str | Path = "<budget>") -> BudgetFile:
    """Parse budget TOML text (see load_budget)."""
    data = _toml(text, source)
    lines = _LineFinder(text)

    def where(line: int | None) -> str:
        return f"{source}:{line}" if line else f"{source}"

    _reject_unknown(data, TOP_KEYS, "top level", lambda key: where(lines.top_key(key)))
    assertions = _assertions(data, source, lines, where)
    run = {key: data[key] for key in RUN_KEYS if key in data}
    for key, value in run.items():
        _check_run_value(key, value, where(lines.top_key(key)))
    baseline = _baseline(data, lines, where)
    alpha = data.get("alpha", 0.01)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
        raise BudgetError(
            f"{where(lines.top_key('alpha'))}: alpha = {alpha!r}; use a significance level in (0, 0.5), e.g. 0.01"
        )
    for key in ("name", "description"):
        if key in data and not isinstance(data[key], str):
            raise BudgetError(f"{where(lines.top_key(key))}: `{key}` must be a string")
    native = run.get("native")
    return BudgetFile(
        path=Path(source) if not str(source).startswith("<") else None,
        assertions=assertions,
        name=data.get("name", "") or (Path(source).stem if not str(source).startswith("<") else "budget"),
        description=data.get("description", ""),
        scenario=run.get("scenario"),
        model=run.get("model"),
        requests=run.get("requests"),
        repeats=run.get("repeats", 1),
        seed=run.get("seed"),
        duration_s=run.get("duration_s"),
        native=None if native is None else tuple([native] if isinstance(native, str) else native),
        threads=run.get("threads"),
        alpha=float(alpha),
        baseline=cast(RunOverrides, dict(baseline)),  # its keys and values checked in _baseline
    )


# Where a problem is: a line number (None: unknown) -> "FILE:LINE" for a message.
Where = Callable[[int | None], str]


def _toml(text: str, source: str | Path) -> dict[str, Any]:
    """The budget text's TOML tables, or BudgetError saying where it is not TOML."""
    check_nesting(text, str(source), BudgetError)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already carries "(at line N, column M)".
        raise BudgetError(f"{source}: not valid TOML: {exc}") from None


def _assertions(
    data: dict[str, Any], source: str | Path, lines: _LineFinder, where: Where
) -> tuple[Assertion, ...]:
    """The [[budget]] entries, each parsed, at least one and each named apart."""
    entries = data.get("budget")
    if not isinstance(entries, list) or not entries:
        raise BudgetError(
            f'{source}: no [[budget]] entries; add at least one, e.g. [[budget]] metric = "throughput" min = 1'
        )
    assertions = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise BudgetError(
                f"{source}: `budget` must be an array of tables ([[budget]]), not {type(entry).__name__}"
            )
        assertions.append(_parse_entry(entry, index, lines, where))
    names = [a.name for a in assertions]
    for name in names:
        if names.count(name) > 1:
            raise BudgetError(
                f"{source}: two [[budget]] entries are named {name!r}; give each a unique `name`"
            )
    return tuple(assertions)


def _baseline(data: dict[str, Any], lines: _LineFinder, where: Where) -> dict[str, object]:
    """The [baseline] table of run overrides (empty when there is none), its keys and values checked."""
    baseline = data.get("baseline", {})
    if not isinstance(baseline, dict):
        raise BudgetError(
            f"{where(lines.top_key('baseline'))}: `baseline` must be a table ([baseline]) of run overrides"
        )
    _reject_unknown(
        baseline, BASELINE_KEYS, "[baseline]", lambda key: where(lines.table_key("baseline", key))
    )
    for key, value in baseline.items():
        _check_run_value(key, value, where(lines.table_key("baseline", key)))
    return baseline


def _parse_entry(entry: dict[str, object], index: int, lines: _LineFinder, where: Where) -> Assertion:
    line = lines.entry(index)
    here = where(line)
    label = f"[[budget]] #{index + 1}"

    def key_where(key: str) -> str:
        return where(lines.entry_key(index, key) or line)

    _reject_unknown(entry, ENTRY_KEYS, label, key_where)
    paths, written = _entry_metric(entry, here, label)
    bounds = _entry_bounds(entry, here, label, key_where)
    level = _entry_choice(entry, "level", "error", LEVELS, label, key_where)
    aggregate = _entry_choice(entry, "aggregate", "median", AGGREGATES, label, key_where)
    name = entry.get("name") or written
    if not isinstance(name, str):
        raise BudgetError(f"{here}: {label} `name` must be a string")
    return Assertion(
        name=name,
        metric=written,
        paths=paths,
        min=bounds["min"],
        max=bounds["max"],
        min_ratio=bounds["min_ratio"],
        max_ratio=bounds["max_ratio"],
        level=level,
        aggregate=aggregate,
        description=str(entry.get("description", "")),
        line=line,
    )


def _entry_metric(entry: dict[str, object], here: str, label: str) -> tuple[tuple[str, ...], str]:
    """An entry's result paths (one metric, or a ratio's two) and the metric as written."""
    metric = entry.get("metric")
    ratio = entry.get("ratio")
    if metric is not None and not isinstance(metric, str):
        raise BudgetError(f"{here}: {label} `metric` must be a string, not {metric!r}")
    if ratio is not None:
        if not (isinstance(ratio, list) and len(ratio) == 2 and all(isinstance(r, str) for r in ratio)):
            raise BudgetError(
                f"{here}: {label} `ratio` must be two metric names [numerator, denominator], not {ratio!r}"
            )
        paths = tuple(_resolve_or_fail(r, here, label) for r in ratio)
        return paths, metric if isinstance(metric, str) else f"{ratio[0]} / {ratio[1]}"
    if isinstance(metric, str):
        return (_resolve_or_fail(metric, here, label),), metric
    raise BudgetError(f'{here}: {label} has no `metric`; name one, e.g. metric = "metrics.ttft_ms.p99"')


def _entry_bounds(
    entry: dict[str, object], here: str, label: str, key_where: Callable[[str], str]
) -> dict[str, float | None]:
    """An entry's min, max, min_ratio and max_ratio (None: not given): finite, ratios above 0, at least one,
    and each lower bound at most its upper."""
    bounds: dict[str, float | None] = {}
    for key in ("min", "max", "min_ratio", "max_ratio"):
        value = entry.get(key)
        if value is None:
            bounds[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BudgetError(f"{key_where(key)}: {label} `{key}` must be a finite number, not {value!r}")
        if key.endswith("_ratio") and value <= 0:
            raise BudgetError(f"{key_where(key)}: {label} `{key}` = {value} must be > 0")
        bounds[key] = float(value)
    if all(value is None for value in bounds.values()):
        measured = entry.get("metric") or entry.get("ratio")
        raise BudgetError(f"{here}: {label} ({measured}) has no bound; add min, max, min_ratio or max_ratio")
    for low, high in (("min", "max"), ("min_ratio", "max_ratio")):
        lower, upper = bounds[low], bounds[high]
        if lower is not None and upper is not None and lower > upper:
            raise BudgetError(
                f"{here}: {label} {low} = {lower:g} is above {high} = {upper:g}; nothing can pass"
            )
    return bounds


def _entry_choice(
    entry: dict[str, object],
    key: str,
    default: str,
    choices: tuple[str, ...],
    label: str,
    key_where: Callable[[str], str],
) -> str:
    """An entry's `key`, one of `choices` (`default` when left out)."""
    value = entry.get(key, default)
    if not isinstance(value, str) or value not in choices:
        raise BudgetError(
            f"{key_where(key)}: {label} {key} = {value!r} is unknown; use one of {', '.join(choices)}"
        )
    return value


def _resolve_or_fail(metric: str, here: str, label: str) -> str:
    try:
        return resolve_metric(metric)
    except KeyError:
        raise BudgetError(
            f"{here}: {label} metric {metric!r} is unknown{metric_suggestions(metric)} "
            f"(use an alias from docs/budgets.md, a counter name, or a dotted path starting with one of {', '.join(SECTIONS)})"
        ) from None


def _check_run_value(key: str, value: object, here: str) -> None:
    ok = {
        "scenario": isinstance(value, str) and bool(value),
        "model": isinstance(value, str) and bool(value),
        "requests": isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_REQUESTS,
        "repeats": isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_REPEATS,
        "seed": isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED,
        "duration_s": isinstance(value, (int, float))
        and not isinstance(value, bool)
        and 0 < value <= MAX_DURATION_S,
        "native": _native_ok(value),
        "threads": isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THREADS,
    }[key]
    if not ok:
        wanted = {
            "scenario": "a scenario name",
            "model": "a model name",
            "requests": f"an integer in [1, {MAX_REQUESTS:,}]",
            "repeats": f"an integer in [1, {MAX_REPEATS}]",
            "seed": f"an integer in [0, {MAX_SEED}]",
            "duration_s": f"seconds in (0, {MAX_DURATION_S:g}]",
            "native": 'none, all, or a list of component names, e.g. ["sampler", "kv_alloc"]',
            "threads": f"an integer in [1, {MAX_THREADS}] (torch's threads; leave it out for the engine's choice)",
        }[key]
        raise BudgetError(f"{here}: {key} = {value!r}; use {wanted}")


def _native_ok(value: object) -> bool:
    from ...native_paths.toggles import parse_native

    if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
        return False
    if value == []:
        return True  # no C twin: the Python ones
    try:
        parse_native(value)
    except InferProfError:
        return False
    return True


def _reject_unknown(
    table: dict[str, object], allowed: tuple[str, ...], label: str, where_key: Callable[[str], str]
) -> None:
    for key in table:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise BudgetError(
                f"{where_key(key)}: unknown key {key!r} in {label}{hint}; allowed keys: {', '.join(allowed)}"
            )


class _LineFinder:
    """Line numbers for keys: tomllib reports none once the text has parsed, and users need them."""

    _header = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")

    def __init__(self, text: str) -> None:
        self._lines = text.splitlines()
        # (table name or "" for top level, array index, first line, last line)
        self._regions: list[tuple[str, int, int, int]] = []
        current, start = "", 1
        counts: dict[str, int] = {}
        for number, line in enumerate(self._lines, start=1):
            match = self._header.match(line)
            if match:
                self._close(current, counts, start, number - 1)
                current, start = match.group(1).strip(), number
        self._close(current, counts, start, len(self._lines))

    def _close(self, table: str, counts: dict[str, int], first: int, last: int) -> None:
        index = counts.get(table, 0)
        counts[table] = index + 1
        self._regions.append((table, index, first, last))

    def _find(self, table: str, index: int, key: str | None) -> int | None:
        for name, i, first, last in self._regions:
            if name == table and i == index:
                if key is None:
                    return first
                pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
                for number in range(first, last + 1):
                    if pattern.match(self._lines[number - 1]):
                        return number
                return None
        return None

    def top_key(self, key: str) -> int | None:
        return self._find("", 0, key) or self._find(key, 0, None)

    def table_key(self, table: str, key: str) -> int | None:
        return self._find(table, 0, key)

    def entry(self, index: int) -> int | None:
        return self._find("budget", index, None)

    def entry_key(self, index: int, key: str) -> int | None:
        return self._find("budget", index, key)
