"""Progress on stderr: a bar on a terminal, plain lines anywhere else (a log file, CI), nothing when asked."""

from __future__ import annotations

import io
import re

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.core import _progress as progress_module
from multiverse.core._progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal_every_few_seconds_never_per_unit(monkeypatch):
    clock = iter(float(t) for t in range(0, 10_000))
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    with Progress(1000, "rollout", stream=out, every=100) as bar:
        for _ in range(1000):
            bar.update()
    lines = out.getvalue().splitlines()
    assert lines[0] == "rollout: 1000 units to do"
    assert lines[-1].startswith("rollout: 1000/1000 units in ")
    # One clock tick per update: a line each 100 s of a 1000 s step, not 1000 lines.
    middle = lines[1:-1]
    assert 5 <= len(middle) <= 11 and all(re.fullmatch(r"rollout: \d+/1000 units, \d+ s", m) for m in middle), lines
    assert "\r" not in out.getvalue()


def test_each_named_step_is_a_line_and_false_shows_nothing():
    out = io.StringIO()
    with Progress(2, "report", unit="section", stream=out) as steps:
        for title in ("Specification curves", "Judge agreement"):
            steps.label(title)
            steps.update()
    assert out.getvalue().splitlines()[:3] == ["report: 2 sections to do", "report: 1/2: Specification curves",
                                              "report: 2/2: Judge agreement"]
    quiet = io.StringIO()
    with Progress(2, "report", stream=quiet, enabled=False) as steps:
        steps.label("x")
        steps.update(2)
    assert quiet.getvalue() == ""


def test_a_terminal_gets_a_bar_not_lines():
    out = Terminal()
    with Progress(3, "judge", stream=out) as bar:
        bar.update(3)
    text = out.getvalue()
    assert "\r" in text and "3/3" in text and "units to do" not in text


@pytest.mark.parametrize("quiet", [False, True])
def test_run_and_report_print_plain_progress_when_stderr_is_not_a_terminal(tmp_path, quiet):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec_document(), sort_keys=False))
    flag = ["--quiet"] if quiet else []
    done = run_cli(["run", spec, "--out", tmp_path / "run", "--store", tmp_path / "store", *flag])
    done.ok()
    report = run_cli(["report", tmp_path / "run", "--out", tmp_path / "r.html", *flag])
    report.ok()
    if quiet:
        assert done.stderr == "" and report.stderr == ""
        return
    for stage in ("draft", "rollout", "judge"):
        assert re.search(rf"^{stage}: \d+ units to do$", done.stderr, re.M), done.stderr
        assert re.search(rf"^{stage}: (\d+)/\1 units in [\d.]+ s$", done.stderr, re.M), done.stderr
    assert re.search(r"^report: \d+ sections to do$", report.stderr, re.M)
    assert re.search(r"^report: 1/\d+: \S", report.stderr, re.M), report.stderr
