"""Lays out wrapped text and monospaced tables onto A4 matplotlib pages for the PDF reports."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from matplotlib.figure import Figure

from .summary import Table

A4_INCHES = (8.27, 11.69)
MARGIN_IN = 0.7
# Where charts may go on an A4 page (left, bottom, width, height as fractions): printers clip the edges.
CHART_AREA = (0.07, 0.045, 0.86, 0.915)
# Point size, line height (pt), characters per line for the A4 text width, font family, weight.
STYLES = {
    "title": (20, 28, 44, "DejaVu Sans", "bold"),
    "heading": (13, 22, 68, "DejaVu Sans", "bold"),
    "verdict": (12, 17, 76, "DejaVu Sans", "bold"),
    "body": (9.5, 13.5, 100, "DejaVu Sans", "normal"),
    "muted": (8.5, 12, 110, "DejaVu Sans", "normal"),
    "mono": (7.8, 10.6, 104, "DejaVu Sans Mono", "normal"),  # 494 pt of text width / 4.7 pt a glyph
}


@dataclass
class TextPages:
    """Appends styled lines top to bottom, starting a new page when one fills up."""

    new_page: Callable[[], Figure]
    finish_page: Callable[[Figure], None]
    page: Figure | None = None
    y_pt: float = 0.0

    def _height_pt(self) -> float:
        return A4_INCHES[1] * 72

    def _ensure(self, needed_pt: float) -> Figure:
        bottom = MARGIN_IN * 72
        if self.page is None or self.y_pt - needed_pt < bottom:
            if self.page is not None:
                self.finish_page(self.page)
            self.page = self.new_page()
            self.y_pt = self._height_pt() - MARGIN_IN * 72
        return self.page

    def line(
        self, text: str, style: str = "body", colour: str = "#1d2330", wrap: bool = True, indent: int = 0
    ) -> None:
        size, height, width, family, weight = STYLES[style]
        pieces = (
            textwrap.wrap(text, width - indent, subsequent_indent="  " if indent else "") if wrap else [text]
        )
        for piece in pieces or [""]:
            page = self._ensure(height)
            self.y_pt -= height
            page.text(
                (MARGIN_IN + indent * size * 0.55 / 72) / A4_INCHES[0],
                self.y_pt / self._height_pt(),
                piece,
                fontsize=size,
                family=family,
                weight=weight,
                color=colour,
                va="baseline",
            )

    def space(self, points: float = 8) -> None:
        # Room at the foot of a page is not worth a page of its own: the next line starts one if it must.
        if self.page is not None:
            self.y_pt = max(self.y_pt - points, MARGIN_IN * 72)

    def table(self, table: Table, *, text_columns: tuple[int, ...] = ()) -> None:
        """A table as aligned monospaced text, its title as a heading; kept on one page when it fits."""
        if table.text:  # a column of sentences reads from the left, like the first
            text_columns = tuple(range(1, len(table.columns)))
        lines = table_lines(table, text_columns=text_columns)
        _, height, _, _, _ = STYLES["mono"]
        self._ensure(STYLES["heading"][1] + height * min(len(lines), 40))
        self.line(table.title, "heading")
        for text in lines:
            self.line(text, "mono", wrap=False)
        if table.note:
            self.line(table.note[:1].upper() + table.note[1:], "muted", colour="#5b6475")
        self.space(6)

    def close(self) -> None:
        if self.page is not None:
            self.finish_page(self.page)
            self.page = None


def table_lines(table: Table, *, text_columns: tuple[int, ...] = (), width: int | None = None) -> list[str]:
    """Rows padded to column widths: numbers right-aligned, the first and `text_columns` left-aligned.

    Nothing is cut: when the row is wider than `width` characters (the A4 text width by default), the
    widest column is narrowed and its cells wrap onto continuation lines, so every line fits the page.
    """
    if not table.rows:
        return []
    width = width or STYLES["mono"][2]
    cells = [[str(cell) for cell in row] for row in [table.columns, *table.rows]]
    count = len(table.columns)
    widths = [max((len(row[i]) for row in cells if i < len(row)), default=0) for i in range(count)]
    _fit(widths, width - 2 * (count - 1))
    lines = []
    for index, row in enumerate(cells):
        if index - 1 in table.sections and index > 1:
            lines.append("")
        pieces = [_wrap(cell, widths[i]) for i, cell in enumerate(row)]
        for part in range(max(len(piece) for piece in pieces)):
            parts = []
            for i, piece in enumerate(pieces):
                text = piece[part] if part < len(piece) else ""
                left = i == 0 or i in text_columns or part > 0
                parts.append(text.ljust(widths[i]) if left else text.rjust(widths[i]))
            lines.append("  ".join(parts).rstrip())
        if index == 0:
            lines.append("-" * min(len(lines[-1]), width))
    return lines


MIN_COLUMN = 8  # narrower than this a column of numbers stops being readable


def _fit(widths: list[int], room: int) -> None:
    """Narrow the widest column, one character at a time, until the columns fit `room`."""
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= MIN_COLUMN:
            return  # as narrow as it gets: the page clips nothing more than before, but cannot do better
        widths[widest] -= 1


def _wrap(cell: str, width: int) -> list[str]:
    if len(cell) <= width:
        return [cell]
    # Paths and versions have few spaces: break anywhere rather than lose the end of a value.
    return textwrap.wrap(cell, width, break_long_words=True, break_on_hyphens=False) or [""]
