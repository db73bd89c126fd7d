"""A claims check as JUnit XML: one test case per claim, so any CI shows which claim held and which did not.

Every text in it (a claim's id and statement, a source path, notes, universe
labels) can come from a file someone sent, so each goes through the one rule
for outputs (:func:`multiverse.core.escaped`): a control character, U+FFFE or a
lone surrogate, which XML 1.0 cannot hold, is written as a visible escape
(``\\x01``), and the document always parses.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from multiverse.core import atomic_write_text, escaped
from multiverse.gate._decide import CheckResult, ClaimOutcome

__all__ = ["junit_xml", "write_junit"]


def _x(text: object, *, newlines: bool = False) -> str:
    """``text`` as XML 1.0 can hold it: every unshowable character as a visible escape (newlines kept if asked)."""
    return escaped(text, newlines=newlines)


def _detail(outcome: ClaimOutcome) -> str:
    low, high = outcome.estimate_low, outcome.estimate_high
    worst = outcome.worst or {}
    lines = [
        f"claim: {outcome.claim.statement}",
        f"status: {outcome.status} (p held {outcome.p:.4g}, p failed {outcome.p_fail:.4g}, Holm-adjusted)",
        f"universes: {outcome.n_universes}, needed {outcome.n_needed}, shown alone {outcome.n_shown}",
        f"estimate range: {_num(low)} to {_num(high)}",
        f"worst universe: {worst.get('label', '-')} (estimate {_num(worst.get('estimate'))})",
        *outcome.notes,
    ]
    return "\n".join(lines)


def _num(value: object) -> str:
    return "-" if value is None else f"{float(value):.4g}"  # type: ignore[arg-type]


def junit_xml(result: CheckResult, *, allow_undecided: bool = False) -> str:
    """The JUnit XML document of ``result``: a failed claim is a failure; an undecided one too, or
    skipped when undecided claims are allowed."""
    counts = result.counts
    failures = counts["failed"] + (0 if allow_undecided else counts["undecided"])
    root = ET.Element("testsuites", name="multiverse check", tests=str(len(result.outcomes)),
                      failures=str(failures), errors="0")
    suite = ET.SubElement(root, "testsuite", name=_x(f"claims on {result.source}"), tests=str(len(result.outcomes)),
                          failures=str(failures), errors="0",
                          skipped=str(counts["undecided"] if allow_undecided else 0), time="0")
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="alpha", value=f"{result.alpha:g}")
    for note in result.notes:
        ET.SubElement(properties, "property", name="note", value=_x(note))
    for outcome in result.outcomes:
        case = ET.SubElement(suite, "testcase", classname="multiverse.claims", name=_x(outcome.claim.id), time="0")
        detail = _x(_detail(outcome), newlines=True)
        evidence = f"p failed {outcome.p_fail:.3g}" if outcome.status == "failed" else f"p held {outcome.p:.3g}"
        summary = _x(f"{outcome.status}: {outcome.claim.statement} ({evidence})")
        if outcome.status == "failed" or (outcome.status == "undecided" and not allow_undecided):
            ET.SubElement(case, "failure", message=summary, type=outcome.status).text = detail
        elif outcome.status == "undecided":
            ET.SubElement(case, "skipped", message=summary).text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(result: CheckResult, path: str | os.PathLike[str], *, allow_undecided: bool = False) -> Path:
    """Write :func:`junit_xml` to ``path`` whole (never half a file); return the path."""
    path = Path(path)
    atomic_write_text(path, junit_xml(result, allow_undecided=allow_undecided))
    return path
