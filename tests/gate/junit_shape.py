"""The shape CI readers expect of a JUnit XML document, checked with the standard library's parser."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["junit_cases"]


def junit_cases(path: Path) -> dict[str, ET.Element]:
    """The JUnit document's test cases by name, after checking the shape CI readers expect."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    cases = suite.findall("testcase")
    assert int(suite.get("tests")) == len(cases) == int(root.get("tests"))
    failures = sum(1 for c in cases if c.find("failure") is not None)
    assert int(suite.get("failures")) == failures == int(root.get("failures"))
    assert int(suite.get("skipped")) == sum(1 for c in cases if c.find("skipped") is not None)
    for case in cases:
        assert case.get("classname") and case.get("name")
        assert len([e for e in case if e.tag in ("failure", "skipped", "error")]) <= 1
    return {c.get("name"): c for c in cases}
