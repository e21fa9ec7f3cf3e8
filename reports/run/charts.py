"""Matplotlib charts of a run, each drawn into a figure or subfigure so HTML and PDF share one drawing."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, cast

import matplotlib

# Reports render files, never windows: Agg works headless and in CI, whatever MPLBACKEND says.
matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure, SubFigure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.ticker import MaxNLocator

from ...profiler.rundir.results import CATEGORIES, COMPONENTS
from ...profiler.rundir.schema import Breakdown, Prediction, Split
from ..format import fmt_gain, fmt_ms
from ..rundata import LATENCY_LABELS

Target = Figure | SubFigure

# Colour-blind-safe (Okabe-Ito based) and stable across charts: a component keeps its colour everywhere.
COMPONENT_COLOURS = {
    "scheduler": "#E69F00",
    "sampler": "#D55E00",
    "kv_alloc": "#CC79A7",
    "prepare": "#999933",
    "tokenizer": "#F0E442",
    "detokenizer": "#8C6D31",
    "model_glue": "#56B4E9",
    "model_kernels": "#0072B2",
    "queue": "#009E73",
    "d2h": "#44AA99",
    "api": "#7B3294",
    "model": "#3A8FC9",
    "unattributed": "#DDDDDD",
}
# What a samples split calls "interpreter" when its stacks hold no native frames (py-spy without --native).
PYTHON_OR_NATIVE = "Python or the native code it calls"
CATEGORY_COLOURS = {
    "interpreter": "#E69F00",
    "lock": "#D55E00",
    "allocation": "#CC79A7",
    "kernel": "#0072B2",
    "idle": "#BBBBBB",
    "waiting": "#DDDDDD",
    "other": "#888888",
}
PHASE_COLOURS = {
    "queue_ms": "#009E73",
    "scheduler_ms": "#E69F00",
    "kv_alloc_ms": "#CC79A7",
    "prepare_ms": "#999933",
    "model_ms": "#0072B2",
    "sampler_ms": "#D55E00",
    "detokenizer_ms": "#8C6D31",
    "tokenizer_ms": "#F0E442",
    "other_ms": "#BBBBBB",
}
PERCENTILE_STYLES = {"p50": ("#009E73", "--"), "p90": ("#E69F00", "-."), "p99": ("#D55E00", ":")}

STYLE: dict[str, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "svg.fonttype": "path",  # glyphs as paths: the SVG needs no font, local or remote
    "pdf.fonttype": 42,  # embed TrueType so the PDF's text stays selectable
}


@contextmanager
def chart_style() -> Iterator[None]:
    with matplotlib.rc_context(cast(Any, STYLE)):  # the stubs want literal keys; these are all valid
        yield


def figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def page(width: float, height: float, margin: tuple[float, float, float, float]) -> Figure:
    """A figure laid out inside `margin` (left, bottom, width, height in figure fractions): paper has edges."""
    return Figure(figsize=(width, height), layout=ConstrainedLayoutEngine(rect=margin))


def to_svg(fig: Figure, label: str) -> str:
    """The figure as an inline <svg> element that scales to its container."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # Drop the fixed pt size (keep viewBox) so the chart fits the page width.
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1 width="100%"', text, count=1)
    return text.replace("<svg", f'<svg role="img" aria-label="{label}"', 1)


def draw_with(draw: Callable[..., None], *args: Any, width: float, height: float, label: str) -> str:
    """Draw one chart in the house style and return it as inline SVG."""
    with chart_style():
        fig = figure(width, height)
        draw(fig, *args)
        return to_svg(fig, label)


def draw_time_split(target: Target, breakdown: Breakdown) -> None:
    """Stacked bars of components per method (left) and a donut of the spans' categories (right)."""
    bars_area, donut_area = target.subfigures(1, 2, width_ratios=[1.6, 1.1], squeeze=False)[0]
    _draw_component_bars(bars_area.subplots(), breakdown)
    _draw_category_donut(donut_area.subplots(), breakdown)


