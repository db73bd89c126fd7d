"""``multiverse import assert|table|inspect|promptfoo|lm-eval``: results produced elsewhere, as an import directory.

Calls ``multiverse.import_assert``, ``import_table``, ``import_inspect``, ``import_promptfoo`` or
``import_lm_eval`` and says
what the returned :class:`~multiverse.results._results.Results` holds.
"""

from __future__ import annotations

import sys
from argparse import Namespace
from typing import Any

from ..errors import InputError
from ._output import say

__all__ = ["cmd_import"]


def cmd_import(args: Namespace) -> int:
    from .. import import_assert, import_inspect, import_lm_eval, import_promptfoo, import_table
    from ..importers import loss_lines

    if args.primary and len(dict(args.primary)) < len(args.primary):
        raise InputError(f"primary: an axis is given twice ({' '.join(f'{a}={o}' for a, o in args.primary)})",
                         param="primary")
    common = {"primary": dict(args.primary) if args.primary else None, "ci": args.ci, "rate": args.rate,
              "force": args.force,
              **{name: getattr(args, name) for name in ("max_bytes", "max_rows", "max_transcript_bytes")}}
    common["merge_look_alikes"] = args.merge_look_alikes
    common["unparsed"] = args.unparsed or "exclude"
    if args.source_kind == "inspect":
        result = import_inspect(args.logs, args.out, scorer=args.scorer, system_role=args.system_role,
                                judge_role=args.judge_role, partial=args.partial, factors=args.factor,
                                scale=dict(args.scale) or None, **common)
    elif args.source_kind == "promptfoo":
        result = import_promptfoo(args.results_files, args.out, factors=args.factor, **common)
    elif args.source_kind == "lm-eval":
        result = import_lm_eval(args.sources, args.out, factors=args.factor, **common)
    elif args.source_kind == "assert":
        result = import_assert(args.run_dirs, args.out, axes=args.axis or None, scoring=args.scoring or "all_applicable",
                               **common)
    else:
        result = import_table(args.file, system=args.system, item=args.item, label=args.label, axes=args.axis,
                              factors=args.factor, positive=args.positive, negative=args.negative, out_dir=args.out,
                              score=args.score, scale=args.scale, cuts=args.cut, reference=args.reference,
                              order=args.order, verdict=args.verdict, combine=args.combine,
                              no_grade=args.no_grade, **common, **_table_columns(args))
    for warning in result.warnings:
        say(f"warning: {warning}", file=sys.stderr)
    for line in loss_lines(result.manifest) if result.manifest is not None else []:
        say(line, file=sys.stderr)  # one line per kind of loss and per thing dropped: silence means none
    _say_counted(result.verdicts)
    v = result.verdicts
    what = "score" if "score" in v.columns and v["score"].notna().any() else "label"
    missing = int((v["reason"] == f"missing {what}").sum()) if "reason" in v.columns else 0
    excluded = f" ({missing} with a missing {what}, excluded)" if missing else ""
    primary = result.manifest.primary if result.manifest is not None else None
    say(f"imported {len(v)} verdicts{excluded}: {v['universe_id'].nunique()} universes x {v['system'].nunique()} systems "
          f"(axes: {', '.join(result.axes) or 'none'}) into {result.out_dir}; "
          f"primary: {primary if primary else 'none declared'}")
    return 0


def _say_counted(verdicts: Any) -> None:
    """How many ok verdicts are unparsed replies --unparsed counted: ok now, so said apart from the graded."""
    from ..analysis import counted_unparsed

    counted = counted_unparsed(verdicts)
    if counted:
        say("of the ok verdicts, unparsed replies counted by --unparsed: "
            + ", ".join(f"{n} {policy}" for policy, n in counted.items()), file=sys.stderr)


def _table_columns(args: Namespace) -> dict[str, Any]:
    """The optional columns of ``import table`` that were given."""
    return {name: getattr(args, name) for name in ("replicate", "transcript", "rationale") if getattr(args, name, None)}
