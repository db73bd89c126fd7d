"""Checked habits that ruff and mypy do not check (README › Development)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "multiverse"
MAX_LINES = 500


def test_every_package_module_is_at_most_500_lines():
    # One concept per module: a module past 500 lines holds more than one, and is split by concept.
    long = {str(path.relative_to(PACKAGE.parent)): n for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_the_check_sees_the_package():
    modules = list(PACKAGE.rglob("*.py"))
    assert len(modules) > 40 and PACKAGE / "__init__.py" in modules and PACKAGE / "spec" / "__init__.py" in modules
