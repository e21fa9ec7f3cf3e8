"""`infer-prof ledger [PATH]`: the prediction ledger's score, as a table or as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import LedgerError
from .app import app

if TYPE_CHECKING:
    from ..profiler.ledger.store import Ledger
    from ..profiler.ledger.summary import LedgerSummary, Score
    from ..reports.run.summary import Table

DAMAGED_SHOWN = 10  # damaged lines named one by one; more are counted


@app.command()
def ledger(
    path: Annotated[
        Optional[Path],
        typer.Argument(
            help="The ledger file (default: INFER_PROF_LEDGER, else runs/ledger.jsonl, where `run --verify` appends).",
            show_default=False,
            metavar="PATH",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
    with_void: Annotated[
        bool,
        typer.Option(
            "--with-void",
            help="Score the void pairs too (runs on a busy machine), labelled so: a view for a machine where every run is void.",
        ),
    ] = False,
) -> None:
    """Score the predictions: pairs, median |measured - predicted|, how often the measured gain fell inside the predicted interval."""
    from ..profiler.ledger.store import ledger_path, load_ledger

    read = load_ledger(ledger_path(given=path))  # a missing ledger is refused before scipy loads
    for line in read.damaged[:DAMAGED_SHOWN]:
        typer.echo(f"infer-prof: {read.path}:{line.number}: skipped, {line.reason}: {line.text!r}", err=True)
    if len(read.damaged) > DAMAGED_SHOWN:
        typer.echo(f"infer-prof: {len(read.damaged) - DAMAGED_SHOWN} more damaged line(s) skipped", err=True)
    if read.damaged and not read.records:
        raise LedgerError(
            f"{read.path} holds no ledger record ({len(read.damaged)} damaged line(s)); is it a ledger?"
        )
    from ..profiler.ledger.summary import summarize

    summary = summarize(read.records, include_void=with_void)
    if as_json:
        typer.echo(json.dumps(_as_json(read, summary), indent=2))
    elif not read.records:
        typer.echo(f"{read.path}: no pairs yet (`infer-prof run --verify` appends them)")
    else:
        _print(read, summary)


def _as_json(read: Ledger, summary: LedgerSummary) -> dict[str, object]:
    return {
        "path": str(read.path),
        **asdict(summary),
        "damaged_lines": [asdict(line) for line in read.damaged],
    }


def _print(read: Ledger, summary: LedgerSummary) -> None:
    from rich.console import Console

    from ..reports.terminal_table import print_table

    console = Console()
    span = (
        f", {summary.first_recorded} to {summary.last_recorded}"
        if summary.first_recorded != summary.last_recorded
        else f", {summary.first_recorded}"
    )
    console.print(f"ledger {read.path}: {summary.records} record(s){span}", soft_wrap=True)
    console.print()
    print_table(console, score_table(summary))


def score_table(summary: LedgerSummary) -> Table:
    """The score as a report table: all pairs, then each kind, then each kind's components."""
    from ..profiler.ledger.summary import AGREEMENT_BAND
    from ..reports.run.summary import Table

    groups = [summary.total, *summary.by_kind, *summary.by_component]
    sections = [1, 1 + len(summary.by_kind)]
    return Table(
        title="predicted vs measured end-to-end gains"
        + (", void pairs scored too (--with-void)" if summary.include_void else ""),
        columns=[
            "kind",
            "component",
            "pairs",
            "void",
            "|error| pp",
            "relative",
            "in interval",
            f"±{AGREEMENT_BAND:.0%}",
        ],
        rows=[_row(score) for score in groups],
        sections=sections,
        left_columns=(1,),
        note="|error|: the median |measured - predicted gain|, in points of the step (relative: over the predicted "
        "gain); in interval: measured gains inside the predicted interval, of the pairs that had one, with the "
        f"share's Wilson 95% interval; ±{AGREEMENT_BAND:.0%}: pairs with measured / predicted within "
        f"1 ± {AGREEMENT_BAND:g}; void pairs (run health, drift) are counted"
        + (" and, with --with-void, scored too." if summary.include_void else ", not scored."),
    )


def _row(score: Score) -> list[str]:
    from ..reports.format import NOT_RECORDED, fmt_pct

    points = NOT_RECORDED if score.median_error_points is None else f"{score.median_error_points:.2f}"
    inside = (
        f"{score.inside}/{score.with_interval} ({score.inside_low * 100:.0f}-{score.inside_high:.0%})"
        if score.with_interval and score.inside_low is not None and score.inside_high is not None
        else NOT_RECORDED
    )
    band = f"{score.within_band}/{score.pairs}" if score.pairs else NOT_RECORDED
    return [
        score.kind,
        score.component,
        str(score.pairs),
        str(score.void),
        points,
        fmt_pct(score.median_relative_error, 0),
        inside,
        band,
    ]