def _draw_component_bars(ax: Any, breakdown: Breakdown) -> None:
    rows = component_rows(breakdown)
    for position, (_label, shares) in enumerate(rows):
        left = 0.0
        for name, share in shares.items():
            if share <= 0:
                continue
            ax.barh(
                position,
                share * 100,
                left=left * 100,
                color=COMPONENT_COLOURS[name],
                label=name if position == 0 or name in ("unattributed", "model") else None,
                edgecolor="white",
                linewidth=0.5,
            )
            if share >= 0.075:  # narrower segments cannot fit a label without colliding
                ax.text(
                    (left + share / 2) * 100,
                    position,
                    f"{share:.0%}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if name in ("model_kernels", "sampler", "model") else "black",
                )
            left += share
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of thread wall time")
    ax.set_title("Time by component, per method", loc="left")
    ax.grid(axis="y", visible=False)
    if not rows:
        ax.text(50, 0, "no component split in this run", ha="center", va="center", color="#555555")
        return
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    # An "outside" legend is laid out by constrained layout, so it hugs the axes at any figure height.
    width_in = ax.figure.bbox.width / ax.figure.dpi
    ax.figure.legend(
        unique.values(),
        unique.keys(),
        loc="outside lower center",
        ncol=5 if width_in > 5.5 else 3,
        fontsize=8,
    )


def component_rows(breakdown: Breakdown) -> list[tuple[str, dict[str, float]]]:
    """(bar label naming its method, {component: share}) per method that measured components.

    Python-only samples cannot split the model's forward pass into its Python glue and its kernels, so
    their split has one `model` share: it is drawn as that, never left as "unattributed" time."""
    methods = breakdown.get("methods") or {}
    rows: list[tuple[str, dict[str, float]]] = []
    for label, split in (
        ("spans (timed)", methods.get("spans")),
        ("samples (py-spy)", methods.get("samples")),
        ("other threads", breakdown.get("client_threads")),
    ):
        if not split:
            continue
        recorded = split.get("components") or {}
        shares = {name: float(recorded.get(name) or 0.0) for name in COMPONENTS}
        if (model := recorded.get("model")) is not None and not (
            shares["model_glue"] or shares["model_kernels"]
        ):
            shares["model"] = float(model)
        shares["unattributed"] = max(0.0, 1.0 - sum(shares.values()))
        rows.append((label, shares))
    return rows


def category_source(breakdown: Breakdown) -> tuple[str, dict[str, float], bool]:
    """(method, {category: share}, whether `interpreter` there includes native code) for the category chart:
    the spans' split, else the samples' (a foreign server has no spans); empty when neither has one."""
    methods = breakdown.get("methods") or {}
    for method in ("spans", "samples"):
        split: Split = methods.get(method) or {}
        shares = {
            name: float(value)
            for name, value in (split.get("categories") or {}).items()
            if isinstance(value, (int, float)) and value > 0
        }
        mixed = method == "samples" and split.get("resolution") == "python"
        if mixed and (split.get("categories") or {}).get("interpreter") is None and shares:
            # Python-only samples leave interpreter and kernel unsplit: what the other categories do not
            # take is one share, Python or the native code it calls.
            shares["interpreter"] = max(0.0, 1.0 - sum(shares.values()))
        if shares:
            return method, shares, mixed
    return "", {}, False


def _draw_category_donut(ax: Any, breakdown: Breakdown) -> None:
    method, categories, mixed = category_source(breakdown)
    if not categories:
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "no category split\nin this run",
            ha="center",
            va="center",
            color="#555555",
            transform=ax.transAxes,
        )
        ax.set_title("Categories")
        return
    shares = [(name, categories[name]) for name in CATEGORIES if name in categories]
    wedges, _ = ax.pie(
        [share for _, share in shares],
        colors=[CATEGORY_COLOURS[name] for name, _ in shares],
        startangle=90,
        counterclock=False,
        wedgeprops={"width": 0.3, "edgecolor": "white"},
    )
    # The long name on two lines: a wide legend would squeeze the donut to nothing.
    names = [
        "Python or the native\ncode it calls" if mixed and name == "interpreter" else name
        for name, _ in shares
    ]
    ax.legend(
        wedges,
        [f"{name} {share:.1%}" for name, (_, share) in zip(names, shares)],
        loc="center left",
        bbox_to_anchor=(0.92, 0.5),
        fontsize=8,
    )
    interpreter = categories.get("interpreter")
    if interpreter is not None:
        what = "Python or\nnative" if mixed else "interpreter"
        ax.text(0, 0, f"{interpreter:.0%}\n{what}", ha="center", va="center", fontsize=8, fontweight="bold")
    ax.set_title(f"Categories ({method})")
    ax.axis("equal")


