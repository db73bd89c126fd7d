"""Reference pages made from the code at each build, so they cannot drift from it.

On ``builder-inited`` this writes, under ``docs/_generated/`` (not tracked; the tracked pages include it):

- ``cli.md``: every command's ``--help``, walked down the argparse parser the CLI itself builds;
- ``spec.md``: every field of the spec, from the JSON Schema that ``multiverse schema`` prints;
- ``run-folder.md``: the fields of the run folder's typed documents (the manifest and its parts), from their
  pydantic models;
- ``performance.md``: the benchmark figures recorded in ``docs/bench/*.json`` (each with its command, date and
  machine; ``docs/bench/record.py`` writes them), never copied by hand.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[1]
OUT = DOCS / "_generated"


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _fence(text: str) -> str:
    return "````text\n" + text.rstrip() + "\n````\n"


# --------------------------------------------------------------------------- the CLI


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))


def cli_page() -> str:
    from multiverse.cli import build_parser

    # argparse wraps help at the terminal's width: one width for every build, that of the page's code blocks
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        parser = build_parser()
        parser.prog = "multiverse"
        out = []
        for path, command in _commands(parser):
            title = " ".join(("multiverse", *path))
            level = "#" * min(2 + len(path), 4) if path else "##"
            out += [f"{level} `{title}`", "", _fence(command.format_help())]
    finally:
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return "\n".join(out)


# --------------------------------------------------------------------------- the spec


def _type(node: dict, defs: dict) -> str:
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if "anyOf" in node:
        return " or ".join(_type(n, defs) for n in node["anyOf"])
    if "enum" in node:
        return " / ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    kind = node.get("type", "any")
    if kind == "array" and "items" in node:
        return f"list of {_type(node['items'], defs)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map to {_type(node['additionalProperties'], defs)}"
    return str(kind)


def _target(node: dict, defs: dict) -> dict | None:
    """The object schema a field leads to (through a $ref, an optional or a list), if any."""
    for candidate in (node, *node.get("anyOf", []), node.get("items", {}), node.get("additionalProperties") or {}):
        if not isinstance(candidate, dict):
            continue
        if "$ref" in candidate:
            return defs[candidate["$ref"].rsplit("/", 1)[-1]]
        if candidate.get("properties"):
            return candidate
    return None


def _rows(schema: dict, defs: dict, prefix: str, seen: frozenset[str], out: list[str]) -> None:
    for name, node in schema.get("properties", {}).items():
        field = f"{prefix}{name}"
        limits = ", ".join(f"{k} {node[k]}" for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
                           if k in node)
        default = json.dumps(node["default"]) if "default" in node else ""
        out.append(f"| `{field}` | {_cell(_type(node, defs))} | {_cell(default)} | "
                   f"{_cell(node.get('description', ''))}{' (' + limits + ')' if limits else ''} |")
        target = _target(node, defs)
        key = json.dumps(target, sort_keys=True) if target else ""
        if target and key not in seen:
            joint = "[]." if node.get("type") == "array" or "items" in node else "."
            _rows(target, defs, field + joint, seen | {key}, out)


def spec_page() -> str:
    from multiverse.spec import spec_schema

    schema = spec_schema()
    defs = schema.get("$defs", {})
    out = [f"Made from `multiverse.spec.spec_schema()` ({schema.get('$schema', '')}). A field marked `map to X` is "
           "keyed by names you choose; `a[].b` is field `b` of each item of the list `a`.", "",
           "| field | type | default | what it is |", "|---|---|---|---|"]
    _rows(schema, defs, "", frozenset(), out)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- the run folder


def run_folder_page() -> str:
    from multiverse import tables

    out = []
    for name in ("Manifest", "UniverseEntry", "StageCounts", "ScoringChoice", "ScaleRecord", "ImportLoss",
                 "DroppedRecord"):
        model = getattr(tables, name)
        doc = " ".join((model.__doc__ or "").split())
        out += [f"### `{name}`", "", doc, "", "| field | type | default |", "|---|---|---|"]
        for field, info in model.model_fields.items():
            annotation = getattr(info.annotation, "__name__", None) or str(info.annotation)
            default = "required" if info.is_required() else repr(info.get_default(call_default_factory=True))
            out.append(f"| `{info.alias or field}` | {_cell(annotation.replace('typing.', ''))} | {_cell(default)} |")
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- performance


def _flat(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [row for key, item in value.items() for row in _flat(item, f"{prefix}.{key}" if prefix else str(key))]
    return [(prefix, value)]


def _shown(value: Any) -> str:
    return _cell(value if isinstance(value, str) else json.dumps(value))


def _rows_table(rows: list[dict]) -> list[str]:
    """A list of records (a benchmark's cells) as one table, a column per field."""
    flat = [dict(_flat(row)) for row in rows]
    columns = list(dict.fromkeys(key for row in flat for key in row))
    return (["| " + " | ".join(f"`{c}`" for c in columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(_shown(row.get(c, "")) for c in columns) + " |" for row in flat])


def performance_page() -> str:
    out = []
    for path in sorted((DOCS / "bench").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        result = record["result"]
        tables = {k: v for k, v in result.items() if isinstance(v, list) and v and all(isinstance(r, dict) for r in v)}
        figures = _flat({k: v for k, v in result.items() if k not in tables})
        out += [f"## {record['title']}", "", record.get("what", ""), "",
                f"Measured {record['date']} on {record['machine']} (load average {record['load']}) with", "",
                _fence(record["command"]), "", "| figure | value |", "|---|---|"]
        out += [f"| `{key}` | {_shown(value)} |" for key, value in figures]
        for name, rows in tables.items():
            out += ["", f"`{name}`:", "", *_rows_table(rows)]
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- the Python API

#: The facades, in the order data flows (README's room map), each with what it is for.
ROOMS = [
    ("multiverse", "The public facade: `import multiverse as mv`. The functions that join rooms are documented "
                   "here, the names it re-exports in their own rooms below."),
    ("multiverse.errors", "The exception hierarchy; the CLI maps it to exit codes."),
    ("multiverse.spec", "YAML to a typed, immutable spec, and its universes."),
    ("multiverse.engine", "plan, run and draft: work units through the store, the run folder written."),
    ("multiverse.results", "Results: one run's tables plus every analysis of them, cached; load_run."),
    ("multiverse.analysis", "Tables in, tables and documents out; never draws, never calls a model."),
    ("multiverse.plots", "Figures from the analyses' tables."),
    ("multiverse.importers", "Results produced elsewhere (ASSERT, Inspect, promptfoo, lm-eval, tables) read into a run folder."),
    ("multiverse.gate", "The release gate: a claims file decided on a run; one run against another."),
    ("multiverse.labelling", "The sample people label, its sheet and page."),
    ("multiverse.reporting", "The HTML report."),
    ("multiverse.explorer", "The interactive page."),
    ("multiverse.tables", "The run folder: its tables, the typed manifest, the one reader of its files."),
    ("multiverse.store", "Content-addressed, write-once records; claims, leases, stats and gc."),
    ("multiverse.model", "The one litellm client: pacing, retries, breaker, budget, prices, the request cache."),
    ("multiverse.stages", "The stages that call models: draft, rollout, judge."),
    ("multiverse.work", "Universes to work units keyed by their content; the prompt templates in the keys."),
    ("multiverse.sim", "The offline world, served to litellm as the provider sim/."),
    ("multiverse.core", "The ground floor: vocabulary, content keys, files written whole, names, credentials."),
]


def _home(obj: object) -> str | None:
    """The room a class or function is defined in (``multiverse.spec`` for ``multiverse.spec._parse``)."""
    module = getattr(obj, "__module__", None)
    if not isinstance(module, str) or not module.startswith("multiverse"):
        return None
    parts = [p for p in module.split(".") if not p.startswith("_")]
    return ".".join(parts[:2])


def api_page() -> str:
    """An automodule per facade; a name another room defines is documented there only (one target per name)."""
    import importlib

    out = []
    for name, what in ROOMS:
        module = importlib.import_module(name)
        exported = list(getattr(module, "__all__", []))
        elsewhere = [n for n in exported if name != "multiverse.errors"
                     and _home(getattr(module, n, None)) not in (None, name)
                     and not _home(getattr(module, n, None) or "").startswith(name + ".")]
        options, own = [], []
        if name == "multiverse":  # its own functions (report, label, power, ...: multiverse._api), the rest below
            own = [n for n in exported if _home(getattr(module, n, None)) == name]
            options.append(":no-members:")
        elif elsewhere:
            options.append(":exclude-members: " + ", ".join(sorted(elsewhere)))
        out += [f"## `{name}`", "", what, ""]
        if elsewhere and name != "multiverse":
            out += ["Also exported here, documented in their own room: "
                    + ", ".join(f"`{n}`" for n in sorted(elsewhere)) + ".", ""]
        out += ["```{eval-rst}", f".. automodule:: {name}", *(f"   {o}" for o in options),
                *(f"\n.. autofunction:: {name}.{n}" for n in own), "```", ""]
    return "\n".join(out)


PAGES = {"api.md": api_page, "cli.md": cli_page, "spec.md": spec_page, "run-folder.md": run_folder_page,
         "performance.md": performance_page}


def write_all(_app: object = None) -> None:
    OUT.mkdir(exist_ok=True)
    for name, make in PAGES.items():
        text = make()
        path = OUT / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:  # unchanged files keep their time
            path.write_text(text, encoding="utf-8")


def setup(app):
    app.connect("builder-inited", write_all)
    return {"parallel_read_safe": True, "version": "1"}
