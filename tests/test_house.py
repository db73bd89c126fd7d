"""The package's rooms and the direction of its imports (README › Development draws the same map).

Every import counts: at module top, inside a function and under
``TYPE_CHECKING``. A room imports only the rooms listed under it in
``MAY_IMPORT``; no module imports itself back through others; the command
line reaches the library through public facades only.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "multiverse"

# room -> the rooms it may import (besides itself). "api" is the package's own facade and
# _api.py; "errors" is multiverse/errors.py. Read bottom up: the model branch (spec, work,
# store, model, stages) and the results branch (tables, analysis, plots, results) meet in
# the engine, which runs a spec and hands back Results.
GROUND = {"errors", "core"}
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "core": {"errors"},
    "spec": GROUND,
    "work": GROUND | {"spec"},
    "store": GROUND,
    "sim": GROUND | {"spec", "work"},
    "model": GROUND | {"store", "sim"},
    "stages": GROUND | {"spec", "work", "store", "model", "sim"},
    "tables": GROUND | {"spec", "store"},
    "analysis": GROUND | {"tables"},
    "labelling": GROUND | {"tables", "analysis"},
    "plots": GROUND | {"analysis"},
    "results": GROUND | {"tables", "analysis", "labelling", "plots"},
    "engine": GROUND | {"spec", "work", "store", "model", "sim", "stages", "tables", "analysis", "results"},
    "importers": GROUND | {"spec", "tables", "analysis", "results"},
    "explorer": GROUND | {"sim", "tables", "analysis", "results"},
    "gate": GROUND | {"spec", "tables", "analysis", "plots", "results"},
    "reporting": GROUND | {"store", "tables", "analysis", "plots", "results", "explorer", "gate"},
    "api": GROUND | {"spec", "work", "store", "sim", "engine", "tables", "analysis", "labelling", "results", "importers",
                     "reporting", "gate"},
}
# The command line sees the package's facade, the errors and the rooms' facades: never a module
# inside a room (test_the_command_line_goes_through_public_facades).
MAY_IMPORT["cli"] = set(MAY_IMPORT) - {"cli"}
MAX_FLAT_MODULES = 8
MAX_LINES = 500
MAX_COMPLEXITY = 25  # cyclomatic, as radon counts it (boolean operators and comprehensions too)


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "_api":
        return "api"
    return "errors" if parts[1] == "errors" else parts[1]


def _imports(path: Path) -> set[str]:
    """Every multiverse module ``path`` imports, relative imports resolved, at any depth of the file."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("multiverse"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("multiverse"):
                # ``from pkg import name``: the module pkg.name when it is one, else pkg itself.
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    found.add(candidate if _is_module(candidate) else target)
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[_module_name(path)] = {m for m in _imports(path) if _is_module(m)} - {_module_name(path)}
    return graph


GRAPH = _graph()


def test_each_room_imports_only_the_rooms_below_it():
    wrong = defaultdict(set)
    for module, imported in GRAPH.items():
        room = _room(module)
        for target in imported:
            other = _room(target)
            if other != room and other not in MAY_IMPORT[room]:
                wrong[f"{room} -> {other}"].add(f"{module} imports {target}")
    assert not wrong, "\n".join(f"{arrow}: {sorted(why)}" for arrow, why in sorted(wrong.items()))


def test_no_module_imports_itself_back():
    # Tarjan's strongly connected components over every import, function-level ones included.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                circle.append(w)
                if w == v:
                    break
            if len(circle) > 1:
                circles.append(sorted(circle))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not circles, circles


def test_the_command_line_goes_through_public_facades():
    # ``multiverse``, ``multiverse.errors`` or ``multiverse.<room>``: one level deep, a facade.
    private = sorted(f"{module} imports {target}" for module, imported in GRAPH.items() if _room(module) == "cli"
                     for target in imported
                     if _room(target) != "cli" and (target.count(".") > 1 or target == "multiverse._api"))
    assert not private, private


def test_few_modules_lie_flat_and_none_is_long():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT_MODULES, flat
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


@pytest.mark.parametrize("room", sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()))
def test_every_room_has_a_curated_facade(room):
    init = PACKAGE / room / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{room}/__init__.py says what the room is for"
    names = [t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
             for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
    assert "__all__" in names, f"{room}/__init__.py lists its public names in __all__"


def test_the_room_map_in_readme_matches_the_rule():
    # README › Development draws the rooms; every room the code has is named there.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Development"):]
    missing = [room for room in MAY_IMPORT if room not in ("api", "errors")
               and not re.search(rf"^{room}/ ", section, re.MULTILINE)]
    assert not missing, missing


def test_no_function_is_past_the_complexity_bound():
    from radon.complexity import cc_visit

    worst = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for block in cc_visit(path.read_text(encoding="utf-8")):
            if block.complexity > MAX_COMPLEXITY:
                worst[f"{path.relative_to(ROOT)}:{block.lineno} {block.name}"] = block.complexity
    assert not worst, worst
