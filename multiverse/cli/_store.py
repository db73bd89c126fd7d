"""``multiverse store stats|gc``: inspect the store a spec or run uses, and remove what no spec needs."""

from __future__ import annotations

from pathlib import Path

from multiverse.tables._folder import read_manifest

from ..errors import InputError
from ._output import print_json, say

__all__ = ["cmd_store"]


def _store_of(args) -> Path:
    """The store ``store stats|gc`` acts on, by the same rule as ``run``."""
    from multiverse.store._store import default_store_path

    if args.store is not None:
        return default_store_path(None, args.store)
    places = args.specs if args.store_command == "gc" else [args.where] if args.where is not None else []
    found = set()
    for place in places:
        manifest = read_manifest(place) if place.is_dir() else None
        if manifest is not None:
            if not manifest.store:
                raise InputError(f"{place / 'manifest.json'}: store: expected the path of the run's store")
            found.add(Path(manifest.store))
        elif not place.is_file():
            raise InputError(f"{place}: expected a spec file or a run directory with a manifest.json")
        else:
            found.add(default_store_path(place))
    if len(found) > 1:
        raise InputError(f"these specs keep their stores in different places ({', '.join(sorted(map(str, found)))}); "
                         "expected one store: pass --store")
    return found.pop() if found else default_store_path(None)


def cmd_store(args) -> int:
    from multiverse.store._gc import GcReport, StoreStats
    from multiverse.store._store import Store, check_store_path

    store = Store(check_store_path(_store_of(args), write=args.store_command == "gc"))
    result: StoreStats | GcReport
    if args.store_command == "stats":
        result = stats = store.stats()
    else:
        from multiverse.work._units import referenced_keys

        from ..spec import load_spec

        keep: dict[str, set[str]] = {}
        for path in args.specs:
            for stage, keys in referenced_keys(load_spec(path)).items():
                keep.setdefault(stage, set()).update(keys)
        result = report = store.gc(keep, dry_run=args.dry_run)
    if args.json:
        print_json(result.to_dict())
        return 0
    if args.store_command == "stats" and not store.root.exists():
        say(f"{store.root}: no store here yet (a run keeps its store beside its spec: "
              "multiverse store stats SPEC, or RUN_DIR)")
    elif args.store_command == "stats":
        say(f"{store.root}: {stats.entries} entries, {stats.bytes / 1e6:.1f} MB")
        for stage, s in stats.stages.items():
            say(f"  {stage}: {s.entries} entries, {s.bytes / 1e6:.1f} MB")
        if stats.corrupt_files:
            say(f"  quarantined: {stats.corrupt_files} bad entries (in {store.root / 'quarantine'})")
    else:
        verb = "would remove" if args.dry_run else "removed"
        say(f"{verb} {report.removed} entries ({report.bytes / 1e6:.1f} MB), {report.temp_files} temp files "
            f"and {report.corrupt_files} quarantined files; kept {report.kept_recent} recent entries "
            f"({report.live_runs} live runs)")
    return 0
