"""The house's arrows: every import in the tree (module level and inside functions) is walked, and a cycle
between modules or an arrow the architecture forbids (docs/architecture.md) fails the suite; so does a module
the map does not name."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("engine", "native_paths", "scenarios", "profiler", "reports", "cli")
# benchmarks/ are scripts over every room: they may import any of them, and nothing imports them.
SCRIPTS = ("benchmarks",)
OURS = (*ROOMS, "errors", *SCRIPTS)

# room -> the rooms (or modules, by prefix) it must never import. cli/ stands on top: it may import every room
# but benchmarks; profiler never imports reports or cli, so no arrow runs back up the house.
FORBIDDEN = {
    "engine": ("profiler", "native_paths", "scenarios", "reports", "cli", *SCRIPTS),
    "native_paths": ("profiler", "scenarios", "reports", "cli", *SCRIPTS),
    "scenarios": ("engine", "profiler", "native_paths", "reports", "cli", *SCRIPTS),
    "profiler": ("reports", "cli", *SCRIPTS),
    "reports": ("engine", "native_paths", "cli", *SCRIPTS),
    "cli": SCRIPTS,
    "errors": (*ROOMS, *SCRIPTS),
}
# native_paths: the C twins' adapters import the engine's types alone, so a C twin never leans on its Python
# twin; the modules that pair the two (pick one per --native and fall back, or time one against the other)
# import the Python twins too.
TWIN_PAIRERS = (
    "native_paths.toggles",
    "native_paths.bench",
    "native_paths.bench_control",
    "native_paths.bench_rows",
)
NATIVE_MAY_IMPORT = ("engine.types",)
# reports reads run directories and the statistics module of profiler, nothing else of it.
REPORTS_MAY_IMPORT = ("profiler.rundir", "profiler.stats")
# Only the command faces (cli/) import typer or Rich progress bars; rundir is the contract reports read, so it
# imports nothing else of profiler.
FACES_ONLY = ("typer", "rich.progress")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    found = {"errors": ROOT / "errors.py"}
    for room in (*ROOMS, *SCRIPTS):
        for path in (ROOT / room).rglob("*.py"):
            found[module_name(path)] = path
    return found


PACKAGE = (
    "infer_prof."  # what every room is installed under (docs/architecture.md, "The installed namespace")
)


def bare_imports(module: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for each import of a room by its bare name (`import engine`), which the
    installed package cannot satisfy."""
    for node in ast.walk(ast.parse(modules()[module].read_text(encoding="utf-8"))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        for name in names:
            if name.split(".")[0] in (*ROOMS, "errors"):
                yield name, node.lineno


def imports_of(module: str) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import statement of `module`, wherever it stands, named as in the
    repository (`infer_prof.engine.llama` is `engine.llama`)."""
    for name, line in _imports_as_written(module):
        yield name.removeprefix(PACKAGE), line


def _imports_as_written(module: str) -> Iterator[tuple[str, int]]:
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, node.lineno
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target.removeprefix(PACKAGE) in modules():
                    yield target, node.lineno


def ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:index]) for index in range(1, len(parts))]


@cache
def graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it makes Python load: the target and the packages above it that the
    importer is not already inside."""
    edges: dict[str, set[str]] = {}
    for module in modules():
        own = set(ancestors(module)) | {module}
        targets: set[str] = set()
        for imported, _line in imports_of(module):
            if imported.split(".")[0] not in OURS:
                continue
            targets |= {
                name for name in [*ancestors(imported), imported] if name in modules() and name not in own
            }
        edges[module] = targets - {module}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a cycle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_walk_sees_imports_inside_functions() -> None:
    # cli/run.py imports reports inside a function.
    assert "reports.run.generate" in graph()["cli.run"]
    assert "profiler.session.session" in graph()["cli.run"]


def test_no_package_hands_out_names_lazily() -> None:
    # A module-level __getattr__ makes its names Any to every type checker and hides the arrow from this walk:
    # a name is imported from the module that defines it.
    lazy = [
        module
        for module, path in modules().items()
        if any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in ast.parse(path.read_text(encoding="utf-8")).body
        )
    ]
    assert lazy == []


