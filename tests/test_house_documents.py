"""No code reads an analysis's document by string key: readers take the typed model's attributes.

An analysis function returns a dict, written whole by the analysis room (narrowed to the axes asked for,
with the notes and the reference system its caller knows); ``results`` validates it into its model
(``Analysis.document``, ``Diff.tests``, ...), and every reader past that point (results' own chains that
make an analysis's frame and figure, the report, the gate, the explorer, plots, the command line, the
scripts in analyses/) reads attributes, so a renamed key fails at the type check and not at a user's
terminal. The dict form is kept for one use, the JSON printed (``Analysis.to_dict``, ``Analysis.source``
for a grouped ``--json``, ``model_dump``).

The check follows a document through a module, not just one expression:
``x.source``, ``x.test_documents``, ``x.to_dict()`` and ``x.model_dump()`` are documents, and so is what an
analysis function that returns a dict gives back (``curve_summary(...)``, ``mv.analysis.variance(...)``);
so is every name assigned from one, every part read out of one, every loop variable over one, what a
function of the same module returns from one (``return result.source, figure``), and a parameter that a
function of the same module is called with one in. Reading one of those by a string key (``[...]``,
``.get``, ``.setdefault``, ``.pop``) is what the house forbids. Writing a key (``doc["k"] = v``) is how a
document is built, not read, and is left alone.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

DOC_ATTRS = {"source", "test_documents"}
DOC_METHODS = {"to_dict", "model_dump"}
READS = {"get", "setdefault", "pop"}


def _producers() -> set[str]:
    """The analysis room's public functions that return a document as a dict."""
    import multiverse.analysis as analysis

    found = set()
    for name in analysis.__all__:
        obj = getattr(analysis, name)
        if inspect.isfunction(obj):
            returned = inspect.signature(obj).return_annotation
            if isinstance(returned, str) and returned.replace(" ", "").startswith("dict[str,"):
                found.add(name)
    return found


PRODUCERS = _producers()


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope`` but not of the functions defined in it (each function is a scope of its own)."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(ast.iter_child_nodes(node))
    return found


