"""Charts of two sweeps compared: after - before of the interpreter share and of the measured gain, per cell,
with both sweeps' 1% and 30% share lines (before grey, after in colour)."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm
from matplotlib.lines import Line2D

from ..run.charts import Target
from .charts import LINE_STYLES, map_axes, missing_cell, share_contours
from .compare import FacetDifference, SweepComparison


def draw_difference_maps(target: Target, comparison: SweepComparison, facet: FacetDifference) -> None:
    with_gain = comparison.native_value is not None and not np.isnan(facet.gain_diff).all()
    axes = target.subplots(1, 2 if with_gain else 1, squeeze=False)[0]
    _difference(
        axes[0],
        comparison,
        facet,
        facet.share_diff,
        facet.before.share_se,
        facet.after.share_se,
        "Interpreter share: after - before",
    )
    if with_gain:
        _difference(
            axes[1],
            comparison,
            facet,
            facet.gain_diff,
            facet.before.gain_se,
            facet.after.gain_se,
            f"Measured gain of --native {comparison.native_value}: after - before",
        )
    handles = [
        Line2D([], [], color=colour, linestyle=style, linewidth=1.8, label=f"after: share {level:.0%}")
        for level, (colour, style) in LINE_STYLES.items()
    ]
    handles += [
        Line2D([], [], color="#888888", linestyle=style, linewidth=1.0, label=f"before: share {level:.0%}")
        for level, (_, style) in LINE_STYLES.items()
    ]
    target.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=8)


def _difference(
    ax: Axes,
    comparison: SweepComparison,
    facet: FacetDifference,
    diff: np.ndarray,
    se_before: np.ndarray,
    se_after: np.ndarray,
    title: str,
) -> None:
    known = diff[~np.isnan(diff)]
    reach = max(0.01, float(np.abs(known).max())) if known.size else 0.01
    image = ax.imshow(
        np.ma.masked_invalid(diff * 100),
        origin="lower",
        aspect="auto",
        cmap="PuOr",
        norm=TwoSlopeNorm(vcenter=0.0, vmin=-reach * 100, vmax=reach * 100),
    )
    ax.figure.colorbar(image, ax=ax, shrink=0.9).set_label("percentage points")
    noise = np.sqrt(se_before**2 + se_after**2)
    for (line, column), value in np.ndenumerate(diff):
        if math.isnan(value):
            missing_cell(ax, line, column)
            continue
        spread = noise[line, column]
        label = "" if math.isnan(spread) else ("\nnoise" if abs(value) <= 2 * spread else "\nbeyond noise")
        ax.text(
            column,
            line,
            f"{value * 100:+.1f} pp{label}",
            ha="center",
            va="center",
            fontsize=7.5,
            color="white" if abs(value) > 0.6 * reach else "black",
        )
    share_contours(ax, facet.before.share, muted=True)
    share_contours(ax, facet.after.share)
    map_axes(ax, comparison)
    ax.set_title(title + (f"\n{facet.label}" if facet.label else ""))
