"""Charts of a sweep: heatmaps of the interpreter share and of the measured native gain with the 1% and
30% share contours on both, and predicted vs measured gain per cell, in the run reports' style."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, TwoSlopeNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.typing import LineStyleType

from ..run.charts import Target
from .analysis import HIGH_LINE, LOW_LINE, Crossover, Facet

SHARE_FLOOR = 0.002  # the colour scale's bottom: shares below it all look like "almost no Python"
LINE_STYLES: dict[float, tuple[str, LineStyleType]] = {
    LOW_LINE: ("#56B4E9", "--"),
    HIGH_LINE: ("#D55E00", "-"),
}
GROUP_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000")
SHORT_VERDICTS = {
    "stay in Python": "stay",
    "targeted native paths": "targeted",
    "a native rewrite pays": "rewrite",
}


def draw_maps(target: Target, crossover: Crossover, facet: Facet) -> None:
    """The share map, and beside it the gain map when the sweep measured one."""
    with_gain = crossover.native_value is not None
    axes = target.subplots(1, 2 if with_gain else 1, squeeze=False)[0]
    draw_share_map(axes[0], crossover, facet)
    if with_gain:
        draw_gain_map(axes[1], crossover, facet)
    handles = [
        Line2D([], [], color=colour, linestyle=style, linewidth=1.8, label=f"interpreter share {level:.0%}")
        for level, (colour, style) in LINE_STYLES.items()
    ]
    target.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8)


class MapGrid(Protocol):
    """What a map's axes are drawn from: a sweep's crossover or two sweeps' comparison."""

    @property
    def x(self) -> str | None: ...
    @property
    def y(self) -> str | None: ...
    @property
    def x_values(self) -> Sequence[object]: ...
    @property
    def y_values(self) -> Sequence[object]: ...


def draw_share_map(ax: Axes, crossover: Crossover, facet: Facet) -> None:
    shares = np.clip(facet.share, SHARE_FLOOR, 1.0)
    image = ax.imshow(
        np.ma.masked_invalid(shares),
        origin="lower",
        aspect="auto",
        cmap="viridis",
        norm=LogNorm(vmin=SHARE_FLOOR, vmax=1.0),
    )
    colourbar = ax.figure.colorbar(image, ax=ax, shrink=0.9)
    ticks = [t for t in (0.002, 0.01, 0.03, 0.1, 0.3, 1.0)]
    colourbar.set_ticks(ticks, labels=[f"{t:.1%}" if t < 0.01 else f"{t:.0%}" for t in ticks])
    colourbar.set_label("interpreter share of busy time")
    for (line, column), share in np.ndenumerate(facet.share):
        if math.isnan(share):
            missing_cell(ax, line, column)
            continue
        noise = facet.share_se[line, column]
        text = f"{share:.1%}" + (f"\n±{noise:.1%}" if not math.isnan(noise) else "")
        verdict = SHORT_VERDICTS.get(facet.verdict[line][column] or "", "")
        ax.text(
            column,
            line,
            f"{text}\n{verdict}" if verdict else text,
            ha="center",
            va="center",
            fontsize=7.5,
            color="black" if share >= 0.15 else "white",
        )
    share_contours(ax, facet.share)
    map_axes(ax, crossover)
    ax.set_title("Interpreter share (Python control paths)" + (f"\n{facet.label}" if facet.label else ""))