class _Flow:
    """What holds a document in one module, found by iterating to a fixed point."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.producers = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                          and node.module == "multiverse.analysis" for alias in node.names
                          if alias.name in PRODUCERS}
        self.functions = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.returns: dict[str, set[int | None]] = {}  # function -> positions of its returned tuple that are documents
        self.names: dict[ast.AST, set[str]] = {}  # scope -> names holding a document
        self.params: dict[str, set[str]] = {}  # function -> parameters a caller passes a document in

    def is_doc(self, node: ast.AST | None, held: set[str]) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in DOC_ATTRS:
            return True
        if isinstance(node, ast.Name):
            return node.id in held
        if isinstance(node, ast.Subscript):  # a part of a document is a document
            return self.is_doc(node.value, held)
        if isinstance(node, ast.Dict):  # {**document, "k": v}: a document with keys added
            return any(k is None and self.is_doc(v, held) for k, v in zip(node.keys, node.values))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                if func.attr in DOC_METHODS and not node.args and not any(k.arg == "orient" for k in node.keywords):
                    return True
                if func.attr in PRODUCERS and ast.unparse(func.value).endswith("analysis"):
                    return True  # mv.analysis.variance(...)
                if func.attr in READS and node.args:
                    return self.is_doc(func.value, held)
            if isinstance(func, ast.Name):
                return func.id in self.producers or None in self.returns.get(func.id, ())
        return False

    def _doc_positions(self, node: ast.expr, held: set[str]) -> set[int | None]:
        if self.is_doc(node, held):
            return {None}
        if isinstance(node, ast.Tuple):
            return {i for i, e in enumerate(node.elts) if self.is_doc(e, held)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return set(self.returns.get(node.func.id, ()))
        return set()

    def _bind(self, target: ast.expr, value: ast.expr, held: set[str]) -> bool:
        positions = self._doc_positions(value, held)
        grew = False
        if isinstance(target, ast.Name) and None in positions and target.id not in held:
            held.add(target.id)
            grew = True
        elif isinstance(target, ast.Tuple):
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Name) and (i in positions or None in positions) and element.id not in held:
                    held.add(element.id)
                    grew = True
        return grew

    def solve(self) -> None:
        scopes: list[ast.AST] = [self.tree, *self.functions.values()]
        changed = True
        while changed:
            changed = False
            for scope in scopes:
                held = self.names.setdefault(scope, set())
                if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    changed |= not self.params.get(scope.name, set()) <= held
                    held |= self.params.get(scope.name, set())
                for node in _own_nodes(scope):
                    if isinstance(node, ast.Assign):
                        for target in node.targets:
                            changed |= self._bind(target, node.value, held)
                    elif isinstance(node, ast.AnnAssign) and node.value is not None:
                        changed |= self._bind(node.target, node.value, held)
                    elif isinstance(node, (ast.For, ast.comprehension)) and self.is_doc(node.iter, held):
                        loop = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
                        changed |= not loop <= held
                        held |= loop
                    elif isinstance(node, ast.Return) and node.value is not None and isinstance(
                            scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        positions = self._doc_positions(node.value, held)
                        known = self.returns.setdefault(scope.name, set())
                        changed |= not positions <= known
                        known |= positions
                    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions:
                        called = self.functions[node.func.id]
                        names = [a.arg for a in called.args.posonlyargs + called.args.args]
                        passed = {names[i] for i, arg in enumerate(node.args) if i < len(names)
                                  and self.is_doc(arg, held)}
                        passed |= {k.arg for k in node.keywords if k.arg and self.is_doc(k.value, held)}
                        known = self.params.setdefault(called.name, set())
                        changed |= not passed <= known
                        known |= passed

    def reads(self) -> list[tuple[int, str]]:
        """Every read of a document by a string key: (line, the expression)."""
        self.solve()
        found = []
        for scope, held in self.names.items():
            for node in _own_nodes(scope):
                if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
                        and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
                        and self.is_doc(node.value, held)):
                    found.append((node.lineno, ast.unparse(node)))
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr in READS and node.args and isinstance(node.args[0], ast.Constant)
                      and isinstance(node.args[0].value, str) and self.is_doc(node.func.value, held)):
                    found.append((node.lineno, ast.unparse(node)))
        return sorted(set(found))


def string_key_reads(text: str) -> list[tuple[int, str]]:
    return _Flow(ast.parse(text)).reads()


def _checked_files() -> list[Path]:
    files = [*(ROOT / "multiverse").rglob("*.py"), *(ROOT / "analyses").rglob("*.py"), *(ROOT / "examples").rglob("*.py")]
    return sorted(p for p in files if "multiverse/analysis/" not in p.relative_to(ROOT).as_posix())


READS_FOUND = {p.relative_to(ROOT).as_posix(): reads for p in _checked_files()
               if (reads := string_key_reads(p.read_text(encoding="utf-8")))}


def test_no_code_reads_a_document_by_string_key():
    wrong = sorted(f"{path}:{line} {expr}" for path, reads in READS_FOUND.items() for line, expr in reads)
    assert not wrong, "read the typed model (Analysis.document, Diff.tests) by attribute:\n" + "\n".join(wrong)


def test_analysis_functions_returning_documents_are_found():
    # The check is blind to an analysis's document if it cannot tell which functions return one.
    assert {"curve_summary", "agreement", "ranking", "variance", "design_power"} <= PRODUCERS


# -- the check against the forms it must catch, and those it must leave alone ---------------------------------------

CAUGHT = [
    # the forms the case-study script and plot_diff used before their documents were typed
    ('def f(r):\n    return r.source["systems"]\n', "r.source['systems']"),
    ('def f(d):\n    return [t["kind"] for t in d.to_dict()["tests"]]\n', "d.to_dict()['tests']"),
    ('def a(t):\n    result = t.curve()\n    return result.source, 1\n'
     'def b(t):\n    curves, fig = a(t)\n    return curves["tests"]\n', "curves['tests']"),
    ('def a(t):\n    return t.agreement("judge").source\n'
     'def b(t):\n    judged = a(t)\n    return [p["bias"] for p in judged["pairs"]]\n', "p['bias']"),
    ('def q(curves):\n    return [t["statistics"] for t in curves["tests"]]\n'
     'def main(r):\n    return q(r.curve().source)\n', "t['statistics']"),
    ('def plot(diff):\n    for t in diff.test_documents:\n        if t.get("worse"):\n            yield t\n',
     "t.get('worse')"),
    ('from multiverse.analysis import curve_summary\n'
     'def f(frame):\n    summary = curve_summary(frame, tests=[])\n    return summary.get("notes", [])\n',
     "summary.get('notes', [])"),
    ('import multiverse as mv\n'
     'def f(v):\n    doc = mv.analysis.variance(v, axes=[])\n    tau = doc["by_axis"]\n    return tau\n',
     "doc['by_axis']"),
    ('def f(c):\n    doc = {"alpha": 1, **c.source}\n    return doc["universes"]\n', "doc['universes']"),
    ('def f(a):\n    terms = a.model_dump()["terms"]\n    return [t["share"] for t in terms]\n', "t['share']"),
    # the forms results' chains used to narrow a document and add to it before it became the typed Analysis
    ('from multiverse.analysis import variance as compute\n'
     'def f(v, axes):\n    document = compute(v, axes=[])\n'
     '    document["by_axis"] = [r for r in document["by_axis"] if r["axis"] in axes]\n', "r['axis']"),
    ('from multiverse.analysis import ranking as compute\n'
     'def f(v):\n    document = compute(v, axes=[])\n    document["notes"].append("x")\n', "document['notes']"),
    ('def f(self):\n    self.source.setdefault("rate_direction", "compliance")\n',
     "self.source.setdefault('rate_direction', 'compliance')"),
]
LEFT_ALONE = [
    'def f(results):\n    return results.source.name\n',  # Results.source is the run's folder
    'def f(frame):\n    return frame.to_dict(orient="records")[0]\n',  # a frame's rows
    'def f(a):\n    return a.document.systems["atlas"].rate.min\n',  # a mapping the model declares
    'def f(a):\n    doc = a.to_dict()\n    doc["extra"] = 1\n    return doc\n',  # a write: building, not reading
    'def f(spec):\n    document = {"k": 1}\n    return document["k"]\n',  # a dict of one's own, not a document
]


@pytest.mark.parametrize(("code", "read"), CAUGHT)
def test_the_check_catches_a_read_by_string_key(code, read):
    # (ast.unparse writes every string in single quotes)
    assert read in [expr for _, expr in string_key_reads(code)], string_key_reads(code)


@pytest.mark.parametrize("code", LEFT_ALONE)
def test_the_check_leaves_other_reads_alone(code):
    assert string_key_reads(code) == []
