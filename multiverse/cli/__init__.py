"""The ``multiverse`` command: a thin layer over the Python API.

Each subcommand parses its flags (``_parser``), calls one API function and
prints what it returned (``_audit``: the commands that read a spec;
``_analyses``: the ones that read results; ``_imports``; ``_store``). Heavy
modules (litellm, matplotlib, the analyses) are imported inside the command
that needs them, so ``multiverse --help``, ``validate``, ``expand`` and
``plan`` start fast.

The library words its errors in Python parameter names; this module alone
turns them into flags (:data:`FLAGS`).

Exit codes: 0 success; 1 a run-time failure; 2 bad input (spec, table, flags),
reported as one line per problem on stderr with no traceback.
"""

from __future__ import annotations

import os
import re
import sys

from multiverse.core import TerminalStream, terminal_safe

from ..errors import InputError, MultiverseError, SpecError
from ._analyses import cmd_agreement, cmd_curve, cmd_ranking, cmd_report, cmd_variance
from ._anchoring import cmd_calibrate, cmd_label
from ._audit import (
    cmd_demo,
    cmd_draft,
    cmd_expand,
    cmd_plan,
    cmd_power,
    cmd_run,
    cmd_schema,
    cmd_validate,
)
from ._gate import cmd_check, cmd_diff
from ._imports import cmd_import
from ._output import save_figure as _save  # noqa: F401  (kept importable: tests save figures through it)
from ._parser import build_parser
from ._store import cmd_store

__all__ = ["FLAGS", "build_parser", "flag_message", "main"]

#: The library's parameter names and the flags (or arguments) that set them.
FLAGS = {
    "axis": "--axis", "axes": "--axis", "system": "--system", "systems": "--system", "item": "--item",
    "label": "--label", "positive": "--positive", "negative": "--negative", "primary": "--primary", "ci": "--ci",
    "scoring": "--scoring", "threshold": "--threshold", "diff": "--diff", "boot": "--boot", "seed": "--seed",
    "out": "--out", "out_dir": "--out", "store": "--store", "backend": "--backend", "budget": "--budget",
    "scheduler": "--scheduler", "jobs": "--jobs", "force": "--force", "rubric": "--rubric",
    "baseline_rate": "--baseline", "alpha": "--alpha", "power": "--power", "run_dirs": "ASSERT_RUN_DIR",
    "human": "--human", "labels": "--human", "n": "--n", "verdicts": "RUN_DIR_OR_TABLE",
    "max_units": "--max-units", "claims": "--claims", "junit": "--junit",
    # import table's optional columns, and the native importers' choices (issue 28)
    "replicate": "--replicate", "transcript": "--transcript", "rationale": "--rationale", "factors": "--factor",
    "scorer": "--scorer", "partial": "--partial", "system_role": "--system-role", "judge_role": "--judge-role",
    "logs": "LOG", "results_files": "RESULTS_JSON",
    # every importer's bounds and its rule for look-alike names (issue 45)
    "max_bytes": "--max-bytes", "max_rows": "--max-rows", "max_transcript_bytes": "--max-transcript-bytes",
    "merge_look_alikes": "--merge-look-alikes",
    # a pairwise table's orders and three-way verdicts (issue 44)
    "order": "--order", "verdict": "--verdict", "combine": "--combine",
    "reference": "--reference", "cut": "--cut", "unparsed": "--unparsed", "no_grade": "--no-grade", "rate": "--rate",
    "blind_systems": "--blind-systems",
    # grouped analyses and the Bradley-Terry ranking (issue 44)
    "by": "--by", "method": "--method", "anchor": "--anchor", "prior": "--prior",
    # Not "scale": the labelling sheet refuses a run's pairwise scale under that name, and `label` has no --scale.
}

_BACKTICKED = re.compile(r"`([a-z_]+)`")
# A keyword argument switched on in the library's words (``force=True``) is a switch on the command line.
_SWITCHES = ("force", "rubric")
_SWITCHED_ON = re.compile(rf"\b({'|'.join(_SWITCHES)})=True\b")

