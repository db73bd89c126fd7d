"""Attacks on what multiverse writes, with names no output may carry raw (issue 45), and on YAML readers.

Imports refuse a name holding a control, invisible or non-text character
(tests/importers/test_hostile_imports.py), but folders holding such names
exist (written before, by another hand, or a verdicts table given as it is):
every writer shows them as visible escapes, so the XML parses and the HTML
encodes and parses, whatever the name.

Every YAML reader goes through the one guarded loader: a recursive alias is
one line and exit 2, never a RecursionError.
"""

from __future__ import annotations

import csv
import html.parser
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from unittest import mock

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.core import escaped, json_escaped, unshowable
from multiverse.gate._claims_file import Claim
from multiverse.gate._decide import CheckResult, ClaimOutcome
from multiverse.gate._junit import junit_xml

HOSTILE = {"soh": "\x01", "esc": "\x1b]0;t\x07", "nonchar": "\ufffe", "nonchar_astral": "\U0001fffe",
           "nel": "\x85", "line_sep": "\u2028", "rlo": "\u202e", "zwsp": "\u200b", "nul": "\x00",
           "surrogate": "\udc80", "vt": "\x0b", "del": "\x7f", "bom": "\ufeff"}


def _outcome(mark: str, status: str) -> ClaimOutcome:
    # A claims file is read as UTF-8 text and its strings are checked (a lone surrogate is refused there), but a
    # writer must escape whatever name reaches it another way: the hostile names go in after validation.
    claim = Claim.model_validate({"id": "no-regression", "in": "all", "system": "sys", "rank": 1,
                                  "where": {"axis": "opt"}})
    claim = claim.model_copy(update={"system": f"sys{mark}", "where": {f"axis{mark}": f"opt{mark}"}})
    return ClaimOutcome(claim=claim, status=status, p=0.01, p_fail=0.5, p_raw=0.01, p_fail_raw=0.5, n_universes=3,
                        n_needed=3, n_shown=2, estimate_low=0.1, estimate_high=0.2,
                        worst={"label": f"judge=opt{mark}", "estimate": 0.2}, notes=(f"note{mark}",))


@pytest.mark.parametrize("status", ["failed", "undecided", "held"])
@pytest.mark.parametrize("allow_undecided", [False, True])
@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_junit_parses_with_any_name_and_shows_it_escaped(kind, status, allow_undecided):
    mark = HOSTILE[kind]
    result = CheckResult(outcomes=(_outcome(mark, status),), alpha=0.05, source=f"runs/x{mark}", notes=(f"n{mark}",))
    document = junit_xml(result, allow_undecided=allow_undecided)
    root = ET.fromstring(document.encode("utf-8"))  # encodes (no lone surrogate) and parses (no U+0001, U+FFFE)
    texts = [root.find("testsuite").get("name")] + [e.get("value") or "" for e in root.iter("property")]
    texts += [e.get("message") or "" for e in root.iter() if e.get("message")]
    texts += [e.text or "" for e in root.iter() if e.text]
    shown = escaped(mark)
    assert shown != mark and any(f"sys{shown}" in t for t in texts), texts
    assert any(f"runs/x{shown}" in t for t in texts) and any(f"n{shown}" in t for t in texts)
    assert not any(unshowable(ch) for t in texts for ch in t.replace("\n", ""))


def test_json_escaped_keeps_the_data_and_drops_nothing_but_raw_characters():
    data = {"names": [f"x{mark}y" for mark in HOSTILE.values()], "plain": "café 中文 👩\u200d💻"}
    text = json_escaped(json.dumps(data, ensure_ascii=False))
    assert json.loads(text) == data
    text.encode("utf-8")
    assert not any(unshowable(ch) for ch in text)
    assert "café 中文 👩\u200d💻" in text  # what is text stays text