def test_every_room_is_imported_through_the_installed_package() -> None:
    # `pip install -e .` installs only `infer_prof`: a bare `import engine` would find a user's own engine.
    wrong = [f"{module}:{line} imports {name}" for module in modules() for name, line in bare_imports(module)]
    assert wrong == []


def test_rooms_import_each_other_relatively() -> None:
    # An absolute `infer_prof.` import resolves only through the installed package; a relative one also
    # resolves against the tree's own folders, for tools that read a bare clone (docs/architecture.md).
    wrong = [
        f"{module}:{line} imports {name}"
        for module in modules()
        if not module.startswith(SCRIPTS)
        for name, line in _imports_as_written(module)
        if name.startswith(PACKAGE) or name == PACKAGE.rstrip(".")
    ]
    assert wrong == []


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_planted_cycle() -> None:
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(planted) == [["a", "b", "c"]]


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_no_forbidden_arrows(room: str) -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module == room or module.startswith(room + ".")
        for imported, line in imports_of(module)
        if imported.split(".")[0] in FORBIDDEN[room]
    ]
    assert wrong == []


def test_reports_read_only_the_run_directory_contract_and_the_statistics_of_profiler() -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module.startswith("reports")
        for imported, line in imports_of(module)
        if imported.startswith("profiler") and not imported.startswith(REPORTS_MAY_IMPORT)
    ]
    assert wrong == []


def test_only_the_command_faces_import_typer_or_progress_bars() -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module.split(".")[0] not in ("cli", *SCRIPTS)
        for imported, line in imports_of(module)
        if any(imported == face or imported.startswith(face + ".") for face in FACES_ONLY)
        or (module.startswith("profiler.") and imported == "profiler")
    ]
    assert wrong == []


def test_profiler_never_imports_reports_or_the_cli() -> None:
    # The arrow that ran back up the house (profiler -> reports) was the CLI's, when it lived in profiler/cli/;
    # the CLI now stands above both rooms, and this keeps the arrow from coming back.
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module.split(".")[0] == "profiler"
        for imported, line in imports_of(module)
        if imported.split(".")[0] in ("reports", "cli")
    ]
    assert wrong == []
    assert not any(
        target.split(".")[0] in ("reports", "cli")
        for module, targets in graph().items()
        if module.split(".")[0] == "profiler"
        for target in targets
    )


def test_the_run_directory_contract_imports_nothing_else_of_profiler() -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module.startswith("profiler.rundir")
        for imported, line in imports_of(module)
        if imported.startswith("profiler") and not imported.startswith("profiler.rundir")
    ]
    assert wrong == []


def test_the_c_twins_import_only_the_engines_types_and_only_the_pairers_import_python_twins() -> None:
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if module.startswith("native_paths") and module not in TWIN_PAIRERS
        for imported, line in imports_of(module)
        if imported.split(".")[0] == "engine"
        and imported != "engine"
        and not imported.startswith(NATIVE_MAY_IMPORT)
    ]
    assert wrong == []


def test_benchmarks_are_walked_and_nothing_imports_them() -> None:
    assert any(module.startswith("benchmarks.") for module in modules())
    assert "profiler.session.options" in graph()["benchmarks.gpu_check"]
    wrong = [
        f"{module}:{line} imports {imported}"
        for module in modules()
        if not module.startswith(SCRIPTS)
        for imported, line in imports_of(module)
        if imported.split(".")[0] in SCRIPTS or imported.startswith("bench_")
    ]
    assert wrong == []


def test_the_map_names_every_module() -> None:
    """docs/architecture.md names each module's file (`name.py`) in its room's paragraph."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    missing = [
        str(path.relative_to(ROOT))
        for module, path in modules().items()
        if path.name != "__init__.py"
        and path.name != "__main__.py"
        and path.name not in text
        and f"{path.stem}" not in _named_words(text)
    ]
    assert missing == [], f"docs/architecture.md does not name: {missing}"


@cache
def _named_words(text: str) -> frozenset[str]:
    """The modules the map's Rooms block names, each as `name.py`."""
    rooms = text.split("## Rooms", 1)[1].split("## Arrows", 1)[0]
    return frozenset(re.findall(r"\b([a-z_]+)\.py\b", rooms))
