"""Which modules are a room's doors, and edges no import statement shows.

- A room's only public-named module is its ``__init__`` (``cli`` keeps
  ``__main__`` for ``python -m``); everything else is ``_name.py`` behind the
  room's ``__all__``. ``analysis`` is held to the same rule by
  ``tests/test_house.py``, with its sub-rooms.
- No module of one room imports a module inside another room (other than
  ``analysis``, which ``tests/test_house.py`` covers), by any import form:
  ``from multiverse.sim._truth import x``, ``from multiverse.sim import _truth``,
  ``import multiverse.sim._truth``, relative ones, at any depth of the file.
- A string naming a multiverse module (``import_module("multiverse.sim")``,
  a lazy facade's table of homes, an f-string) is an edge too: it may go only
  where an import may (``MAY_IMPORT``) and only to a facade.
- A room's ``__init__`` binds no name that is also one of the room's modules
  (importing that module would rebind the name on the package).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_house import MAY_IMPORT, PACKAGE, ROOT, _module_name, _room

COVERED_ELSEWHERE = {"analysis"}  # tests/test_house.py holds analysis and its sub-rooms to these rules
KEPT = {"__init__.py", "__main__.py"}
ROOMS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
MODULE_STRING = re.compile(r"multiverse(\.[A-Za-z_]\w*)+")


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("room", [r for r in ROOMS if r not in COVERED_ELSEWHERE])
def test_a_room_has_no_public_named_module_but_its_init(room):
    public = sorted(str(p.relative_to(ROOT)) for p in (PACKAGE / room).rglob("*.py")
                    if p.name not in KEPT and not any(part.startswith("_") for part in p.relative_to(PACKAGE / room).parts))
    assert not public, f"make these private (_name.py) behind multiverse/{room}/__init__.py: {public}"


def _targets(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every multiverse module ``path`` imports, relative imports resolved, names included:
    ``from multiverse.sim import _truth`` gives ``multiverse.sim._truth``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("multiverse.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                target = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("multiverse"):
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return found


def _inside(target: str) -> str | None:
    """The room whose inside ``target`` names (``multiverse.sim._truth`` -> sim), or None for a facade."""
    parts = target.split(".")
    if len(parts) >= 3 and parts[1] in ROOMS and parts[2].startswith("_") and not parts[2].startswith("__"):
        return parts[1]
    return None


def test_no_room_reaches_past_another_rooms_facade():
    wrong = []
    for path in _python_files():
        own = _room(_module_name(path))
        for line, target in _targets(path):
            room = _inside(target)
            if room is not None and room != own and room not in COVERED_ELSEWHERE:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not wrong, "import the room's facade instead (export the name in its __all__):\n" + "\n".join(wrong)


def _module_strings(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every string of ``path`` that names a multiverse module, docstrings aside; an f-string
    counts by its constant head (``f"multiverse.plots._{name}"`` names the plots room)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    docstrings |= {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            head = str(node.values[0].value)
            if (m := re.match(r"multiverse\.([A-Za-z_]\w*)", head)) and head.startswith(m.group(0)):
                found.append((node.lineno, m.group(0)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if MODULE_STRING.fullmatch(node.value):
                found.append((node.lineno, node.value))
    return sorted(found)


def _room_of_string(target: str) -> str | None:
    parts = target.split(".")
    if parts[1] == "errors" or parts[1] == "_api":
        return "errors" if parts[1] == "errors" else "api"
    return parts[1] if parts[1] in ROOMS else None


def test_no_string_names_a_module_an_import_may_not_reach():
    # importlib.import_module("multiverse.sim") in core is an edge from the ground floor up, which no import
    # statement shows; a lazy facade's homes are edges to what they name.
    wrong = []
    for path in _python_files():
        own = _room(_module_name(path))
        for line, target in _module_strings(path):
            room = _room_of_string(target)
            if room is None or room == own:
                continue
            if room not in MAY_IMPORT[own]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {own} names {target!r}, a room it may not import")
            elif _inside(target) is not None and room not in COVERED_ELSEWHERE:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {target!r} is inside {room}; name its facade")
    assert not wrong, "\n".join(wrong)


def test_the_string_check_sees_the_edges_it_is_for(tmp_path):
    # The check above would pass vacuously if it found no strings: it must see these forms.
    sample = tmp_path / "sample.py"
    sample.write_text('"""multiverse.sim in a docstring is prose."""\n'
                      'import importlib\n'
                      'importlib.import_module("multiverse.sim")\n'
                      'HOMES = {"x": "multiverse.plots._curve"}\n'
                      'name = "curve"\n'
                      'f"multiverse.plots._{name}"\n', encoding="utf-8")
    assert _module_strings(sample) == [(3, "multiverse.sim"), (4, "multiverse.plots._curve"), (6, "multiverse.plots")]


@pytest.mark.parametrize("room", ROOMS)
def test_a_facade_binds_no_name_of_its_rooms_modules(room):
    # reporting's __init__ once defined _sections beside _sections.py: the import of the module rebinds the
    # package's attribute, and which one a caller got depended on import order.
    folder = PACKAGE / room
    modules = {p.stem for p in folder.glob("*.py") if p.name not in KEPT} | {
        p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    bound = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    clash = sorted(bound & modules)
    assert not clash, f"multiverse/{room}/__init__.py binds names of its own modules: {clash}"


def test_the_simulator_loads_only_when_a_spec_names_it():
    # core's registry names no provider; the package root tells it how to load the simulator's checkers.
    code = (
        "import sys\n"
        "from multiverse.core import model_names\n"
        "assert 'multiverse.sim' not in sys.modules\n"
        "assert model_names.check('openai/gpt-x', 'judge') == []\n"
        "assert 'multiverse.sim' not in sys.modules\n"
        "problems = model_names.check('sim/judge-z', 'judge', api_base='deception')\n"
        "assert 'multiverse.sim' in sys.modules\n"
        "assert problems and problems[0][0] == 'model' and 'sim/judge-z' in problems[0][1], problems\n"
        "assert model_names.check_world('no-such-world', __import__('pathlib').Path('.'))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


# Each concept's one home, and the literals no other module may write: the status "ok" (core's OK) and
# the simulator's model prefix "sim/" (core's SIM_PREFIX and is_simulated). A model name such as the spec's
# default "sim/judge-a" is a name, not the prefix, and a column called "ok" or a dict key is no status.
LITERAL_HOMES = {"ok": {"multiverse/core/_vocabulary.py"}, "sim/": {"multiverse/core/_model_names.py"}}
# a simulated tool's own reply ({"status": "ok"}) is the tool's protocol, not the audit's status
LITERAL_ALLOWED = {"ok": {"multiverse/sim/_toolsim.py"}}
# TODO(rooms, issue 46): analysis/ still writes "ok" in rates and scoring; it is being moved into
# sub-rooms on another branch, and joins this check once the move has landed.
LITERAL_PENDING = ("multiverse/analysis/",)


def _literals(path: Path) -> list[tuple[int, str]]:
    """(line, literal) for each status "ok" or prefix "sim/" that ``path`` writes as a literal."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(k) for n in ast.walk(tree) if isinstance(n, ast.Dict) for k in n.keys if k is not None}
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body \
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant):
            skip.add(id(n.body[0].value))
        if isinstance(n, ast.Subscript):  # Literal["ok", ...] types and frame["ok"] columns
            skip |= {id(c) for c in ast.walk(n.slice)}
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.JoinedStr) and n.values and isinstance(n.values[0], ast.Constant) \
                and str(n.values[0].value).startswith("sim/"):
            found.append((n.lineno, "sim/"))
            skip |= {id(c) for c in n.values}
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and id(n) not in skip and n.value in LITERAL_HOMES:
            found.append((n.lineno, n.value))
    return sorted(found)


def test_statuses_and_the_simulator_prefix_are_written_in_one_place():
    wrong = []
    for path in _python_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(LITERAL_PENDING):
            continue
        for line, literal in _literals(path):
            if rel not in LITERAL_HOMES[literal] | LITERAL_ALLOWED.get(literal, set()):
                wrong.append(f"{rel}:{line}: {literal!r}")
    assert not wrong, "use core's OK, SIM_PREFIX or is_simulated:\n" + "\n".join(wrong)


def test_the_literal_check_sees_what_it_is_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""ok"""\n'
                      'from typing import Literal\n'
                      'S = Literal["ok", "excluded"]\n'
                      'record = {"ok": 1, "status": "ok"}\n'
                      'frame = {}\n'
                      'frame["ok"]\n'
                      'def f(model, name):\n'
                      '    return model.startswith("sim/"), f"sim/{name}", "sim/judge-a"\n', encoding="utf-8")
    assert _literals(sample) == [(4, "ok"), (8, "sim/"), (8, "sim/")]