class _Strict(html.parser.HTMLParser):
    """Collects the page's text and attributes; the page must be whole (every tag the parser opens, it closes)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def handle_starttag(self, tag, attrs) -> None:
        self.texts.extend(value or "" for _, value in attrs)


def _hostile_folder(tmp_path: Path, mark: str) -> Path:
    """An import folder holding ``mark`` in a system, a case, an option and an axis name (the check switched off)."""
    table = tmp_path / "labels.csv"
    with open(table, "w", newline="", encoding="utf-8", errors="surrogatepass") as fh:
        writer = csv.writer(fh)
        # Inside each name: a reader strips whitespace (U+0085, U+2028) at its ends.
        writer.writerow(["model", "item", f"ax{mark}x", "label", "answer"])
        for s in (f"sys{mark}x", "plain"):
            for i, case in enumerate((f"case{mark}x", "c2", "c3")):
                for g in (f"opt{mark}x", "g2"):
                    writer.writerow([s, case, g, (i + len(s) + len(g)) % 2, f"answer {mark} {i}"])
    out = tmp_path / "out"
    with mock.patch("multiverse.importers._guard.unshowable_problem", lambda name: None):
        result = run_cli(["import", "table", table, "--system", "model", "--item", "item", "--label", "label",
                          f"--axis=ax{mark}x", "--transcript", "answer", "--out", out])
    assert result.returncode == 0, result.stderr
    return out


@pytest.mark.parametrize("kind", sorted(set(HOSTILE) - {"surrogate", "nul"}))  # a CSV cannot carry those two
def test_the_report_and_its_explorer_encode_and_parse_with_any_name(tmp_path, kind):
    mark = HOSTILE[kind]
    out = _hostile_folder(tmp_path, mark)
    page = tmp_path / "page.html"
    result = run_cli(["report", out, "--out", page, "--no-tests", "--quiet"])
    assert result.returncode == 0, result.stderr
    text = page.read_bytes().decode("utf-8")  # strict: the page is UTF-8 throughout
    raw = [hex(ord(ch)) for ch in text if unshowable(ch) and ch not in "\t\n\r"]
    assert raw == [], raw
    parser = _Strict()
    parser.feed(text)
    parser.close()
    assert any(f"sys{escaped(mark)}x" in t for t in parser.texts)
    # The explorer's data keeps the names exactly, for its script to show.
    data = text.split('id="explorer-data">', 1)[1].split("</script>", 1)[0] if 'id="explorer-data"' in text else None
    if data is not None:
        assert f"ax{mark}x" in _strings(json.loads(data))


def _strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return set().union(*(_strings(k) | _strings(v) for k, v in items)) if items else set()


@pytest.mark.parametrize("kind", ["soh", "rlo", "nonchar", "line_sep", "nel"])
def test_the_labelling_page_encodes_and_parses_with_any_name(tmp_path, kind):
    mark = HOSTILE[kind]
    out = _hostile_folder(tmp_path, mark)
    result = run_cli(["label", out, "--n", "2", "--out", tmp_path / "sheet.csv"])
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "sheet.html").read_bytes().decode("utf-8")
    raw = [hex(ord(ch)) for ch in text if unshowable(ch) and ch not in "\t\n\r"]
    assert raw == [], raw
    parser = _Strict()
    parser.feed(text)
    parser.close()


# -- YAML: one guarded loader ------------------------------------------------------------------------------------

RECURSIVE = {
    "list": "x: &a [1, *a]\n",
    "mapping": "x: &a\n  y: *a\n",
    "nested": "x: &a\n  y:\n    - z: [*a]\n",
    "two_anchors": "x: &a\n  b: &b\n    c: *a\n",
}


@pytest.mark.parametrize("shape", sorted(RECURSIVE))
@pytest.mark.parametrize("role", ["spec", "rubric", "claims", "assert_config"])
def test_a_recursive_alias_is_one_line_and_exit_2_in_every_yaml_reader(tmp_path, shape, role):
    text = RECURSIVE[shape]
    if role == "spec":
        path = tmp_path / "spec.yaml"
        path.write_text("name: x\n" + text)
        argv = ["validate", path]
    elif role == "rubric":
        document = tiny_spec_document()
        (tmp_path / "rubric.yaml").write_text(text)
        document["rubric"] = "rubric.yaml"
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(document))
        argv = ["validate", path]
    elif role == "claims":
        (tmp_path / "claims.yaml").write_text(text)
        table = tmp_path / "t.csv"
        table.write_text("system,item,label\na,i1,1\nb,i1,0\n")
        run_cli(["import", "table", table, "--system", "system", "--item", "item", "--label", "label", "--out",
                 tmp_path / "imp"])
        argv = ["check", tmp_path / "imp", "--claims", tmp_path / "claims.yaml"]
    else:
        from importers.test_importers import C1, FAB, make_run, make_suite, verdict

        run = make_run(make_suite(tmp_path), "run_a", inference=(C1,), scores=[(C1, "ok", verdict((FAB, True)))])
        (run / "config.yaml").write_text(text)
        argv = ["import", "assert", run, "--out", tmp_path / "out"]
    result = run_cli(argv)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1 and "RecursionError" not in result.stderr, result.stderr
    assert "an alias used inside its own anchor" in result.stderr, result.stderr


def test_aliases_that_do_not_recur_still_load(tmp_path):
    from multiverse.spec import parse_yaml

    document, _ = parse_yaml("a: &x [1, 2]\nb: [*x, *x]\nc: &y {k: *x}\nd: *y\n", tmp_path / "f.yaml")
    assert document == {"a": [1, 2], "b": [[1, 2], [1, 2]], "c": {"k": [1, 2]}, "d": {"k": [1, 2]}}
