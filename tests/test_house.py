"""The package's rooms and the direction of its imports (README › Development draws the same map).

Every import counts: at module top, inside a function and under
``TYPE_CHECKING``. A room imports only the rooms listed under it in
``MAY_IMPORT``; no module imports itself back through others; no module
reaches past another room's facade (every package is a room, analysis's
sub-rooms included), by a statement or by a string that names a module.
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
    # The Development page (docs/development.md) draws the rooms; every room the code has is named there.
    text = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    section = text[text.index("# Development"):]
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


# -- Facades: no module reaches past another room's ``__init__`` --------------------------------------------
#
# Every package of multiverse is a room, analysis's sub-rooms (multiverse.analysis.rates, ...) included: a
# module outside a room imports the room's facade, never a module inside it, by any form: ``import a.b.c``,
# ``from a.b import c``, ``from a.b.c import x``, relative, inside a function, under TYPE_CHECKING, or by a
# string that names the module (``importlib.import_module("...")``, ``__import__``, a lazy facade's homes).
# Tests are not held to it: a test may import the private helper it tests (README › Development).
IMPORTERS = {"import_module", "__import__", "find_spec", "load_module", "run_module", "reload"}

# Reaching past a facade, outside analysis: none is left (issue 46 made every room's modules private and
# sent their imports through the doors). A line added here must say why; the list can only shrink:
# test_the_facade_allowances_are_still_needed fails on a line that no longer reaches past a facade.
PAST_THE_FACADE_ALLOWED: set[str] = set()
# Imports by a name built at run time (not a literal): a lazy facade's loader and the model registry.
DYNAMIC_IMPORTS_ALLOWED = {
    "multiverse/core/_lazy.py import_module(home)",
    # httpx's own package, found from the openai client's class: not a module of multiverse.
    "multiverse/model/_connections.py import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split('.')[0])",
}


def _rooms() -> list[str]:
    return sorted(".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py"))


ROOMS = _rooms()


def _home_room(module: str) -> str:
    """The room a module lives in: its package (a package's facade is its own room's door)."""
    return module if module in ROOMS else module.rpartition(".")[0]


def _named_modules(path: Path) -> tuple[set[str], list[str]]:
    """Modules of multiverse a file names by string, and its import calls whose name is built at run time."""
    return _named_in(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))


def _named_in(text: str, where: str) -> tuple[set[str], list[str]]:
    named: set[str] = set()
    dynamic: list[str] = []
    tree = ast.parse(text)
    # an importer under another name (``from importlib import import_module as load``) is still one
    importers = IMPORTERS | {a.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                             for a in node.names if a.name in IMPORTERS and a.asname}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"multiverse(\.\w+)+",
                                                                                             node.value):
            if _is_module(node.value):
                named.add(node.value)
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and (
                    node.args[1].value in IMPORTERS):
                dynamic.append(f"{where} getattr(..., {node.args[1].value!r})")  # an importer fetched by name
            elif called in importers and node.args and not (isinstance(node.args[0], ast.Constant)):
                dynamic.append(f"{where} {called}({ast.unparse(node.args[0])})")
    return named, dynamic


STRINGS = {_module_name(p): _named_modules(p) for p in sorted(PACKAGE.rglob("*.py"))}


def _reaches_past(module: str, target: str) -> bool:
    """Whether ``module`` importing (or naming) ``target`` goes past the facade of ``target``'s room."""
    room = _home_room(target)
    if target == room or module == room or module.startswith(room + "."):
        return False  # a facade, or a module of the same room
    return room != "multiverse"  # the flat modules (errors, _api) have no facade but themselves


def _past_the_facade() -> set[str]:
    return {f"{module} {how} {target}" for module in GRAPH
            for target, how in [*((t, "imports") for t in GRAPH[module]), *((t, "names") for t in STRINGS[module][0])]
            if _reaches_past(module, target)}


PAST = _past_the_facade()


def test_no_module_reaches_past_another_rooms_facade():
    new = sorted(PAST - PAST_THE_FACADE_ALLOWED)
    assert not new, "import the room's facade (add the name to its __all__):\n" + "\n".join(new)


