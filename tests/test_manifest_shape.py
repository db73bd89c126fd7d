"""One manifest shape for runs and imports (issue 46): each universe an object with its id, label, options and primary.

A run listed its universes as objects; an import listed ids and kept their
options in a map beside (``universe_options``). Both now write the run's
shape (``tables.universe_entry``), and the one reader (``tables.Manifest``)
still reads an older import's folder, bare ids and map alike.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import multiverse as mv
from multiverse.tables import Manifest, read_manifest

# What says where a folder came from and what it did, not which universes it has: a run and an import differ in these.
SOURCE_FIELDS = {"schema_version", "spec", "spec_file", "spec_hash", "created", "seconds", "source", "axis_stages",
                 "stages", "statuses", "failures", "tokens", "cost", "models_reported", "store", "simulated", "versions",
                 "scale", "warnings", "input", "estimator", "ci", "level", "rate", "losses", "dropped",
                 "primary_declared", "unparsed"}


def test_a_run_and_the_import_of_its_own_table_have_equal_manifests(sim_run, tmp_path):
    run = json.loads((sim_run.out / "manifest.json").read_text())
    table = tmp_path / "verdicts.csv"
    pd.read_csv(sim_run.out / "verdicts.csv").to_csv(table, index=False)
    primary = next(u["options"] for u in run["universes"] if u["primary"])
    mv.import_table(table, system="system", item="case_id", label="compliant", axes=run["axes"],
                    factors=run["factors"], primary=primary, out_dir=tmp_path / "imported")
    imported = json.loads((tmp_path / "imported" / "manifest.json").read_text())
    assert "universe_options" not in imported
    assert imported["universes"] == run["universes"]  # ids, labels, options, the primary flag, in order
    assert {k: v for k, v in imported.items() if k not in SOURCE_FIELDS} == \
        {k: v for k, v in run.items() if k not in SOURCE_FIELDS}
    # Read back, the two folders' typed manifests agree on every universe too.
    assert read_manifest(tmp_path / "imported").universes == read_manifest(sim_run.out).universes


def test_an_older_import_with_bare_ids_and_an_options_map_reads_as_the_one_shape():
    older = {"source": "table", "axes": ["judge"], "primary": "u2", "universes": ["u1", "u2"],
             "universe_options": {"u1": {"judge": "a"}, "u2": {"judge": "b"}}}
    manifest = Manifest.from_document(older)
    assert [(u.id, u.options) for u in manifest.universes] == [("u1", {"judge": "a"}), ("u2", {"judge": "b"})]
    assert manifest.universe_options == older["universe_options"]
    # An entry's own options win over the map (an older import listed objects where a universe had its own scale).
    mixed = Manifest.from_document({**older, "universes": [{"id": "u1", "options": {"judge": "own"}}, "u2"]})
    assert mixed.universe_options == {"u1": {"judge": "own"}, "u2": {"judge": "b"}}
    # The map is read, never written back: the typed manifest dumps one shape.
    assert "universe_options" not in manifest.model_dump(by_alias=True)


@pytest.mark.parametrize("bad", [5, {"u1": 5}, {"u1": {"judge": [1]}}])
def test_an_older_options_map_of_the_wrong_shape_is_named(bad):
    with pytest.raises(mv.InputError, match="universe_options"):
        Manifest.from_document({"universes": ["u1"], "universe_options": bad})