def draw_gain_map(ax: Axes, crossover: Crossover, facet: Facet) -> None:
    gains = facet.gain
    unresolved = facet.unresolved if facet.unresolved is not None else np.zeros(gains.shape, dtype=bool)
    known = gains[~np.isnan(gains) & ~unresolved]  # noise must not stretch the scale
    # One wild cell (a run a busy machine slowed) must not wash out the others: the scale stops at 100%.
    reach = min(1.0, max(0.05, float(np.abs(known).max()))) if known.size else 0.05
    image = ax.imshow(
        np.ma.masked_where(np.isnan(gains) | unresolved, gains * 100),
        origin="lower",
        aspect="auto",
        cmap="RdBu",
        norm=TwoSlopeNorm(vcenter=0.0, vmin=-reach * 100, vmax=reach * 100),
    )
    colourbar = ax.figure.colorbar(image, ax=ax, shrink=0.9)
    colourbar.set_label("measured gain, % of busy time per token")
    for (line, column), gain in np.ndenumerate(gains):
        if math.isnan(gain):
            missing_cell(ax, line, column)
            continue
        if unresolved[line, column]:  # greyed, no verdict: the noise swamps the effect
            ax.add_patch(Rectangle((column - 0.5, line - 0.5), 1, 1, color="#d9d9d9", zorder=2))
            ax.text(
                column,
                line,
                f"unresolved\n{gain:+.0%}",
                ha="center",
                va="center",
                fontsize=7,
                color="#666666",
                zorder=3,
            )
            continue
        predicted = facet.predicted[line, column]
        text = f"{gain:+.1%}" + (f"\npred {predicted:+.1%}" if not math.isnan(predicted) else "")
        ax.text(
            column,
            line,
            text,
            ha="center",
            va="center",
            fontsize=7.5,
            color="white" if abs(gain) > 0.6 * reach else "black",
        )
    share_contours(ax, facet.share)  # the share's lines: does the gain follow where Python's time is?
    map_axes(ax, crossover)
    ax.set_title(
        f"Measured gain of --native {crossover.native_value}" + (f"\n{facet.label}" if facet.label else "")
    )


def share_contours(ax: Axes, shares: np.ndarray, *, muted: bool = False) -> None:
    """The 1% and 30% lines of the interpreter share, interpolated (in log share) between cell centres;
    `muted` draws them grey and thin (a comparison's before)."""
    if min(shares.shape) < 2 or np.isnan(shares).sum() > shares.size - 4:
        return
    logs = np.ma.masked_invalid(np.log10(np.clip(shares, SHARE_FLOOR / 10, 1.0)))
    for level, (colour, style) in LINE_STYLES.items():
        value = math.log10(level)
        if logs.min() < value < logs.max():
            ax.contour(
                np.arange(shares.shape[1]),
                np.arange(shares.shape[0]),
                logs,
                levels=[value],
                colors=["#888888" if muted else colour],
                linestyles=[style],
                linewidths=1.0 if muted else 2.0,
            )


def missing_cell(ax: Axes, line: int, column: int) -> None:
    ax.text(column, line, "not run", ha="center", va="center", fontsize=7.5, color="#777777")


def map_axes(ax: Axes, crossover: MapGrid) -> None:
    """Ticks and labels of a map over the crossover's (or a comparison's) x and y values."""
    ax.set_xticks(range(len(crossover.x_values)), [_label(value) for value in crossover.x_values])
    ax.set_yticks(range(len(crossover.y_values)), [_label(value) for value in crossover.y_values])
    ax.set_xlabel(crossover.x or "")
    ax.set_ylabel(crossover.y or "")
    ax.grid(False)


def _label(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return str(value).removeprefix("synthetic:")


def draw_predicted_vs_measured(target: Target, crossover: Crossover) -> None:
    """Each native cell: the Python run's Amdahl prediction against the measured gain (diagonal: exact)."""
    ax = target.subplots()
    points = crossover.points
    groups = list(dict.fromkeys(point["group"] for point in points))
    for index, group in enumerate(groups):
        chosen = [point for point in points if point["group"] == group and not point.get("unresolved")]
        colour = GROUP_COLOURS[index % len(GROUP_COLOURS)]
        ax.errorbar(
            [100 * p["predicted"] for p in chosen],
            [100 * p["measured"] for p in chosen],
            yerr=[100 * (p["measured_se"] or 0.0) for p in chosen],
            fmt="o",
            color=colour,
            markersize=5,
            capsize=2,
            linewidth=1,
            label=f"{crossover.y}={_label(group)}" if crossover.y else None,
        )
    # Unresolved cells (noise swamps them) are drawn but do not set the axes: one -321% must not squash the rest.
    values = [
        100 * v for p in points if not p.get("unresolved") for v in (p["predicted"], p["measured"])
    ] or [0.0, 1.0]
    low, high = min(0.0, *values), max(values)
    pad = 0.08 * (high - low or 1.0)
    ax.plot(
        [low - pad, high + pad],
        [low - pad, high + pad],
        color="#333333",
        linewidth=1,
        linestyle="--",
        label="measured = predicted",
    )
    ax.set_xlim(low - pad, high + pad)
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlabel("predicted gain (Amdahl, from the Python run), %")
    ax.set_ylabel("measured gain, %")
    ax.set_title("Native gain per cell: predicted vs measured")
    ax.legend(loc="upper left", fontsize=8)