def test_the_facade_allowances_are_still_needed():
    fixed = sorted(PAST_THE_FACADE_ALLOWED - PAST)
    assert not fixed, "no longer reaches past a facade: take it off PAST_THE_FACADE_ALLOWED:\n" + "\n".join(fixed)


def test_no_room_imports_by_a_name_built_at_run_time():
    found = {d for _, dynamic in STRINGS.values() for d in dynamic}
    assert found == DYNAMIC_IMPORTS_ALLOWED, (sorted(found - DYNAMIC_IMPORTS_ALLOWED),
                                              sorted(DYNAMIC_IMPORTS_ALLOWED - found))


# The forms a module can be reached by without an import statement, each as the check must see it: a module
# named by a string (-> named) or an import whose name is only known at run time (-> dynamic).
STRING_FORMS = [
    ('import importlib\nimportlib.import_module("multiverse.results._documents")', "named"),
    ('import sys\nsys.modules["multiverse.gate._diff"]', "named"),
    ('LAZY = {"Diff": "multiverse.gate._diff"}', "named"),  # a lazy facade's home, imported later
    ('from importlib import import_module as load\nload(f"multiverse.{room}._x")', "dynamic"),
    ('__import__("multiverse." + "plots._diff")', "dynamic"),
    ('import importlib\ngetattr(importlib, "import_module")(name)', "dynamic"),
    ('import importlib.util\nimportlib.util.find_spec(name)', "dynamic"),
    ('import runpy\nrunpy.run_module(name)', "dynamic"),
]


@pytest.mark.parametrize(("code", "seen"), STRING_FORMS)
def test_a_module_reached_without_an_import_statement_is_seen(code, seen):
    named, dynamic = _named_in(code, "x.py")
    assert (bool(named), bool(dynamic)) == (seen == "named", seen == "dynamic"), (named, dynamic)
    # and a named private module of another room is past its facade, as an import of it would be
    assert all(_reaches_past("multiverse.reporting._run", m) for m in named)


def test_reaching_past_a_facade_is_told_from_using_it():
    assert _reaches_past("multiverse.gate._diff", "multiverse.results._documents")
    assert _reaches_past("multiverse.results._analyses", "multiverse.analysis.rates._rates")  # a sub-room too
    assert _reaches_past("multiverse.analysis.curve._curve", "multiverse.analysis.inference._joint")
    assert not _reaches_past("multiverse.gate._diff", "multiverse.results")
    assert not _reaches_past("multiverse.gate._diff", "multiverse.gate._decide")  # its own room
    assert not _reaches_past("multiverse.cli._gate", "multiverse.errors")


def _lazy_homes(package: str) -> dict[str, str]:
    """The names a lazy facade imports on first use and their homes, as its ``__getattr__`` holds them."""
    import importlib
    import inspect

    getter = getattr(importlib.import_module(package), "__getattr__", None)
    if getter is None:
        return {}
    return dict(inspect.getclosurevars(getter).nonlocals.get("homes", {}))


LAZY = {room: homes for room in ROOMS if (homes := _lazy_homes(room))}


def test_the_lazy_facades_are_found():
    # the homes are built at run time (f-strings, dict comprehensions): the check reads them from the facade
    assert {"multiverse", "multiverse.core", "multiverse.engine", "multiverse.plots"} <= set(LAZY)


def test_a_lazy_facade_loads_its_own_modules_or_the_doors_of_rooms_below():
    wrong = []
    for package, homes in LAZY.items():
        for name, home in sorted(homes.items()):
            if not _is_module(home):
                wrong.append(f"{package}.{name}: {home} is no module")
            elif _reaches_past(package, home):
                wrong.append(f"{package}.{name}: {home} is past its room's facade")
            elif _room(home) != _room(package) and _room(home) not in MAY_IMPORT[_room(package)]:
                wrong.append(f"{package}.{name}: {home} is a room {_room(package)} may not import")
    assert not wrong, wrong


# A room's doors are its __init__ (and a package's __main__, what ``python -m`` runs); every other module is
# private (``_name.py``). errors.py is the one flat public module: the exceptions are a room of one module.
PUBLIC_MODULES_ALLOWED = {"multiverse/errors.py"}