def draw_timeline(target: Target, timeline: pd.DataFrame, end_s: float | None = None) -> None:
    """Step time stacked by phase, batch size and KV utilization over the run (binned means); `end_s`
    fixes the time axis at [0, end_s] so the request timeline drawn under it lines up."""
    step_ax, batch_ax, kv_ax = target.subplots(3, 1, sharex=True, height_ratios=[2.2, 1, 1])
    phases = [c for c in timeline.columns if c.endswith("_ms")]
    if phases:
        step_ax.stackplot(
            timeline["t_s"],
            *[timeline[c] for c in phases],
            labels=[c.removesuffix("_ms").replace("other", "outside spans") for c in phases],
            colors=[PHASE_COLOURS.get(c, "#999999") for c in phases],
            linewidth=0,
        )
        # Above the axes, not beside them: the axes then span the width, as the request timeline's do;
        # in rows of at most five, so that nine phases still fit a portrait page.
        target.legend(loc="outside upper center", ncol=min(len(phases), 5), fontsize=8)
    if end_s:
        kv_ax.set_xlim(0, end_s)
    per_bin = float(timeline["steps"].mean()) if "steps" in timeline else 1.0
    step_ax.set_ylabel("ms per step")
    step_ax.set_title(
        f"Step time by phase (mean of ~{per_bin:.0f} steps per point)"
        if per_bin > 1.5
        else "Step time by phase"
    )
    if "batch_size" in timeline:
        batch_ax.plot(timeline["t_s"], timeline["batch_size"], color="#0072B2", linewidth=1)
    batch_ax.set_ylabel("batch size")
    if "kv_utilization" in timeline:
        kv_ax.fill_between(
            timeline["t_s"], timeline["kv_utilization"] * 100, color="#CC79A7", alpha=0.6, linewidth=0
        )
    kv_ax.set_ylim(0, 100)
    kv_ax.set_ylabel("KV used %")
    kv_ax.set_xlabel("seconds since the run started")


def draw_latency_cdfs(
    target: Target, samples: dict[str, np.ndarray], slo: dict[str, float] | None = None
) -> None:
    """One CDF per latency (TTFT, TPOT, ITL, E2E) with p50/p90/p99 marked and, where the scenario set
    one, the SLO target as a solid red line with the share of requests within it."""
    axes = target.subplots(2, 2).ravel()
    for ax, (name, values) in zip(axes, samples.items()):
        label = LATENCY_LABELS.get(name, name)
        ax.set_title(f"{label} ({values.size:,} samples)")
        ax.set_xlabel("ms")
        ax.xaxis.set_major_locator(
            MaxNLocator(nbins=5, min_n_ticks=3)
        )  # 30,000 ms labels stay apart at half-page width
        ax.set_ylim(0, 1.02)
        if values.size == 0:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
            continue
        # A CDF drawn through 1,000 quantiles looks the same as one through 30,000 points.
        probabilities = np.linspace(0, 1, min(values.size, 1000))
        ax.plot(np.quantile(values, probabilities), probabilities, color="#0072B2", linewidth=1.4)
        for stat, (colour, dash) in PERCENTILE_STYLES.items():
            value = float(np.percentile(values, float(stat[1:])))
            ax.axvline(value, color=colour, linestyle=dash, linewidth=1, label=f"{stat} {fmt_ms(value)}")
        target_ms = (slo or {}).get(name)
        if target_ms is not None:
            _draw_slo(ax, values, target_ms)
        ax.legend(loc="lower right", fontsize=7.5)
    axes[0].set_ylabel("fraction of samples")
    axes[2].set_ylabel("fraction of samples")


SLO_COLOUR = "#c0392b"


