"""The words and tables of a run's summary, built once and drawn by the terminal, HTML and PDF reports.

Each part of the summary is a module of its own (the verdict, the lines after it, the figures, the time split,
the load, the GPU, the engine, another engine's server, the predicted gains, --verify's notes, what the run
did not see); the names the faces read are imported here, so `summary.headline(result)` reads as before.
"""

from __future__ import annotations

from .compact_split import compact_split
from .engine_table import engine_table
from .gpu import gpu_line, gpu_table, nvml_rows
from .headline_rules import headline_warnings, threads_lowered
from .key_figures import key_figures
from .load import latency_table, load_line, slo_lines, throughput_table
from .prediction_lines import prediction_lines
from .predictions_table import predictions_table
from .replicas import replica_lines, replicas_table
from .table import Table
from .target import probe_lines, queued_line, target_line, target_table
from .time_split import WITHIN_NOISE, time_split_table
from .unseen import (
    applicable_skipped_collectors,
    collectors_table,
    machine_spot,
    not_applicable,
    profile_limits,
    reading_blind_spots,
    skipped_collectors,
)
from .verdict import blind_spots, headline, reasons
from .verify_notes import (
    noise_warning,
    unresolved_note,
    unresolved_notes,
    verify_noise,
)

__all__ = [
    "Table",
    "WITHIN_NOISE",
    "applicable_skipped_collectors",
    "blind_spots",
    "collectors_table",
    "compact_split",
    "engine_table",
    "gpu_line",
    "gpu_table",
    "headline",
    "headline_warnings",
    "key_figures",
    "latency_table",
    "load_line",
    "machine_spot",
    "noise_warning",
    "not_applicable",
    "nvml_rows",
    "prediction_lines",
    "predictions_table",
    "probe_lines",
    "profile_limits",
    "queued_line",
    "reading_blind_spots",
    "reasons",
    "replica_lines",
    "replicas_table",
    "skipped_collectors",
    "slo_lines",
    "target_line",
    "target_table",
    "threads_lowered",
    "throughput_table",
    "time_split_table",
    "unresolved_note",
    "unresolved_notes",
    "verify_noise",
]
