"""The flame graph (an icicle: callers on top) of a run's py-spy samples, one per thread group, as inline SVG.

Each frame's width is its share of the group's samples, its colour the component most of its samples
were attributed to (sample_labels.csv): the same colours as the time split's component bars, so the
graph and the split tell one story. Its categories (interpreter, kernel, lock...) are in its tooltip. The frames are laid out here; the report's inline script
(templates/flamegraph.js) only switches groups and zooms. The PDF draws the same layout with matplotlib.
"""

from __future__ import annotations

import base64
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from markupsafe import Markup, escape

from ..stacks import (
    UNCLASSIFIED,
    SampledStack,
    StackFrame,
    ThreadGroup,
    python_only,
    shown_component,
)
from .charts import COMPONENT_COLOURS, PYTHON_OR_NATIVE, Target

WIDTH = 1000  # SVG user units across; the SVG scales to the page width
ROW = 17  # units per stack depth
MIN_FRACTION = 0.001  # frames narrower than this share of their group are left out
MAX_FRAMES = 1500  # per group: the widest are kept (a parent is never narrower than its children)
NO_COMPONENT = "no component"  # a stack the classifier attributed to none (or a run without labels)
MIXED = "several components"  # a caller whose samples are spread over components: the engine loop, the root
OWN_COMPONENT = (
    0.75  # a frame takes a component's colour when at least this share of its samples is that component's
)
COLOURS = {
    **{name: colour for name, colour in COMPONENT_COLOURS.items() if name != "unattributed"},
    NO_COMPONENT: "#C9CFD6",
    MIXED: "#E8EAED",
}
DARK = ("model_kernels", "sampler", "api", "model", "detokenizer")  # colours that need white text
SCRIPT = Path(__file__).parents[1] / "templates" / "flamegraph.js"


@dataclass
class FlameNode:
    """One frame in the call tree: samples through it (total), samples ending in it (self), by category."""

    frame: StackFrame | None  # None for the root
    total: int = 0
    self_count: int = 0
    categories: Counter[str] = field(default_factory=Counter)
    components: Counter[str] = field(default_factory=Counter)
    children: dict[StackFrame, FlameNode] = field(default_factory=dict)

    @property
    def category(self) -> str:
        return self.categories.most_common(1)[0][0] if self.categories else UNCLASSIFIED

    @property
    def component(self) -> str:
        """The component nearly all its samples were attributed to; MIXED for a frame above several (the loop)."""
        if not self.components:
            return NO_COMPONENT
        name, count = self.components.most_common(1)[0]
        return name if count >= OWN_COMPONENT * self.total else MIXED


@dataclass
class Box:
    """A laid-out frame: left edge and width as fractions of the group's samples, and its depth."""

    x: float
    width: float
    depth: int
    node: FlameNode


def colour_key(stack: SampledStack, whole_model: bool) -> str:
    """The component a stack is coloured by (the model whole when its group has no native stacks)."""
    component = shown_component(stack.component, whole_model)
    return component if component in COLOURS else NO_COMPONENT


def build_tree(stacks: list[SampledStack], whole_model: bool = False) -> FlameNode:
    root = FlameNode(None)
    for stack in stacks:
        node = root
        component = colour_key(stack, whole_model)
        for frame in (None, *stack.frames):
            if frame is not None:
                node = node.children.setdefault(frame, FlameNode(frame))
            node.total += stack.count
            node.categories[stack.category] += stack.count
            node.components[component] += stack.count
        node.self_count += stack.count
    return root


