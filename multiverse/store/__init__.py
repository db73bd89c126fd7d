"""The store: content-addressed, write-once records of every model call, kept across runs in a database.

What the other rooms use of it, by concern:

- the store itself: :class:`Store` (``get``, ``put``, ``claim``, ``stats``,
  ``gc``), :func:`scrub`, :class:`CorruptEntryWarning`, :data:`MAX_ENTRY_BYTES`;
- which store: :func:`default_store_path` (the one rule: ``--store``, else
  ``$MULTIVERSE_STORE``, else beside the spec), :func:`store_of` (that rule for
  several specs or a run folder), :func:`check_store_path` (usable there,
  checked before anything is paid), :func:`open_store` (a store a caller names
  for reading), :func:`nearby_store` (another store near the spec that holds
  its work while its own holds none: :class:`StoreWarning`);
- keeping it tidy: :func:`store_stats` and :func:`store_gc` (by path, with
  typed answers :class:`StoreStats` and :class:`GcReport`), and
  :func:`migrate_store` (a store of entry files, from before the database,
  moved into it: :class:`Migration`); :func:`is_server` (a store named by a
  ``postgresql://`` URL rather than a directory);
- batches in flight: :func:`batch_submitted`, :func:`batch_ended` and
  :func:`batches_in_flight` (a provider batch a stopped run polls again);
- runs sharing it: :class:`Lease` and :func:`live_leases` (gc keeps a live
  run's work), :class:`Held` and :func:`release_of` (claims, so concurrent
  runs do not pay twice);
- what it holds: the record types (:class:`CaseRecord`,
  :class:`TranscriptRecord`, :class:`JudgmentRecord`, :class:`RequestRecord`
  ...), their checks :data:`SHAPES`, their :func:`provenance`, and the text
  rules every record passes (:func:`storable`).

The store imports only the ground (errors and core): never spec, model,
tables or anything above. Which keys a spec references is the grid's to say
(``multiverse.work``); :func:`store_gc` only keeps what it is given.
"""

from __future__ import annotations

from multiverse.store._batches import BatchRecord, batch_ended, batch_submitted, batches_in_flight
from multiverse.store._by_path import Migration, migrate_store, store_gc, store_stats
from multiverse.store._claims import Held, release_of
from multiverse.store._db import is_server
from multiverse.store._gc import GcReport, StageGc, StageStats, StoreStats
from multiverse.store._lease import Lease, live_leases
from multiverse.store._nearby import NearbyStore, StoreWarning, nearby_message, nearby_store
from multiverse.store._path import RecordedStore, check_store_path, default_store_path, store_of, why_this_store
from multiverse.store._provenance import call_of, provenance, versions
from multiverse.store._records import (
    SHAPES,
    Call,
    CaseRecord,
    CriterionLabel,
    JudgmentRecord,
    Provenance,
    Records,
    RequestRecord,
    TranscriptRecord,
    Turn,
)
from multiverse.store._store import MAX_ENTRY_BYTES, CorruptEntryWarning, Store, open_store, scrub
from multiverse.store._text import MAX_ANSWER_CHARS, MAX_DEPTH, storable, storable_text, too_deep

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_DEPTH",
    "MAX_ENTRY_BYTES",
    "SHAPES",
    "BatchRecord",
    "Call",
    "CaseRecord",
    "CorruptEntryWarning",
    "CriterionLabel",
    "GcReport",
    "Held",
    "JudgmentRecord",
    "Lease",
    "Migration",
    "NearbyStore",
    "Provenance",
    "RecordedStore",
    "Records",
    "RequestRecord",
    "StageGc",
    "StageStats",
    "Store",
    "StoreStats",
    "StoreWarning",
    "TranscriptRecord",
    "Turn",
    "batch_ended",
    "batch_submitted",
    "batches_in_flight",
    "call_of",
    "check_store_path",
    "default_store_path",
    "is_server",
    "live_leases",
    "migrate_store",
    "nearby_message",
    "nearby_store",
    "open_store",
    "provenance",
    "release_of",
    "scrub",
    "storable",
    "storable_text",
    "store_gc",
    "store_of",
    "store_stats",
    "too_deep",
    "versions",
    "why_this_store",
]
