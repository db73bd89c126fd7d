"""``multiverse store stats|gc|migrate``: inspect the store a spec or run uses, remove what no spec needs,
move an older store's entry files into its database."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from multiverse.store import GcReport, StoreStats, is_server

from ._output import print_json, say

__all__ = ["cmd_store"]


def cmd_store(args: Namespace) -> int:
    # By the same rule as ``run``; a run folder's store is the one its manifest records.
    from .. import store_gc, store_migrate, store_stats

    if args.store_command == "migrate":
        moved = store_migrate(args.where, store=args.store)
        if args.json:
            print_json(moved.to_dict())
        else:
            say(f"{moved.root}: moved {moved.moved} entry files into its database ({moved.already} were there "
                f"already, {moved.quarantined} bad ones quarantined)")
        return 0
    result: StoreStats | GcReport
    if args.store_command == "stats":
        result = store_stats(args.where, store=args.store)
    else:
        result = store_gc(args.specs, store=args.store, dry_run=args.dry_run)
    if args.json:
        print_json(result.to_dict())
    elif isinstance(result, StoreStats):
        _say_stats(result)
    else:
        verb = "would remove" if result.dry_run else "removed"
        say(f"{verb} {result.removed} entries ({result.bytes / 1e6:.1f} MB), {result.temp_files} temp files "
            f"and {result.corrupt_files} quarantined files; kept {result.kept_recent} recent entries "
            f"({result.live_runs} live runs)")
    return 0


def _say_stats(stats: StoreStats) -> None:
    root = Path(stats.root)
    if not is_server(stats.root) and not root.exists():
        say(f"{root}: no store here yet (a run keeps its store beside its spec: "
            "multiverse store stats SPEC, or RUN_DIR)")
        return
    say(f"{stats.root}: {stats.entries} entries, {stats.bytes / 1e6:.1f} MB")
    for stage, s in stats.stages.items():
        say(f"  {stage}: {s.entries} entries, {s.bytes / 1e6:.1f} MB")
    if stats.corrupt_files:
        say(f"  quarantined: {stats.corrupt_files} bad entries (kept aside until the next store gc)")