def layout(root: FlameNode, min_fraction: float = MIN_FRACTION, max_frames: int = MAX_FRAMES) -> list[Box]:
    """Boxes of every frame at least `min_fraction` wide (widest children first), at most `max_frames`."""
    if root.total <= 0:
        return []
    boxes: list[Box] = []
    pending = [(root, 0.0, 0)]
    while pending:
        node, x, depth = pending.pop()
        width = node.total / root.total
        if width < min_fraction:
            continue
        boxes.append(Box(x, width, depth, node))
        left = x
        for child in sorted(node.children.values(), key=_widest_first):
            pending.append((child, left, depth + 1))
            left += child.total / root.total
    if len(boxes) > max_frames:
        boxes = sorted(boxes, key=lambda box: -box.width)[:max_frames]
    return sorted(boxes, key=lambda box: (box.depth, box.x))


def _widest_first(node: FlameNode) -> tuple[int, str, str, int]:
    frame = node.frame or StackFrame("")
    return (-node.total, frame.function, frame.file or "", frame.line if frame.line is not None else -1)


def frame_label(node: FlameNode, group: ThreadGroup) -> str:
    if node.frame is None:
        return f"all samples: {group.label}"
    return node.frame.function


def render_flamegraph(groups: list[ThreadGroup]) -> Markup:
    """The flame graph section's body: one tab and one SVG pane per group, the first one shown."""
    parts = ['<div class="flame-tabs" role="tablist">']
    for index, group in enumerate(groups):
        selected = "true" if index == 0 else "false"
        parts.append(
            f'<button type="button" role="tab" data-thread="{index}" aria-selected="{selected}">'
            f"{escape(group.label)}</button>"
        )
    parts.append("</div>")
    for index, group in enumerate(groups):
        hidden = "" if index == 0 else " hidden"
        parts.append(f'<div class="flame-pane" data-thread="{index}"{hidden}>{_svg(group, index)}</div>')
    parts.append(_legend(groups))
    if python_only(groups):
        parts.append(
            '<p class="caption">Python stacks only (py-spy without --native, the default profile): a '
            "frame's time is its Python line or the native code it calls, which this view cannot tell "
            "apart; <code>--profile deep</code> records native frames.</p>"
        )
    parts.append(
        '<p class="flame-status caption" aria-live="polite">Whole thread shown. Click a frame to zoom in.</p>'
    )
    return Markup("\n".join(parts))


def _svg(group: ThreadGroup, index: int) -> str:
    mixed = python_only([group])
    boxes = layout(build_tree(group.stacks, mixed))
    depth = max((box.depth for box in boxes), default=0) + 1
    frames = [_frame(box, group, mixed) for box in boxes]
    label = escape(f"flame graph of {group.label}")
    return (
        f'<svg class="flame" data-thread="{index}" viewBox="0 0 {WIDTH} {depth * ROW}" width="100%" '
        f'role="img" aria-label="{label}" font-family="DejaVu Sans Mono, monospace" font-size="11">'
        + "".join(frames)
        + "</svg>"
    )


def category_mix(node: FlameNode, mixed: bool) -> str:
    """'interpreter 80%, lock 20%' (each name as a reader should read it) for a frame's tooltip."""

    def name(category: str) -> str:
        return PYTHON_OR_NATIVE if mixed and category == "interpreter" else category

    return ", ".join(f"{name(cat)} {count / node.total:.0%}" for cat, count in node.categories.most_common(3))


def _frame(box: Box, group: ThreadGroup, mixed: bool = False) -> str:
    node = box.node
    name = frame_label(node, group)
    where = node.frame.where if node.frame is not None else ""
    share = node.total / group.samples if group.samples else 0.0
    component = node.component
    x, width, y = box.x * WIDTH, box.width * WIDTH, box.depth * ROW
    parts = ", ".join(f"{part} {count / node.total:.0%}" for part, count in node.components.most_common(3))
    tooltip = (
        f"{name}" + (f" ({where})" if where else "") + f"\n{node.total:,} samples, {share:.1%} of the thread;"
        f" self {node.self_count / group.samples:.1%}\ncomponent: {parts}\n{category_mix(node, mixed)}"
    )
    text_colour = "#ffffff" if component in DARK else "#1d2330"
    text = _fit(name, width)
    label = (
        f'<text x="{x + 3:.1f}" y="{y + 12.5:.1f}" fill="{text_colour}">{escape(text)}</text>' if text else ""
    )
    return (
        f'<g class="frame" data-x="{box.x:.6g}" data-w="{box.width:.6g}" data-depth="{box.depth}" '
        f'data-name="{escape(name)}" data-where="{escape(where)}" data-share="{share:.1%}" '
        f'data-component="{component}" data-category="{node.category}">'
        f"<title>{escape(tooltip)}</title>"
        f'<rect x="{x:.1f}" y="{y:.0f}" width="{max(width - 0.5, 0.1):.1f}" height="{ROW - 1}" rx="1.5" '
        f'fill="{COLOURS[component]}"/>{label}</g>'
    )