COMMANDS = {
    "validate": cmd_validate,
    "expand": cmd_expand,
    "plan": cmd_plan,
    "schema": cmd_schema,
    "draft": cmd_draft,
    "run": cmd_run,
    "demo": cmd_demo,
    "curve": cmd_curve,
    "agreement": cmd_agreement,
    "ranking": cmd_ranking,
    "variance": cmd_variance,
    "report": cmd_report,
    "power": cmd_power,
    "label": cmd_label,
    "calibrate": cmd_calibrate,
    "import": cmd_import,
    "store": cmd_store,
    "check": cmd_check,
    "diff": cmd_diff,
}


def flag_message(message: str, param: str | None) -> str:
    """``message`` of an error about ``param``, in the command line's words.

    Parameters the message names in backticks (the library writes "`negative`
    needs `positive` too") become their flags, as does a switch written as a
    keyword argument ("force=True overwrites it" reads "--force overwrites
    it"), and the message is otherwise left alone. Else a message that starts with the parameter's name
    (``backend: expected local or dask``) starts with its flag instead
    (``--backend: ...``), and any other message is prefixed with the flag.
    Without a known ``param``, or when the message already starts with a flag, it is returned as it is.
    """
    if _SWITCHED_ON.search(message):
        return _SWITCHED_ON.sub(lambda m: FLAGS[m.group(1)], message)
    named = [n for n in _BACKTICKED.findall(message) if n in FLAGS]
    if named:
        return _BACKTICKED.sub(lambda m: FLAGS.get(m.group(1), m.group(0)), message)
    flag = FLAGS.get(param or "")
    if param is None or flag is None or message.startswith("--"):  # the CLI's own errors already name their flags
        return message
    for name in dict.fromkeys((param, flag.lstrip("-"))):
        if message.startswith(name) and message[len(name):len(name) + 1] in (" ", ":"):
            return flag + message[len(name):]
    return f"{flag}: {message}"


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    # A warning (say, a bad store entry moved to quarantine) is one line for the user,
    # not a source location and a quoted line of multiverse's code.
    from multiverse.store import StoreWarning

    # A store warning names the parameter that picks a store; on the command line that is --store.
    text = flag_message(str(message), None) if issubclass(category, StoreWarning) else str(message)
    return f"warning: {_one_line(text)}\n"


def _refusal(exc: MultiverseError) -> str:
    message = flag_message(str(exc), getattr(exc, "param", None))
    if getattr(exc, "forceable", False):
        message += "; pass --force to write there anyway"
    return _one_line(message)


def main(argv: list[str] | None = None) -> int:
    """Run one command; everything it prints, on stdout and stderr, goes through ``terminal_safe``."""
    out, err = sys.stdout, sys.stderr
    # The print boundary: a name or a message built from a file can hold escape sequences, and
    # no print, warning or argparse message of the command can get past these two streams.
    sys.stdout, sys.stderr = TerminalStream(out), TerminalStream(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: list[str] | None) -> int:
    import warnings

    warnings.formatwarning = _one_line_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    try:
        return COMMANDS[args.command](args) or 0
    except SpecError as exc:
        problems = getattr(exc, "problems", None)
        for line in problems or [_refusal(exc)]:
            print(f"error: {_one_line(line)}", file=sys.stderr)
        return 2
    except InputError as exc:
        print(f"error: {_refusal(exc)}", file=sys.stderr)
        return 2
    except MultiverseError as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        # RunInterrupted (first signal, after the grace) says what was abandoned; a bare
        # KeyboardInterrupt is the second signal, which stops at once.
        how = _one_line(str(exc)) or "stopped at once"
        print(f"interrupted: {how}; finished units are kept in the store, rerun to resume", file=sys.stderr)
        if argv is None:
            # The process's own command: leave now. Calls in flight are abandoned (their
            # claims are released), and the interpreter would otherwise wait for
            # litellm's logging threads to drain before exiting.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(130)
        return 130
    except BrokenPipeError:
        # `multiverse expand ... | head` closes stdout early: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, RecursionError, MemoryError) as exc:
        # The file system or the machine refused (a full disk, a folder that vanished): one line, never a traceback.
        filename = getattr(exc, "filename", None)
        where = f"{_one_line(str(filename))}: " if filename else ""
        detail = getattr(exc, "strerror", None) or type(exc).__name__
        print(f"error: {where}{_one_line(str(detail))}", file=sys.stderr)
        return 1


def _one_line(text: str) -> str:
    """``text`` as one line of the terminal: controls shown as escapes, then any run of whitespace one space."""
    return " ".join(terminal_safe(text, newlines=True).split())
