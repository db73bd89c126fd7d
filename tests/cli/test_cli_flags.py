"""The library names parameters, the command line names flags: the one translation between them."""

from __future__ import annotations

from pathlib import Path

import pytest

from multiverse.cli import FLAGS, build_parser, flag_message, main
from multiverse.errors import InputError, SpecError


@pytest.mark.parametrize(("message", "param", "shown"), [
    ("backend: expected local or dask, got 'ray'", "backend", "--backend: expected local or dask, got 'ray'"),
    ("budget: not supported with backend dask", "budget", "--budget: not supported with backend dask"),
    ("scheduler: cannot reach tcp://x:1", "scheduler", "--scheduler: cannot reach tcp://x:1"),
    ("axis grader: expected one of the axes: judge", "axis", "--axis grader: expected one of the axes: judge"),
    # The parameter is `axes`; the flag that fills it is --axis, and either word may open the message.
    ("axis judge: runs/a: no option", "axes", "--axis judge: runs/a: no option"),
    ("axes: a and b have the same options", "axes", "--axis: a and b have the same options"),
    ("primary: judge=x: unknown option", "primary", "--primary: judge=x: unknown option"),
    ("t.csv: score: column not found (the label column)", "label", "--label: t.csv: score: column not found (the label column)"),
    ("run_dirs: expected at least one ASSERT run directory", "run_dirs", "ASSERT_RUN_DIR: expected at least one ASSERT run directory"),
    # Parameters named in backticks become flags where they stand, and nothing is prefixed.
    ("t.csv: label: `negative` needs `positive` too", "negative", "t.csv: label: --negative needs --positive too"),
    ("t.csv: x: column not found (an `axes` column)", "axes", "t.csv: x: column not found (an --axis column)"),
    ("`k` is `positive`", None, "`k` is --positive"),
    # A switch in keyword form, as draft words its refusal to overwrite.
    ("a.rubric.yaml: already exists; expected a new file (force=True overwrites it)", None,
     "a.rubric.yaml: already exists; expected a new file (--force overwrites it)"),
    ("reinforce=True stays", None, "reinforce=True stays"),
    # A word that merely starts like the parameter is not the parameter.
    ("axisymmetric: no", "axis", "--axis: axisymmetric: no"),
    ("verdicts: compliant: expected column(s)", None, "verdicts: compliant: expected column(s)"),
    ("spec.yaml: x: expected y", "not_a_parameter", "spec.yaml: x: expected y"),
    # The CLI's own refusals already speak in flags: not prefixed again.
    ("--figure: expected agreement without --by", "by", "--figure: expected agreement without --by"),
    ("by nosuch: expected an axis", "by", "--by nosuch: expected an axis"),
])
def test_flag_message(message, param, shown):
    assert flag_message(message, param) == shown


def _all_flags() -> set[str]:
    flags: set[str] = set()
    stack = [build_parser()]
    while stack:
        p = stack.pop()
        for action in p._actions:
            flags.update(action.option_strings)
            if isinstance(action.choices, dict):
                stack.extend(sub for sub in action.choices.values() if hasattr(sub, "_actions"))
    return flags


def test_every_library_parameter_that_is_a_flag_is_named_by_its_flag():
    """Each parameter the library refuses (``InputError(param=...)``) that the command line takes as a flag is
    in FLAGS, so the user reads "--by nosuch: ..." and not the Python name; a branch adding a flag without
    its entry fails here. "scale" is left out on purpose (see FLAGS)."""
    import re

    flags = _all_flags()
    params: set[str] = set()
    for path in (Path(__file__).parents[2] / "multiverse").rglob("*.py"):
        if "cli" not in path.parts:
            params |= set(re.findall(r'param="([a-z_]+)"', path.read_text(encoding="utf-8")))
    assert params, "no InputError params found: the pattern no longer matches the code"
    missing = sorted(p for p in params - {"scale"} if "--" + p.replace("_", "-") in flags and p not in FLAGS)
    assert not missing, missing


def test_every_flag_in_the_table_is_a_real_flag():
    parser = build_parser()
    flags = set()
    stack = [parser]
    while stack:
        p = stack.pop()
        for action in p._actions:
            flags.update(action.option_strings)
            if action.metavar:
                flags.add(action.metavar)
            subcommands = action.choices if isinstance(action.choices, dict) else {}
            for sub in subcommands.values():
                if hasattr(sub, "_actions"):
                    stack.append(sub)
    assert set(FLAGS.values()) <= flags, set(FLAGS.values()) - flags


def _refused(capsys, argv, error) -> str:
    import multiverse.cli._analyses as analyses

    def raising(args):
        raise error

    original = analyses.cmd_variance
    try:
        from multiverse import cli

        cli.COMMANDS["variance"] = raising
        code = main(argv)
    finally:
        cli.COMMANDS["variance"] = original
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_main_translates_input_and_spec_errors_and_offers_force(capsys, tmp_path):
    err = _refused(capsys, ["variance", str(tmp_path)], InputError("backend: expected local or dask", param="backend"))
    assert err == "error: --backend: expected local or dask"
    forceable = InputError("out: runs/x: holds other files", param="out")
    forceable.forceable = True
    err = _refused(capsys, ["variance", str(tmp_path)], forceable)
    assert err == "error: --out: runs/x: holds other files; pass --force to write there anyway"
    spec_error = SpecError("spec.rubric.yaml", "", "already exists; expected a new file (force=True overwrites it)")
    err = _refused(capsys, ["variance", str(tmp_path)], spec_error)
    assert err == "error: spec.rubric.yaml: already exists; expected a new file (--force overwrites it)"


def test_an_unknown_axis_is_refused_with_the_flag(capsys, tmp_path, rng):
    import pandas as pd

    rows = [{"judge": j, "system": s, "case_id": c, "compliant": bool(rng.random() < 0.6)}
            for j in ("a", "b") for s in ("x", "y") for c in range(5)]
    table = tmp_path / "verdicts.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    for command in (["variance"], ["ranking", "--boot", "0"], ["agreement"], ["curve"]):
        code = main([command[0], str(table), "--axis", "grader", *command[1:]])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err == "error: --axis grader: expected one of the axes: judge", (command, err)
