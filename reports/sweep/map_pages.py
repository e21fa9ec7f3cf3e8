"""A sweep's per-facet maps as inline SVG for the HTML, and charts two to an A4 page for the PDF (sweep and sweep compare)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import SubFigure

from ..run import charts
from ..run.pdf_text import A4_INCHES, CHART_AREA

MAP_WIDTH = 10.0  # inches: the page's width
PAGE_HEIGHT = 10.2  # inches of an A4 page's chart area that two charts share


class _Labelled(Protocol):
    """A facet of a sweep's maps (a Facet or a FacetDifference): what its caption names."""

    @property
    def label(self) -> str: ...


Source = TypeVar("Source")  # what every facet's chart draws from: the sweep or the comparison
FacetT = TypeVar("FacetT", bound=_Labelled)


def map_height(y_values: int, titles: float) -> float:
    """A facet's map height: `titles` inches of titles and axes, three quarters of an inch per row of cells."""
    return titles + 0.75 * max(2, y_values)


def facet_svgs(
    draw: Callable[[charts.Target, Source, FacetT], None],
    source: Source,
    facets: Sequence[FacetT],
    *,
    height: float,
    label: str,
) -> list[str]:
    """One inline SVG per facet (a Facet or a FacetDifference): draw(target, source, facet), labelled '<label> <facet>'."""
    return [
        charts.draw_with(
            draw, source, facet, width=MAP_WIDTH, height=height, label=f"{label} {facet.label}".strip()
        )
        for facet in facets
    ]


def two_to_a_page(pdf: PdfPages, plans: Sequence[tuple[float, Callable[[SubFigure], None]]]) -> None:
    """Charts two to an A4 page, each (height in inches, draw(area)), the page's spare height left below them."""
    for start in range(0, len(plans), 2):
        page = charts.page(*A4_INCHES, CHART_AREA)
        chosen = plans[start : start + 2]
        heights = [height for height, _ in chosen]
        spare = max(0.5, PAGE_HEIGHT - sum(heights))
        areas = page.subfigures(len(chosen) + 1, 1, height_ratios=[*heights, spare], squeeze=False)[:, 0]
        for area, (_, draw) in zip(areas, chosen):
            draw(area)
        pdf.savefig(page)
