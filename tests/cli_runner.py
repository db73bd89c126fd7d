"""Running the ``multiverse`` command from a test: in this process, or as a process of its own.

``run_cli`` calls ``multiverse.cli.main(argv)`` here and captures what it
prints and its exit code. It is fast (no interpreter start-up, no second
import of pandas and litellm), and an unexpected exception surfaces as the
test's own traceback instead of text in a captured stderr.

``spawn_cli`` runs ``python -m multiverse.cli`` as a real process (``start_cli``
leaves it running). Use it
only for what a process alone shows: signals and interrupts, which modules a
command imports, the environment a run inherits, commands that must be killed
after a timeout, and commands run side by side (the working directory and
the standard streams are per process, so in-process runs cannot overlap).

Both drop ``MULTIVERSE_STORE`` from the environment they give the command, so
a developer's shared store never leaks into a test.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import io
import os
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REPO", "CliResult", "cli_environment", "refused", "run_cli", "spawn_cli", "start_cli"]

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class CliResult:
    """What one command did: the same three fields as ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str

    def __iter__(self) -> Iterator[object]:
        """Unpacks as ``code, stdout, stderr``."""
        return iter((self.returncode, self.stdout, self.stderr))

    def ok(self) -> str:
        """Assert the command succeeded without a traceback; return its stdout."""
        assert "Traceback" not in self.stdout + self.stderr, self.stderr
        assert self.returncode == 0, self.stderr
        return self.stdout

    def refused(self, *fragments: str) -> str:
        """Assert exit 2, nothing on stdout, and exactly one line on stderr holding every fragment; return that line."""
        assert self.returncode == 2, self.stderr
        assert "Traceback" not in self.stderr
        assert self.stdout == "", self.stdout
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1, self.stderr
        for fragment in fragments:
            assert fragment in lines[0], lines[0]
        return lines[0]


def cli_environment(changes: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment without ``MULTIVERSE_STORE``, with ``changes`` (None removes a name)."""
    env = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
    # A spawned command imports this checkout, wherever its working directory is.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    for name, value in (changes or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None] | None) -> Iterator[None]:
    saved = dict(os.environ)
    try:
        os.environ.pop("MULTIVERSE_STORE", None)
        for name, value in (changes or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@functools.cache
def _project_filters() -> tuple[tuple[str, str, type[Warning], str], ...]:
    """pytest's ``filterwarnings`` of pyproject.toml (``action:message:category:module``), for ``warnings``:
    read from the one place they are written, so a command run here and a test see the same rules."""
    import builtins

    import tomllib

    lines = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pytest"]["ini_options"]
    filters = []
    for line in lines.get("filterwarnings", []):
        action, message, category, module = (line.split(":", 3) + ["", "", ""])[:4]
        found = getattr(builtins, category or "Warning", None)
        if not (isinstance(found, type) and issubclass(found, Warning)):
            raise ValueError(f"pyproject.toml: filterwarnings: {line!r}: expected a built-in warning category")
        filters.append((action, message, found, module))
    return tuple(filters)


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def run_cli(argv: Sequence[object], *, cwd: Path | str | None = None,
            env: Mapping[str, str | None] | None = None) -> CliResult:
    """``multiverse <argv>`` in this process, from ``cwd``, with ``env`` changes; argv items are str()-ed."""
    from multiverse.cli import main

    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    # Earlier tests' garbage (an unclosed socket of some client) is collected now, so that its
    # ResourceWarnings go to pytest, not into this command's stderr as if the command had given them.
    # (Quick: tests/conftest.py freezes what was alive when the module started, so this walks the module's own.)
    gc.collect()
    # main() sets warnings.formatwarning for its one-line warnings; the caller's is put back.
    formatwarning = warnings.formatwarning
    try:
        with _environment(env), warnings.catch_warnings(), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # As in a process of its own: every warning the command gives is printed to its
            # stderr (not once per process, and not into pytest's warning log).
            warnings.simplefilter("default")
            # ...except the project's own deprecations, which are errors here as under pytest (pyproject.toml's
            # filterwarnings): a deprecated call inside a command fails the test instead of being printed.
            for action, message, category, module in _project_filters():
                warnings.filterwarnings(action, message, category, module)
            warnings.showwarning = _print_warning
            if cwd is not None:
                os.chdir(cwd)
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse: --help, --version and refused flags
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
    finally:
        os.chdir(here)
        warnings.formatwarning = formatwarning
    return CliResult(int(code), out.getvalue(), err.getvalue())


def refused(result: CliResult, *fragments: str) -> str:
    """The one line a refused command printed (``CliResult.refused``, for callers that hold a result)."""
    return result.refused(*fragments)


def spawn_cli(argv: Sequence[object], *, cwd: Path | str | None = None,
              env: Mapping[str, str | None] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``python -m multiverse.cli <argv>`` as its own process, waited for up to ``timeout`` seconds.

    See the module's docstring for when a test needs this; ``subprocess.TimeoutExpired`` after the timeout.
    """
    return subprocess.run([sys.executable, "-m", "multiverse.cli", *map(str, argv)], cwd=cwd,
                          env=cli_environment(env), capture_output=True, text=True, timeout=timeout, check=False)


def start_cli(argv: Sequence[object], *, cwd: Path | str | None = None,
              env: Mapping[str, str | None] | None = None) -> subprocess.Popen:
    """``python -m multiverse.cli <argv>`` started and left running, with text pipes for its output."""
    return subprocess.Popen([sys.executable, "-m", "multiverse.cli", *map(str, argv)], cwd=cwd,
                            env=cli_environment(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
