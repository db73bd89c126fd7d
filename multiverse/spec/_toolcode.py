"""Code a spec may name: a Python function that answers a tool call.

``rollout.tool_simulator.functions`` maps a tool name to ``"file.py:function"``.
A spec is data that others write and share, so it may name only code its
author put beside it:

- ``file.py`` is a path relative to the spec's folder, inside it (no ``..``,
  no absolute path, no symbolic link on the way), to a regular ``.py`` file;
- ``function`` is a public name (no leading ``_``, no dots) bound at the top
  level of that file by a ``def`` and by nothing else.

Never a module name: ``os:system``, ``subprocess:getoutput`` or
``builtins:eval`` have no file beside the spec and are refused. Checking a
reference (:func:`check_reference`, used by ``validate``) reads the file's
syntax tree and runs none of it. Loading (:func:`load_function`, at the first
tool call of a rollout) executes the file with
``importlib.util.spec_from_file_location`` under a private module name, never
``import_module``, and checks again that the object found is a function
whose code lives in that file.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import os
import re
import stat
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from multiverse.core import read_regular_file

__all__ = ["MAX_TOOL_FILE_BYTES", "ToolCodeError", "check_reference", "load_function", "resolve_references"]

MAX_TOOL_FILE_BYTES = 1024 * 1024
_REFERENCE = re.compile(r"(?P<file>[^:\\\x00-\x1f]+\.py):(?P<name>[A-Za-z][A-Za-z0-9_]*)")
_FORM = "expected 'file.py:function' naming a function defined in a Python file beside the spec or in a folder under it"


class ToolCodeError(Exception):
    """A tool reference that cannot be loaded (the file changed since validation)."""


def _file_of(reference: Any, base_dir: Path) -> tuple[Path, str]:
    """The checked file and function name of ``reference``; ValueError saying what is wrong."""
    match = _REFERENCE.fullmatch(reference) if isinstance(reference, str) else None
    if match is None:
        raise ValueError(f"{_FORM}, got {reference!r}")
    relative, name = match.group("file"), match.group("name")
    parts = relative.split("/")
    if relative.startswith("/") or ".." in parts or "" in parts:
        raise ValueError(f"{_FORM}; {relative!r} leaves the spec's folder")
    base = Path(base_dir).resolve()
    current = base
    for part in (p for p in parts if p not in ("", ".")):
        current = current / part
        try:
            info = os.lstat(current)
        except OSError:
            raise ValueError(f"{_FORM}; {relative!r} is not found beside the spec") from None
        if stat.S_ISLNK(info.st_mode):
            raise ValueError(f"{_FORM}; {relative!r} passes through a symbolic link")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{_FORM}; {relative!r} is not a regular file")
    if info.st_size > MAX_TOOL_FILE_BYTES:
        raise ValueError(f"{_FORM}; {relative!r} is over {MAX_TOOL_FILE_BYTES // 1024} KB")
    if base not in current.resolve().parents:
        raise ValueError(f"{_FORM}; {relative!r} leaves the spec's folder")
    return current, name


def _bindings(tree: ast.Module, name: str) -> list[ast.AST]:
    """Top-level statements that bind ``name`` (def, class, assignment, import, ...)."""
    found: list[ast.AST] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name:  # another def's body binds its own locals, not the module's
                found.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name.split(".")[0]) == name for alias in node.names):
                found.append(node)
        elif any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, (ast.Store, ast.Del))
                 for n in ast.walk(node)):
            found.append(node)  # assignments, for/with/walrus targets, deletions, even when nested in if/try
    return found


def check_reference(reference: Any, base_dir: str | os.PathLike[str]) -> str | None:
    """What is wrong with a tool reference (one clause, ``expected ...``), or None. Runs no code."""
    try:
        path, name = _file_of(reference, Path(base_dir))
        # Bounded and without blocking, as every file a spec names is read (multiverse.spec._bounds).
        source = read_regular_file(path, lambda expected: OSError(expected), limit=MAX_TOOL_FILE_BYTES)
    except ValueError as problem:
        return str(problem)
    except OSError as exc:
        return f"{_FORM}; {reference!r} cannot be read ({exc.strerror or exc})"
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return f"{_FORM}; {path.name} is not valid Python" + (f" (line {line})" if line else "")
    bindings = _bindings(tree, name)
    if not bindings:
        return f"{_FORM}; {path.name} defines no function {name!r}"
    if len(bindings) > 1 or not isinstance(bindings[0], ast.FunctionDef):
        return f"{_FORM}; {name!r} in {path.name} must be bound once, by a plain def"
    return None


def resolve_references(functions: Mapping[str, str], base_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``{tool: "/abs/file.py:function"}`` for checked references (what a rollout loads)."""
    out = {}
    for tool, reference in functions.items():
        try:
            path, name = _file_of(reference, Path(base_dir))
        except ValueError:
            out[tool] = reference  # load_function refuses it again, at the call
            continue
        out[tool] = f"{path}:{name}"
    return out


_lock = threading.Lock()
_modules: dict[tuple[str, int, int], Any] = {}


def load_function(resolved: str) -> Callable[..., Any]:
    """The function a resolved reference (``/abs/file.py:function``) names.

    Raises ``ToolCodeError`` if the file is gone, changed into something else
    or does not define that function.
    """
    file, _, name = resolved.rpartition(":")
    path = Path(file)
    problem = check_reference(f"{path.name}:{name}", path.parent) if path.is_absolute() else _FORM
    if problem is not None:
        raise ToolCodeError(f"tool function {resolved!r}: {problem}")
    info = path.stat()
    key = (str(path), info.st_mtime_ns, info.st_size)
    with _lock:
        module = _modules.get(key)
        if module is None:
            digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
            spec = importlib.util.spec_from_file_location(f"_multiverse_tools_{digest}", path)
            if spec is None or spec.loader is None:
                raise ToolCodeError(f"tool function {resolved!r}: cannot be loaded")
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # the user's file failing to import is their bug, reported as such
                raise ToolCodeError(f"tool function {resolved!r}: loading {path.name} raised {type(exc).__name__}: {exc}") from None
            _modules[key] = module
    function = getattr(module, name, None)
    if not inspect.isfunction(function) or not _same_file(function.__code__.co_filename, path):
        raise ToolCodeError(f"tool function {resolved!r}: {path.name} does not define {name!r} as a function of its own")
    return function


def _same_file(a: str, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
