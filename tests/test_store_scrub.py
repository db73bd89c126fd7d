"""A store row made without walking the record is byte for byte the row of the walked, scrubbed copy."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from multiverse.store import MAX_ANSWER_CHARS, _scrub
from multiverse.store._packing import pack, parse

# Secrets with characters JSON escapes (quote, backslash, a control character) and one that the
# cut-off rule catches by its head alone.
SECRETS = {"FAKE_API_KEY": 'sk-"quo\\ted\x01-0123456789', "OTHER_TOKEN": "tok-abcdefgh-ijkl"}
CLEAN = ["", "a", "é", " ", "key", "stored_at"]
DIRTY = ["\x00", "\ud800", "\udfff", '"', "\\", "\n", "api_key", "API_KEY", "Authorization", "x-Api-Key", "apiKey",
         "\u212aey", *SECRETS.values(), *(v[:8] for v in SECRETS.values()), *(v[:-1] for v in SECRETS.values())]
# Mostly clean pieces: a record with one thing to clean is where a missed test would show.
text = st.lists(st.sampled_from(CLEAN * 6 + DIRTY), max_size=4).map("".join)
keys = (text | st.sampled_from(["api_key", "API_KEY", "Proxy-Authorization", "api\u212aey", "x-api-key"])
        | st.integers(-3, 3))
leaves = text | st.integers() | st.floats(allow_nan=False) | st.booleans() | st.none()
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
                      | st.dictionaries(keys, inner, max_size=3), max_leaves=12)
records = st.dictionaries(keys, values, max_size=5)


def walked(record: dict, stored_at: str | None) -> bytes:
    clean = _scrub.storable_scrubbed(record)
    if stored_at is not None:
        clean.setdefault("stored_at", stored_at)
    return pack(clean).body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=records, stamped=st.booleans())
def test_the_row_equals_the_walked_rows(record, stamped):
    stored_at = "2026-12-07T18:00:00+00:00" if stamped else None
    with pytest.MonkeyPatch.context() as mp:
        for name, value in SECRETS.items():
            mp.setenv(name, value)
        try:
            expected = walked(record, stored_at)
        except (TypeError, ValueError):  # keys JSON cannot write beside each other: both refuse
            with pytest.raises((TypeError, ValueError)):
                _scrub.clean_row(record, stored_at)
            return
        row = _scrub.clean_row(record, stored_at)
    assert row.body == expected
    value, problem = parse(row.body)
    assert problem is None and isinstance(value, dict)
    assert not any(secret in json.dumps(value, ensure_ascii=False) for secret in SECRETS.values())


def test_a_record_with_nothing_to_clean_is_not_walked(monkeypatch):
    walks = []
    monkeypatch.setattr(_scrub, "storable_scrubbed", lambda record: walks.append(record) or dict(record))
    record = {"status": "ok", "answer": {"text": "Verdict: cited.", "parsed": {"ok": True}}, "cost": 0.1}
    row = _scrub.clean_row(record, "2026-12-07T18:00:00+00:00")
    assert walks == [] and parse(row.body)[0] == {**record, "stored_at": "2026-12-07T18:00:00+00:00"}
    _scrub.clean_row({**record, "headers": {"Authorization": "Bearer x"}})
    assert len(walks) == 1  # a credential-named key: walked


def test_a_text_past_the_limit_is_cut_as_the_walk_cuts_it():
    record = {"answer": "x" * (MAX_ANSWER_CHARS + 1)}
    row = _scrub.clean_row(record)
    assert row.body == walked(record, None) and len(parse(row.body)[0]["answer"]) <= MAX_ANSWER_CHARS


def test_a_record_that_is_not_json_is_refused():
    with pytest.raises(TypeError):
        _scrub.clean_row({"when": object()})
