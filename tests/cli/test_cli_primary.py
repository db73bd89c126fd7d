"""``--primary`` repeats like ``--axis`` and ``--cut``: every command that takes it, and the errors name the axis
that is truly missing (issue 48)."""

from __future__ import annotations

import argparse

import pytest
from cli_runner import run_cli

from multiverse.cli import build_parser

GRADED = "model,item,grader,standard,scoring,label\n" + "".join(
    f"{m},i{i},{g},{s},{r},{(i + len(m) + len(g) + len(s) + len(r)) % 2}\n"
    for m in ("A", "B") for i in range(5) for g in ("g1", "g2") for s in ("strict", "lenient") for r in ("all", "any"))


def _commands_with_primary(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(argv prefix, subparser) of every command, at any depth, that has a --primary flag."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands_with_primary(sub, (*path, name))
        elif "--primary" in action.option_strings:
            yield path, parser


COMMANDS = list(_commands_with_primary(build_parser()))


def test_every_import_takes_primary():
    assert {path for path, _ in COMMANDS} >= {("import", k) for k in ("assert", "table", "inspect", "promptfoo", "lm-eval")}


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
@pytest.mark.parametrize("given", [
    ["--primary", "grader=g1", "--primary", "standard=strict", "--primary", "scoring=all"],
    ["--primary", "grader=g1", "standard=strict", "--primary", "scoring=all"],
    ["--primary", "grader=g1", "--primary", "standard=strict", "scoring=all"],
])
def test_repeated_primary_keeps_every_option(path, given):
    # Through the whole command line, as a user types it: the parsed options are every one given, in order.
    required = {"assert": ["r1"], "table": ["t.csv", "--system", "s", "--item", "i", "--label", "l"],
                "inspect": ["l.eval"], "promptfoo": ["r.json"], "lm-eval": ["results.json"]}[path[-1]]
    args = build_parser().parse_args([*path, *required, "--out", "o", *given])
    assert args.primary == [("grader", "g1"), ("standard", "strict"), ("scoring", "all")]


def _import(tmp_path, *flags):
    table = tmp_path / "labels.csv"
    table.write_text(GRADED)
    out = tmp_path / "out"
    result = run_cli(["import", "table", table, "--system", "model", "--item", "item", "--label", "label",
                      "--axis", "grader", "--axis", "standard", "--axis", "scoring", *flags, "--out", out])
    return result, out


def test_repeated_primary_names_the_universe(tmp_path):
    result, out = _import(tmp_path, "--primary", "grader=g2", "--primary", "scoring=any", "--primary", "standard=lenient")
    assert "primary: " in result.ok() and "none declared" not in result.stdout
    from multiverse import load_run

    loaded = load_run(out)
    assert loaded.manifest.universe_options[loaded.primary] == {"grader": "g2", "standard": "lenient", "scoring": "any"}


@pytest.mark.parametrize(("flags", "missing", "given"), [
    (["--primary", "grader=g1", "--primary", "scoring=all"], "standard", ("grader", "scoring")),
    (["--primary", "scoring=any", "--primary", "standard=strict"], "grader", ("scoring", "standard")),
    (["--primary", "grader=g2"], "standard, scoring", ("grader",)),
])
def test_an_incomplete_primary_names_only_the_axes_missing(tmp_path, flags, missing, given):
    result, out = _import(tmp_path, *flags)
    line = result.refused("--primary", f"(also {missing})")
    also = line.split("(also ", 1)[1]
    for axis in given:  # an axis the user gave is never blamed
        assert axis not in also
    assert not out.exists()


def test_an_axis_given_twice_across_repeats_is_refused(tmp_path):
    result, out = _import(tmp_path, "--primary", "grader=g1", "standard=strict", "--primary", "grader=g2")
    result.refused("--primary", "given twice", "grader=g1", "grader=g2")
    assert not out.exists()