def _draw_slo(ax: Any, values: np.ndarray, target_ms: float) -> None:
    """The target line, the region past it shaded, and how many samples lie within it."""
    within = float(np.mean(values <= target_ms))
    high = max(float(values.max()), target_ms) * 1.04
    low = min(float(values.min()), target_ms)
    ax.axvspan(target_ms, high, color=SLO_COLOUR, alpha=0.07, linewidth=0)
    ax.axvline(
        target_ms, color=SLO_COLOUR, linewidth=1.8, label=f"SLO {fmt_ms(target_ms)}: {within:.1%} within"
    )
    ax.set_xlim(min(ax.get_xlim()[0], low), high)


def draw_predictions(
    target: Target, predictions: Mapping[str, Prediction], noise: float | None = None
) -> None:
    """Predicted (Amdahl) vs measured end-to-end gain of each native path; `noise` (a fraction: how far
    --verify's Python runs differ) is shaded, and measured gains inside it are labelled so."""
    ax = target.subplots()
    names = list(predictions)
    positions = np.arange(len(names))
    predicted, errors = _predicted_gains([predictions[name] for name in names])
    _draw_predicted_bars(ax, positions, predicted, errors)
    _draw_measured_bars(ax, positions, [predictions[name].get("measured_gain") for name in names], noise)
    ax.margins(x=0.12)
    title = "Native path gains: predicted vs measured" + _shade_noise(ax, noise)
    ax.set_yticks(positions, names)
    ax.set_ylim(
        len(names) - 0.35, -0.65
    )  # room under the last bar for its "not measured" label; top row first
    ax.set_xlabel("end-to-end throughput gain, %")
    ax.set_title(title)
    ax.grid(axis="y", visible=False)
    ax.legend(loc="lower right")


def _predicted_gains(entries: list[Prediction]) -> tuple[list[float], np.ndarray]:
    """Each path's predicted gain in %, and its 95% interval as error bars below and above it (from the replayed
    speedup's: an interval only where both ends were measured, none elsewhere)."""
    predicted = [100 * float(entry.get("predicted_gain") or 0.0) for entry in entries]
    spans = [(entry.get("predicted_gain_low"), entry.get("predicted_gain_high")) for entry in entries]
    errors = np.array(
        [
            [max(0.0, p - 100 * low), max(0.0, 100 * high - p)]
            if low is not None and high is not None
            else [0.0, 0.0]
            for p, (low, high) in zip(predicted, spans)
        ]
    ).T
    return predicted, errors


def _draw_predicted_bars(ax: Axes, positions: np.ndarray, predicted: list[float], errors: np.ndarray) -> None:
    bars = ax.barh(
        positions - 0.2,
        predicted,
        height=0.38,
        color="#56B4E9",
        label="predicted",
        xerr=errors if errors.any() else None,
        error_kw={"elinewidth": 1, "capsize": 2},
    )
    ax.bar_label(bars, [fmt_gain(v / 100) for v in predicted], padding=3, fontsize=8)


def _draw_measured_bars(
    ax: Axes, positions: np.ndarray, measured: list[float | None], noise: float | None
) -> None:
    """The measured gains beside the predicted ones, labelled (within noise or not); "not measured" without any."""
    if not any(value is not None for value in measured):
        for position in positions:
            ax.text(0.1, position + 0.2, "not measured", va="center", fontsize=8, color="#555555")
        return
    bars = ax.barh(
        positions + 0.2,
        [100 * float(v) if v is not None else 0.0 for v in measured],
        height=0.38,
        color="#0072B2",
        label="measured",
    )
    ax.bar_label(bars, [_measured_label(value, noise) for value in measured], padding=3, fontsize=8)


def _shade_noise(ax: Axes, noise: float | None) -> str:
    """Shade the noise band (keeping the axis's limits), and what the title says of it: "" unless it covers
    every gain shown."""
    if noise is None:
        return ""
    low, high = ax.get_xlim()
    ax.axvspan(
        -noise * 100,
        noise * 100,
        color="#999999",
        alpha=0.18,
        linewidth=0,
        label=f"noise: Python runs differ by {noise:.1%}",
    )
    ax.set_xlim(low, high)  # a wide noise band shades the whole chart rather than shrinking the bars
    return f" (noise {noise:.0%} exceeds every gain shown)" if noise * 100 >= max(abs(low), abs(high)) else ""


def _measured_label(value: float | None, noise: float | None) -> str:
    if value is None:
        return "not measured"
    return fmt_gain(value) + (" (within noise)" if noise is not None and abs(value) < noise else "")
