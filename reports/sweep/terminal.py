"""The terminal view of a sweep (Rich): the headline, where the share crosses 1% and 30%, the first cell
to look at, and the cells table."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..terminal_table import print_table
from . import summary
from .analysis import Crossover


def render_sweep_summary(crossover: Crossover, console: Console | None = None) -> None:
    console = console or Console()
    console.print(Text(summary.headline(crossover), style="bold"))
    console.print(Text(f"  {summary.progress_line(crossover)}", style="dim"))
    for sentence in [*crossover.crossings, *crossover.trends]:
        console.print(Text(f"  {sentence}"))
    look = summary.first_look_sentence(crossover)
    if look:
        console.print(Text(look, style="bold"))
    table = summary.cells_table(crossover)
    if table.rows:
        print_table(console, table)
    for note in crossover.notes:
        console.print(Text(f"Note: {note}", style="yellow"))
