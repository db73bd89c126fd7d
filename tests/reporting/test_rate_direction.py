"""Rates read as compliance or as violation (issue 48): one flip (``core.orient``), and every output agrees.

The same run is shown both ways: the figure's axis and points, the report's tables, the explorer document and
the command line's numbers must all be 1 - each other, intervals swapped, counts n - k, and the spec's
``report.rate`` must choose the reading without changing any universe.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from cli_runner import run_cli
from conftest import sim_run_document
from hypothesis import given
from hypothesis import strategies as st

import multiverse as mv
from multiverse.core import orient, orient_interval, orient_rates, orient_side, rate_name
from multiverse.errors import InputError, SpecError

unit = st.floats(0, 1, allow_nan=False)


@given(unit, unit, st.booleans())
def test_orient_is_its_own_inverse_and_keeps_intervals_ordered(a, b, difference):
    low, high = sorted((a, b))
    for value in (low, high):
        assert orient(orient(value, "violation", difference=difference), "violation", difference=difference) == \
            pytest.approx(value)
        assert orient(value, "compliance", difference=difference) == value
    flipped = orient_interval(low, high, "violation", difference=difference)
    assert flipped[0] <= flipped[1]
    assert flipped == (orient(high, "violation", difference=difference), orient(low, "violation", difference=difference))


def test_orient_refuses_an_unknown_direction_and_flips_sides():
    with pytest.raises(InputError, match="rate: expected compliance or violation"):
        orient(0.5, "harm")
    assert orient_side("greater", "violation") == "less" and orient_side("less", "compliance") == "less"
    assert rate_name("violation") == "violation rate"


def test_orient_rates_flips_values_counts_and_positions():
    frame = pd.DataFrame({"system": ["a", "a", "a", "b"], "rate": [0.2, 0.5, 0.9, 0.4], "ci_low": [0.1, 0.4, 0.8, 0.3],
                          "ci_high": [0.3, 0.6, 1.0, 0.5], "n": [10, 10, 10, 5], "n_compliant": [2, 5, 9, 2],
                          "position": [1, 2, 3, 1]})
    read = orient_rates(frame, "violation")
    np.testing.assert_allclose(read["rate"], 1 - frame["rate"])
    np.testing.assert_allclose(read["ci_low"], 1 - frame["ci_high"])
    np.testing.assert_allclose(read["ci_high"], 1 - frame["ci_low"])
    assert read["n_compliant"].tolist() == [8, 5, 1, 3]
    assert read["position"].tolist() == [3, 2, 1, 1]  # still 1 = lowest, as read
    assert orient_rates(frame, "compliance") is frame


@pytest.fixture(scope="module")
def both(sim_run, tmp_path_factory):
    """The session's run, as compliance and as violation: its report page and explorer document each way."""
    root = tmp_path_factory.mktemp("both")
    out = {}
    for read in ("compliance", "violation"):
        folder = root / read
        shutil.copytree(sim_run.out, folder)
        page = mv.report(folder, folder / "report.html", rate=read, tests=False, progress=False).read_text()
        document = mv.load_run(folder).read_as(read)
        from multiverse.explorer import document_from_results

        out[read] = (page, document_from_results(document))
    return out


