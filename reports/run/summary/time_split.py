"""The long form's time split: each category and component by method, with the methods' disagreement."""

from __future__ import annotations

from ....profiler.rundir.results import CATEGORIES, COMPONENTS, RunResult
from ....profiler.rundir.schema import Breakdown, Split
from ...format import NOT_RECORDED, fmt_pct, fmt_pp
from ...rundata import why_not_measured
from .reads import Group, split_shares, summed_components
from .table import Table

WITHIN_NOISE = "within noise"
# The spans rows that rest on the model span's kernel share: marked when that share was assumed.
ASSUMED_WITHOUT_WINDOWS = ("interpreter", "kernel", "model_glue", "model_kernels")
GROUPS: tuple[tuple[Group, tuple[str, ...]], ...] = (("categories", CATEGORIES), ("components", COMPONENTS))


def time_split_table(result: RunResult) -> Table:
    """Categories and components by method, with the two methods' disagreement in percentage points."""
    table = Table(
        "Time split (share of engine-thread wall time)", ["", "spans", "samples", "samples - spans"]
    )
    breakdown = result.breakdown
    if not breakdown:
        table.note = f"not measured ({why_not_measured(result, 'breakdown')})"
        return table
    methods = breakdown.get("methods") or {}
    spans: Split = methods.get("spans") or {}
    samples = methods.get("samples")
    client = breakdown.get("client_threads")
    if client:
        # In a served run they are the server's (its event loop); in-process, the load driver and the collectors'.
        table.columns.append("other server threads" if result.target else "other threads")
    for group, names in GROUPS:
        table.sections.append(len(table.rows))
        table.rows += [_name_row(breakdown, group, name, spans, samples, client) for name in names]
    table.rows += _closing_rows(spans, samples, client)
    if samples is None:
        table.note = f"samples not measured ({why_not_measured(result, 'samples')})"
    elif breakdown.get("beyond_noise") is not None:
        table.note = (
            f"'{WITHIN_NOISE}': the spans share lies inside the samples share's 95% Wilson interval "
            f"({fmt_count(samples.get('samples'))} engine-thread samples): no disagreement beyond sampling noise"
        )
    return table


def _recorded_gaps(breakdown: Breakdown, group: Group) -> dict[str, float | None]:
    """The breakdown's recorded gaps of the group: signed, samples minus spans (which method saw more matters)."""
    return (
        breakdown.get("disagreement") if group == "categories" else breakdown.get("component_disagreement")
    ) or {}


def _beyond_noise(breakdown: Breakdown, group: Group) -> list[str] | None:
    """The group's names whose gap is beyond sampling noise (None in older results: their gaps print as recorded)."""
    return (
        breakdown.get("beyond_noise") if group == "categories" else breakdown.get("components_beyond_noise")
    )


def _name_row(
    breakdown: Breakdown,
    group: Group,
    name: str,
    spans: Split,
    samples: Split | None,
    client: Split | None,
) -> list[str]:
    """One category's or component's row: its share by each method, their gap, and the other threads' share."""
    span_value = split_shares(spans, group).get(name)
    sample_value = split_shares(samples, group).get(name)
    recorded = _recorded_gaps(breakdown, group)
    beyond = _beyond_noise(breakdown, group)
    measured_both = span_value is not None and sample_value is not None
    if beyond is not None and measured_both and name not in beyond and span_value != sample_value:
        gap = WITHIN_NOISE
    elif name in recorded:
        gap = fmt_pp(recorded[name])
    elif span_value is not None and sample_value is not None:
        gap = fmt_pp((sample_value - span_value) * 100)
    else:
        gap = NOT_RECORDED
    spans_cell = fmt_pct(span_value)
    if name in ASSUMED_WITHOUT_WINDOWS and spans.get("kernel_source") == "assumed" and span_value is not None:
        spans_cell += " (assumed)"  # no kernel window ran and no native samples: not a measurement
    row = [name, spans_cell, fmt_pct(sample_value), gap]
    if client:
        row.append(fmt_pct(split_shares(client, group).get(name)))
    return row


def _closing_rows(spans: Split, samples: Split | None, client: Split | None) -> list[list[str]]:
    """The rows after the names: the model whole (Python-only samples), dispatch, evidence, the kernel share's source."""
    rows = []
    whole = split_shares(samples, "components").get("model")
    if whole is not None:  # python-only samples see the forward pass whole; the spans split it in two
        glue_and_kernels = summed_components(spans, ("model_glue", "model_kernels")) if spans else None
        rows.append(
            [
                "model (whole)",
                fmt_pct(glue_and_kernels),
                fmt_pct(whole),
                fmt_pp((whole - glue_and_kernels) * 100) if glue_and_kernels is not None else NOT_RECORDED,
            ]
            + ([fmt_pct(split_shares(client, "components").get("model"))] if client else [])
        )
    dispatch = [
        "dispatch",
        fmt_pct(spans.get("dispatch")),
        fmt_pct(samples.get("dispatch") if samples else None),
        NOT_RECORDED,
    ]
    rows.append(dispatch + ([fmt_pct(client.get("dispatch"))] if client else []))
    rows.append(
        ["evidence", evidence(spans, "spans"), evidence(samples, "samples"), NOT_RECORDED]
        + ([evidence(client, "samples")] if client else [])
    )
    source = spans.get("kernel_source")
    if source:
        resolved = split_shares(samples, "categories").get("kernel") is not None  # native frames only
        rows.append(
            [
                "kernel share from",
                source,
                "native frames" if resolved else NOT_RECORDED,
                NOT_RECORDED,
            ]
            + ([NOT_RECORDED] if client else [])
        )
    return rows


def fmt_count(value: object) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else NOT_RECORDED


def evidence(split: Split | None, method: str) -> str:
    """What a method's shares rest on: spans timed (over steps), or stack samples taken."""
    if not split:
        return NOT_RECORDED
    if method == "spans":
        if split.get("spans") is None:
            return (
                f"{fmt_count(split.get('steps'))} steps" if split.get("steps") is not None else NOT_RECORDED
            )
        return f"{fmt_count(split['spans'])} spans, {fmt_count(split.get('steps'))} steps"
    return f"{fmt_count(split.get('samples'))} samples" if split.get("samples") is not None else NOT_RECORDED
