"""core.json_ready: the one converter to plain JSON data (content keys, documents, requests, sheets, the simulator)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from multiverse.core import FrozenMap, canonical_json, digest, json_ready


def _keys_before(obj: Any) -> Any:
    """The content keys' converter before it became json_ready (c3f8a09), kept to pin every stored key."""
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _keys_before(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _keys_before(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_keys_before(v) for v in obj]
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    return obj


@dataclasses.dataclass(frozen=True)
class _Unit:
    name: str
    seed: int
    options: tuple


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=4),
    st.builds(_Unit, st.text(max_size=4), st.integers(), st.tuples(inner)),
    st.builds(lambda d: FrozenMap(d), st.dictionaries(st.text(max_size=4), inner, max_size=3))), max_leaves=20)


@given(values)
def test_content_keys_are_what_they_were(value):
    # A changed key would make every stored record unreachable: the keys' form must not move.
    before = json.dumps(_keys_before(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == before


def test_one_and_one_point_zero_are_one_choice_in_a_key_only():
    assert digest({"t": 1}) == digest({"t": 1.0}) != digest({"t": 1.5})
    assert json_ready({"t": 1.0}) == {"t": 1.0} and isinstance(json_ready(1.0), float)


class _Doc(BaseModel):
    rate: float
    systems: list[str]


def test_documents_come_out_as_plain_json():
    ready = json_ready({
        "nan": float("nan"), "inf": -math.inf, "np_nan": np.float64("nan"), "na": pd.NA, "i": np.int64(3),
        "b": np.bool_(True), "f": np.float32(0.5), 2: (1, [np.int8(2)]), "doc": _Doc(rate=0.25, systems=["a"]),
        "unit": _Unit("u", 1, ("x",)), "frozen": FrozenMap({"k": 1}),
    })
    assert ready == {"nan": None, "inf": None, "np_nan": None, "na": None, "i": 3, "b": True, "f": 0.5,
                     "2": [1, [2]], "doc": {"rate": 0.25, "systems": ["a"]},
                     "unit": {"name": "u", "seed": 1, "options": ["x"]}, "frozen": {"k": 1}}
    assert type(ready["i"]) is int and type(ready["b"]) is bool and type(ready["f"]) is float
    json.dumps(ready, allow_nan=False)  # raises if anything is left that JSON cannot hold


def test_anything_else_is_itself_or_what_other_makes_of_it():
    stamp = pd.Timestamp("2026-12-07")
    assert json_ready(stamp) is stamp
    assert json_ready([stamp], other=str) == [str(stamp)]
    assert json_ready(float("nan"), finite=False) != json_ready(float("nan"), finite=False)  # NaN stays NaN


@pytest.mark.parametrize("array", [np.array([1, 2]), np.zeros((2, 2))])
def test_a_numpy_array_is_not_taken_for_a_scalar(array):
    assert json_ready(array) is array