def _table_after(page: str, heading: str) -> pd.DataFrame:
    """The first table after ``heading`` in the page, its cells as numbers where they are numbers."""
    from html import unescape

    at = page.index(heading)
    table = page[page.index("<table", at):page.index("</table>", at)]
    header = [unescape(re.sub("<[^>]+>", "", h)) for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
    rows = [[unescape(re.sub("<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
    frame = pd.DataFrame([r for r in rows if len(r) == len(header)], columns=header)

    def number(column: pd.Series) -> pd.Series:
        as_number = pd.to_numeric(column, errors="coerce")
        return as_number if as_number.notna().all() else column

    return frame.apply(number)


def test_the_primary_rates_table_reads_both_ways(both):
    compliance = _table_after(both["compliance"][0], "The primary (pre-registered) universe is")
    violation = _table_after(both["violation"][0], "The primary (pre-registered) universe is")
    assert "compliance rate" in compliance.columns and "violation rate" in violation.columns
    assert "compliant" in compliance.columns and "violating" in violation.columns
    c = compliance.set_index("system")
    v = violation.set_index("system")
    np.testing.assert_allclose(v.loc[c.index, "violation rate"], 1 - c["compliance rate"], atol=1e-3)
    np.testing.assert_allclose(v.loc[c.index, "CI low"], 1 - c["CI high"], atol=1e-3)
    np.testing.assert_allclose(v.loc[c.index, "violating"], c["n (included)"] - c["compliant"])


def test_the_explorer_document_reads_both_ways(both):
    c, v = both["compliance"][1], both["violation"][1]
    assert (c["rate_name"], v["rate_name"]) == ("compliance rate", "violation rate")
    assert (c["counted"], v["counted"]) == ("compliant", "violating")
    cr, vr = c["rates"], v["rates"]
    np.testing.assert_allclose(np.array(vr["rate"], float), 1 - np.array(cr["rate"], float), atol=1e-9)
    np.testing.assert_allclose(np.array(vr["low"], float), 1 - np.array(cr["high"], float), atol=1e-9)
    assert vr["k"] == [n - k for n, k in zip(cr["n"], cr["k"])]
    assert vr["rank"] == cr["rank"]  # 1 = the best system, either way
    assert {k: c[k] for k in c if k not in ("rates", "rate_name", "counted")} == \
        {k: v[k] for k in v if k not in ("rates", "rate_name", "counted")}


def test_the_universes_table_and_the_words_read_both_ways(both):
    c_page, v_page = both["compliance"][0], both["violation"][0]
    assert "violation rate" in v_page and "share violating of included transcripts" in v_page
    # The page's own words never call a flipped number a compliance rate.
    assert not re.search(r"compliance rate", v_page.split("Provenance")[0].replace("report.rate", ""))
    c = _table_after(c_page, "universes; the primary comes first")
    v = _table_after(v_page, "universes; the primary comes first")
    rates = [col for col in c.columns if str(col).startswith("compliance rate: ")]
    assert rates
    for col in rates:
        system = col.split(": ", 1)[1]
        np.testing.assert_allclose(v[f"violation rate: {system}"], 1 - c[col], atol=1e-3)


def test_the_curve_figure_reads_both_ways(sim_run):
    results = mv.load_run(sim_run.out)
    compliance = results.curve().figure()
    violation = mv.load_run(sim_run.out).read_as("violation").curve().figure()
    c_axes = [ax for ax in compliance.axes if ax.get_ylabel()]
    v_axes = [ax for ax in violation.axes if ax.get_ylabel()]
    assert {ax.get_ylabel() for ax in c_axes} == {"compliance rate"}
    assert {ax.get_ylabel() for ax in v_axes} == {"violation rate"}

    def drawn(ax) -> list[np.ndarray]:
        # The universes' points, then their intervals' ends: the first lines of a panel, each sorted.
        return [np.sort(np.asarray(line.get_ydata(), float)) for line in ax.lines[:3]]

    for c_ax, v_ax in zip(c_axes, v_axes):
        c_points, c_low, c_high = drawn(c_ax)
        v_points, v_low, v_high = drawn(v_ax)
        assert len(c_points) > 1
        np.testing.assert_allclose(v_points, np.sort(1 - c_points), atol=1e-9)
        np.testing.assert_allclose(v_low, np.sort(1 - c_high), atol=1e-9)
        np.testing.assert_allclose(v_high, np.sort(1 - c_low), atol=1e-9)


def test_the_command_line_reads_both_ways(sim_run):
    compliance = run_cli(["curve", sim_run.out, "--boot", "50", "--threshold", "0.7"]).ok()
    violation = run_cli(["curve", sim_run.out, "--boot", "50", "--threshold", "0.3", "--rate", "violation"]).ok()
    pattern = re.compile(r"^  (\S+): (?:rate|violation rate) ([\d.]+) \.\. ([\d.]+) \.\. ([\d.]+)", re.M)
    c = {m[1]: tuple(map(float, m.groups()[1:])) for m in pattern.finditer(compliance)}
    v = {m[1]: tuple(map(float, m.groups()[1:])) for m in pattern.finditer(violation)}
    assert c and c.keys() == v.keys()
    for system, (low, median, high) in c.items():
        assert v[system] == pytest.approx((1 - high, 1 - median, 1 - low), abs=1.5e-3)
    # The same null, read the other way: the same p-values.
    assert [line.split("p = ")[1] for line in compliance.splitlines() if "joint test" in line] == \
        [line.split("p = ")[1] for line in violation.splitlines() if "joint test" in line]
    assert "violation_rate(" in violation and "= 0.3 in every universe" in violation


def test_the_specs_report_rate_chooses_the_reading_and_changes_no_universe(tmp_path):
    document = sim_run_document()
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(document, sort_keys=False))
    document["report"] = {"rate": "violation"}
    harm = tmp_path / "harm.yaml"
    harm.write_text(yaml.safe_dump(document, sort_keys=False))
    assert [u.id for u in mv.expand(mv.load_spec(plain))] == [u.id for u in mv.expand(mv.load_spec(harm))]
    result = mv.run(mv.load_spec(harm), out=tmp_path / "run", store=tmp_path / "store", progress=False)
    assert yaml.safe_load((tmp_path / "run" / "spec.yaml").read_text())["report"] == {"rate": "violation"}
    assert "rate" not in json.loads((tmp_path / "run" / "manifest.json").read_text())  # not a measurement
    assert mv.load_run(tmp_path / "run").rate_direction == "violation" == result.rate_direction
    assert mv.load_run(tmp_path / "run").read_as("compliance").rate_direction == "compliance"
    page = mv.report(tmp_path / "run", tests=False, progress=False).read_text()
    assert "violation rate" in page
    document["report"] = {"rate": "harm"}
    harm.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(SpecError, match=r"report\.rate"):
        mv.load_spec(harm)
    document["report"] = {"rate": "compliance"}
    document["axes"]["reading"] = {"c": {"report.rate": "compliance"}, "v": {"report.rate": "violation"}}
    harm.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(SpecError, match="report"):
        mv.load_spec(harm)


def test_the_anchored_figure_reads_both_ways():
    from multiverse.plots import plot_calibration

    frame = pd.DataFrame({"universe_id": ["u1", "u2"], "system": ["a", "a"], "judge": ["j1", "j2"],
                          "rate": [0.7, 0.4], "ci_low": [0.6, 0.3], "ci_high": [0.8, 0.5],
                          "judge_rate": [0.75, 0.45], "human_rate": [0.65, 0.35],
                          "human_ci_low": [0.5, 0.2], "human_ci_high": [0.8, 0.5]})

    def xs(figure) -> tuple[str, list[np.ndarray]]:
        ax = figure.axes[0]
        return ax.get_xlabel(), [np.asarray(line.get_xdata(), float) for line in ax.lines if len(line.get_xdata())]

    c_label, c_points = xs(plot_calibration(frame, ["judge"]))
    v_label, v_points = xs(plot_calibration(frame, ["judge"], rates_read="violation"))
    assert (c_label, v_label) == ("compliance rate", "violation rate")
    assert len(c_points) == len(v_points) >= 3
    for c, v in zip(c_points, v_points):
        np.testing.assert_allclose(v, 1 - c)


def test_the_difference_curve_reads_both_ways(sim_run):
    results = mv.load_run(sim_run.out)
    a, b = results.systems[:2]
    compliance = results.curve(diff=(a, b), boot=50).figure()
    violation = mv.load_run(sim_run.out).read_as("violation").curve(diff=(a, b), boot=50).figure()
    c_ax, v_ax = compliance.axes[0], violation.axes[0]
    assert c_ax.get_ylabel() == f"rate({a}) \u2212 rate({b})"
    assert v_ax.get_ylabel() == f"violation rate({a}) \u2212 violation rate({b})"
    c_points = np.sort(np.asarray(c_ax.lines[0].get_ydata(), float))
    v_points = np.sort(np.asarray(v_ax.lines[0].get_ydata(), float))
    assert len(c_points) > 1
    np.testing.assert_allclose(v_points, np.sort(-c_points), atol=1e-12)
