"""Submitted provider batches, kept in the store so a stopped run polls them again instead of paying again.

A batch of requests sent through a provider's batch API (``multiverse.model._batch``)
is recorded twice, each time as a write-once entry beside the answers:

- when the provider has accepted it: a ``batch`` entry, keyed by the batch's
  own id, with the provider, the endpoint (without credentials), the model,
  the request keys it carries (each exactly a direct call's
  ``multiverse.model._requestcache.request_key``) and its state ``submitted``;
- when it has ended: a ``batch_end`` entry under the same key, with the
  provider's final state (completed, expired, failed, cancelled) and how many
  of its requests were answered and how many failed.

A batch with a ``batch`` entry and no ``batch_end`` is in flight: the next run
that needs any of its requests polls it rather than submitting them again.
Its answers are kept as ``request`` entries, under the keys a direct call
uses, so a direct run after a batch run pays for nothing and the other way round.

The store adds nothing else: no new table, so these entries live as every
other entry does (``store gc`` removes only the stages it is given, which
these are not). Every record is scrubbed on its way in: no key is ever written.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from multiverse.core import digest
from multiverse.store._store import Store

__all__ = ["BATCH", "BATCH_END", "BatchRecord", "batch_ended", "batch_submitted", "batches_in_flight"]

#: the store stage of a submitted batch, and of its end
BATCH, BATCH_END = "batch", "batch_end"


class BatchRecord(TypedDict):
    """A batch the provider accepted: where it is and which requests it carries."""

    batch_id: str
    provider: str
    endpoint: str | None
    model: str
    keys: list[str]
    window: str
    submitted_at: float
    state: str


def _entry_key(batch_id: str) -> str:
    # A store key is a plain name; a provider's id (batch_abc123) is one, but not necessarily.
    return digest({"batch_id": batch_id}, 32)


def batch_submitted(store: Store, *, batch_id: str, provider: str, endpoint: str | None, model: str,
                    keys: Iterable[str], window: str) -> BatchRecord:
    """Record that the provider accepted ``batch_id`` carrying ``keys``; returns the record kept.

    Raises ``ValueError`` when ``batch_id`` is already recorded: two batches are never one entry."""
    record: BatchRecord = {"batch_id": batch_id, "provider": provider, "endpoint": endpoint, "model": model,
                           "keys": sorted(set(keys)), "window": window, "submitted_at": time.time(),
                           "state": "submitted"}
    # Durable: this entry is what keeps a stopped run from paying for the batch again.
    if not store.put(BATCH, _entry_key(batch_id), dict(record)):
        # The id of a batch already recorded: kept, its requests would be this one's, and this one's polled as its.
        raise ValueError(f"the provider named this batch {batch_id!r}, the id of a batch submitted earlier; "
                         "expected a new id")
    return record


def batch_ended(store: Store, batch_id: str, *, state: str, answered: int, failed: Mapping[str, str]) -> None:
    """Record that ``batch_id`` ended in ``state``: answers kept, and each failed request's reason."""
    store.put(BATCH_END, _entry_key(batch_id), {"batch_id": batch_id, "state": state, "answered": answered,
                                                "failed": dict(failed), "ended_at": time.time()})


def batches_in_flight(store: Store, keys: Iterable[str]) -> list[BatchRecord]:
    """The batches submitted and not ended that carry any of ``keys``, oldest first."""
    wanted = set(keys)
    if not wanted:
        return []
    entries = list(store.keys(BATCH))
    submitted = store.get_many(BATCH, entries)
    ended = store.get_many(BATCH_END, entries)
    found: list[Any] = [record for key, record in submitted.items()
                        if key not in ended and wanted.intersection(record.get("keys") or ())]
    return sorted(found, key=lambda record: record.get("submitted_at") or 0.0)
