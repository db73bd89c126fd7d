"""Reading spec, rubric and cases files: safe YAML that remembers the line of every key.

Loading is safe: YAML tags that would build Python objects are rejected, and
an alias bomb is refused before it is expanded. Every mapping key and
sequence item gets its line, so a problem found later names where it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import yaml

from multiverse.core import read_regular_file
from multiverse.errors import SpecError

__all__ = ["MAX_NODES", "load_yaml", "parse_yaml"]


class _Loader(yaml.SafeLoader):
    """SafeLoader that records the line of every mapping key and sequence item."""


def load_yaml(path: Path) -> tuple[Any, dict[str, int]]:
    """Parse a YAML file safely. Returns the document and ``{yaml.path: line}``."""
    path = Path(path)
    raw = read_regular_file(path, lambda expected: SpecError(path, "", expected), what="YAML file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(path, "", f"expected UTF-8 text, found byte 0x{raw[exc.start]:02x} at offset {exc.start}") from None
    return parse_yaml(text, path)


def parse_yaml(text: str, path: Path) -> tuple[Any, dict[str, int]]:
    """Parse YAML ``text`` read from ``path`` (named in errors) as :func:`load_yaml` does."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SpecError(path, "", "file is empty; expected a YAML mapping")
        cycle = _recursive_alias(node)
        if cycle is not None:
            raise SpecError(path, f"(line {cycle})", "an alias used inside its own anchor (a recursive structure); "
                            "expected plain YAML whose aliases each refer to a finished value")
        size = _expanded_size(node, {})
        if size > MAX_NODES:
            raise SpecError(path, "", f"expands to {size} values once aliases are resolved; expected at most {MAX_NODES}")
        lines: dict[str, int] = {}
        _record_lines(path, node, "", lines, set())
        document = loader.construct_document(node)
    except yaml.constructor.ConstructorError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        problem = str(exc.problem)
        if "constructor" in problem:
            tag = problem.split("'")[1] if "'" in problem else problem
            expected = f"the tag {tag} is not allowed; specs are plain YAML (no Python objects)"
        else:
            expected = f"expected plain string keys ({problem})"
        raise SpecError(path, f"(line {line})", expected) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"(line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(path, where, f"invalid YAML: {problem}") from None
    except RecursionError:
        raise SpecError(path, "", "nesting too deep; expected a spec a few levels deep") from None
    finally:
        loader.dispose()
    return document, lines


MAX_NODES = 200_000


def _recursive_alias(root: yaml.Node) -> int | None:
    """The line of an alias that refers to a node holding it (``a: &x [*x]``), or None.

    PyYAML builds such a document as a list that contains itself, which every
    later walk (normal form, checks, models) would follow without end. The walk
    here keeps its own stack, so a document nested deeply is no risk to it either.
    """
    on_path: set[int] = set()
    done: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            done.add(id(node))
            continue
        if id(node) in done:
            continue
        if id(node) in on_path:
            return cast("int | None", node.start_mark.line + 1)
        on_path.add(id(node))
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        for child in reversed(children):
            if id(child) in on_path:
                return cast("int | None", child.start_mark.line + 1)
            stack.append((child, False))
    return None


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values the document holds once aliases are expanded (an alias bomb is huge)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = 1  # a recursive alias counts once
    if isinstance(node, yaml.MappingNode):
        total = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_expanded_size(v, memo) for v in node.value)
    else:
        total = 1
    memo[id(node)] = min(total, 10 * MAX_NODES)
    return memo[id(node)]


def _record_lines(file: Path, node: yaml.Node, path: str, lines: dict[str, int], seen: set[int]) -> None:
    # Each node once: an aliased node keeps the line of its first appearance.
    if id(node) in seen:
        return
    seen.add(id(node))
    prefix = f"{path}." if path else ""
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in first and key.value != "<<":
                    raise SpecError(file, f"{prefix}{key.value} (line {line})", f"duplicate key (first at line {first[key.value]}); expected each key once")
                first[key.value] = line
                child = f"{prefix}{key.value}"
                lines[child] = line
                _record_lines(file, value, child, lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, value in enumerate(node.value):
            child = f"{prefix}{i}"
            lines[child] = value.start_mark.line + 1
            _record_lines(file, value, child, lines, seen)
