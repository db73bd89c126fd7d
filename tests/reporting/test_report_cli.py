"""The `report` and `expand` commands: flags checked before any work, output that says what it is."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import tiny_spec_document

from multiverse.cli import main


def _table(tmp_path):
    rows = [{"system": s, "case_id": f"c{c}", "judge": j, "compliant": (c + k + len(s)) % 3 > 0}
            for s in ("alpha", "beta") for k, j in enumerate(("j1", "j2")) for c in range(10)]
    path = tmp_path / "labels.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("flags", [["--threshold", "1.5"], ["--threshold", "0"], ["--threshold", "nan"],
                                   ["--threshold", "half"], ["--threshold", "0.6", "--no-tests"]])
def test_report_refuses_bad_test_flags_in_one_line(tmp_path, capsys, flags):
    table = _table(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(table), *flags])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ("--threshold" in err[0] or "--no-tests" in err[0])
    assert not (tmp_path / "report.html").exists()


def test_report_threshold_and_quiet(tmp_path, capsys):
    table = _table(tmp_path)
    out = tmp_path / "r.html"
    assert main(["report", str(table), "--threshold", "0.7", "--quiet", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.strip() == f"report: {out}"
    page = out.read_text(encoding="utf-8")
    assert "rate(alpha) = 0.7 in every universe" in page and "were 0.7 in every universe" in page
    assert main(["report", str(table), "--no-tests", "--quiet", "--out", str(out)]) == 0
    assert "Joint tests were turned off" in out.read_text(encoding="utf-8")


def test_expand_labels_every_column(write_spec, capsys):
    document = tiny_spec_document(axes={"judge": {"judge_a": {"judge.model": "sim/judge-a"},
                                                  "judge_b": {"judge.model": "sim/judge-b"}}},
                                  primary={"judge": "judge_a"})
    assert main(["expand", str(write_spec(document))]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rule = lines[0].split(), lines[1].split()
    assert header == ["id", "judge", "primary"]
    assert len(rule) == len(header)  # every column of dashes has a name above it
    rows = [line.split() for line in lines[2:] if line.strip() and not line.endswith("universes")]
    assert sorted(r[-1] for r in rows if len(r) == 3) == ["yes"] and len(rows) == 2