def _fit(name: str, width: float, char: float = 6.4, pad: float = 3.0) -> str:
    """The name if it fits `width`, else its end after an ellipsis ('…run_layers'): a method's own name is at
    its end, its class at its start."""
    chars = int((width - 2 * pad) // char)
    if chars < 5:  # "…on" says nothing: a label needs a few letters of its name
        return ""
    return name if len(name) <= chars else "\u2026" + name[len(name) - chars + 1 :]


def group_components(groups: list[ThreadGroup]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for group in groups:
        whole_model = python_only([group])
        for stack in group.stacks:
            counts[colour_key(stack, whole_model)] += stack.count
    return counts


def _legend(groups: list[ThreadGroup]) -> str:
    seen = set(group_components(groups)) | {MIXED}
    items = [
        f'<span class="swatch" style="background:{COLOURS[name]}"></span>{name}'
        for name in COLOURS
        if name in seen
    ]
    return (
        f'<p class="flame-legend caption">Colour: the component at least {OWN_COMPONENT:.0%} of a frame\'s samples '
        "were attributed to (hover a frame for its categories). "
        + " ".join(f'<span class="legend-item">{item}</span>' for item in items)
        + "</p>"
    )


@lru_cache(maxsize=1)
def script() -> tuple[Markup, str]:
    """The inline script and its CSP source expression ('sha256-...'), so no other script can run."""
    text = SCRIPT.read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return Markup(text), f"'sha256-{digest}'"


def draw_flamegraph(target: Target, group: ThreadGroup, max_depth: int = 40) -> None:
    """The same icicle for paper (matplotlib): the first `max_depth` levels, labels where they fit."""
    ax = target.subplots()
    boxes = [
        box
        for box in layout(build_tree(group.stacks, python_only([group])), min_fraction=0.002)
        if box.depth < max_depth
    ]
    for box in boxes:
        ax.add_patch(_rectangle(box, COLOURS[box.node.component]))
        text = _fit(frame_label(box.node, group), box.width * 1000, char=7.5)
        if text:
            ax.text(
                box.x + 0.002,
                box.depth + 0.5,
                text,
                va="center",
                ha="left",
                fontsize=5.5,
                clip_on=True,
                color="white" if box.node.component in DARK else "#1d2330",
                family="DejaVu Sans Mono",
            )
    depth = max((box.depth for box in boxes), default=0) + 1
    ax.set_xlim(0, 1)
    ax.set_ylim(depth, 0)
    ax.set_axis_off()
    ax.set_title(f"Flame graph: {group.label}", loc="left")
    from matplotlib.patches import Patch

    present = set(group_components([group])) | {MIXED}
    handles = [Patch(color=COLOURS[name], label=name) for name in COLOURS if name in present]
    title = "colour: component" + (
        "; a frame's time is its Python line or the native code it calls" if python_only([group]) else ""
    )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncol=min(len(handles), 6),
        fontsize=7,
        title=title,
        title_fontsize=7,
    )


def _rectangle(box: Box, colour: str):
    from matplotlib.patches import Rectangle

    return Rectangle((box.x, box.depth), max(box.width - 0.0005, 0.0002), 0.94, facecolor=colour, linewidth=0)
