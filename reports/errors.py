"""The reports' errors: each one names the input at fault and what to do about it.

ReportError            a run directory's files cannot be turned into a report
└── CompareError       the runs given to compare cannot be compared (none on a side, no shared metric)
"""

from __future__ import annotations


class ReportError(Exception):
    """A run directory's files cannot be turned into a report (the message names the file and the fix)."""


class CompareError(ReportError):
    """The runs given to compare cannot be compared."""