def test_every_module_of_a_room_is_private():
    public = sorted(p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")
                    if not p.name.startswith("_") and p.relative_to(ROOT).as_posix() not in PUBLIC_MODULES_ALLOWED)
    assert not public, f"name these _module.py (import them through the room's __init__): {public}"
    # every folder of code is a room with a facade (a folder of data, explorer/static or sim/worlds, has no .py)
    loose = sorted(d.relative_to(ROOT).as_posix() for d in PACKAGE.rglob("*") if d.is_dir()
                   and any(d.glob("*.py")) and not (d / "__init__.py").is_file())
    assert not loose, loose


def test_a_module_named_by_string_is_an_import_of_the_rooms_below():
    # The room rule, for the imports no statement shows (a string a loader imports later).
    wrong = sorted(f"{module} names {target}" for module, (named, _) in STRINGS.items() for target in named
                   if _room(target) != _room(module) and _room(target) not in MAY_IMPORT[_room(module)]
                   and f"{module} names {target}" not in STRING_ROOMS_ALLOWED)
    assert not wrong, wrong
    stale = sorted(STRING_ROOMS_ALLOWED - {f"{m} names {t}" for m, (named, _) in STRINGS.items() for t in named})
    assert not stale, f"take these off STRING_ROOMS_ALLOWED: {stale}"


# None left: the simulator registers its name checkers with core (issue 46), so core names no room above it.
STRING_ROOMS_ALLOWED: set[str] = set()


# -- analysis's sub-rooms, bottom up --------------------------------------------------------------------------
# Each sub-room imports only those listed under it, through their facades; analysis/__init__.py and
# analysis/_power.py (the room itself) see every sub-room, and no sub-room imports them back.
ANALYSIS_MAY_IMPORT: dict[str, set[str]] = {
    "_kernel": set(),
    "cases": {"_kernel"},
    "rates": {"_kernel"},
    "inference": {"_kernel", "cases"},
    "curve": {"_kernel", "cases", "inference"},
    "agreement": {"_kernel"},
    "ranking": {"_kernel", "rates"},
    "variance": {"_kernel", "rates"},
    "anchoring": {"_kernel"},
}


def _sub_room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["multiverse", "analysis"]:
        return None
    return parts[2] if len(parts) > 2 and (PACKAGE / "analysis" / parts[2]).is_dir() else ""


def test_analysis_sub_rooms_are_the_ones_listed():
    found = {p.parent.name for p in (PACKAGE / "analysis").glob("*/__init__.py")}
    assert found == set(ANALYSIS_MAY_IMPORT)


def test_analysis_sub_rooms_import_only_the_ones_below():
    wrong = set()
    for module, imported in GRAPH.items():
        me = _sub_room(module)
        if not me:
            continue
        for target in imported | STRINGS[module][0]:
            other = _sub_room(target)
            if other is not None and other != me and other not in ANALYSIS_MAY_IMPORT[me]:
                wrong.add(f"{module} imports {target}" + (" (the room above it)" if other == "" else ""))
    assert not wrong, sorted(wrong)


def test_every_module_a_test_names_by_string_exists():
    # monkeypatch and import_module targets: a module moved under a test's string fails here, by name.
    from importlib import import_module

    missing = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"multiverse(\.\w+)+",
                                                                                                 node.value):
                if not _is_module(".".join(node.value.split(".")[:2])):
                    continue  # a file name (multiverse.schema.json), not a room
                module, attrs = node.value, []
                while module and not _is_module(module):
                    module, _, attr = module.rpartition(".")
                    attrs.insert(0, attr)
                try:
                    value = import_module(module) if module else None
                    for attr in attrs:
                        value = getattr(value, attr)
                except (ImportError, AttributeError):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value}")
    assert not missing, missing


def test_scripts_and_the_docs_build_go_through_facades_too():
    # analyses/ and docs/ are the package's first users: they import what a user may, the facades.
    scripts = [p for folder in ("analyses", "docs", "specs") for p in sorted((ROOT / folder).rglob("*.py"))]
    assert len(scripts) >= 5, scripts
    past = sorted(f"{p.relative_to(ROOT)} {how} {target}" for p in scripts
                  for how, targets in (("imports", _imports(p)), ("names", _named_modules(p)[0]))
                  for target in targets if _is_module(target) and _reaches_past(_module_name(p), target))
    assert not past, past
