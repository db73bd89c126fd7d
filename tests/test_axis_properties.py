"""Property: an axis over any spec field, or two, is refused at ``validate`` in one line, or its rates are right.

Hypothesis draws a base audit (binary labels or a 1-10 score) and one or two
axes, each with an option that patches one spec field to a value drawn from
that field's valid and invalid values. Then either ``validate`` refuses the
spec with one line naming the file and the field, or the run (on the
simulated world, one store for every example) writes rates that equal a
recount from scratch of its own ``verdicts`` table: per universe x system,
the share of compliant verdicts (``pooled``), the mean of per-cell shares
(``cell_balanced``), the mean score rescaled on the universe's own scale
(``mean``), the share at or above the cut (``at_least``), each over the ``ok``
verdicts alone. A spec that validates and then fails to run fails here too.

The examples are few and derandomized (the same ones in every CI run; set
``MULTIVERSE_AXIS_EXAMPLES`` for more, or run the randomized sweep profile,
docs/development.md), and every run is tiny: two cases.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from pathlib import Path

import hypothesis
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import tiny_spec_document
from hypothesis import strategies as st

from multiverse import validate
from multiverse.engine import run
from multiverse.errors import SpecError

EXAMPLES = int(os.environ.get("MULTIVERSE_AXIS_EXAMPLES", "25"))

#: Spec field -> values an axis option may set it to: valid ones, and some that no universe can take.
FIELDS: dict[str, list] = {
    "scoring.estimator": ["pooled", "cell_balanced", "mean", "at_least", "win_rate", "median"],
    "scoring.cut": [3, 7, 0.5, 11],
    "scoring.ties": ["half", "exclude"],
    "scoring.unparsed": ["exclude", "against", "tie"],
    "scoring.rule": ["all_applicable", "impermissible_only", "no_applicable_is_compliant", "majority_of_samples"],
    "scoring.ci.method": ["wilson", "bootstrap"],
    "scoring.ci.level": [0.9, 0.5, 1.5],
    "judge.scale.max": [5, 10, 7, 0],
    "judge.scale.min": [0, 1, 2],
    "judge.scale.type": ["binary", "ordinal", "continuous", "pairwise"],
    "judge.scale": [{"type": "ordinal", "min": 1, "max": 5}, {"type": "continuous", "min": 0, "max": 100},
                    {"type": "binary"}],
    "judge.model": ["sim/judge-a", "sim/judge-b"],
    "judge.samples": [1, 2, 0],
    "judge.evidence_standard": ["strict", "lenient", "certain"],
    "rollout.replicates": [1, 2],
}
BASES = {
    "labels": ({"model": "sim/judge-a", "evidence_standard": "strict"}, {}),
    "scores": ({"model": "sim/judge-a", "evidence_standard": "strict",
                "scale": {"type": "ordinal", "min": 1, "max": 10}}, {"estimator": "mean", "cut": 7}),
}

patches = st.sampled_from(sorted(FIELDS)).flatmap(
    lambda field: st.sampled_from(FIELDS[field]).map(lambda value: (field, value)))
audits = st.tuples(st.sampled_from(sorted(BASES)), st.lists(patches, min_size=1, max_size=2))


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("axis_store")  # one store: the examples share drafts and transcripts


def _document(base: str, axes: list[tuple[str, object]]) -> dict:
    judge, scoring = BASES[base]
    document = tiny_spec_document()
    document["design"]["cases_per_cell"] = 1
    document["rollout"] = {"setting": "single_turn", "max_turns": 1,
                           "user": {"model": "sim/user-cooperative", "persona": "cooperative"}}
    document["judge"] = dict(judge)
    document["scoring"] = dict(scoring)
    document["axes"] = {f"axis{i}": {"base": {}, "alt": {field: value}} for i, (field, value) in enumerate(axes)}
    return document


def _expected(verdicts: pd.DataFrame, spec, factors: list[str]) -> dict[str, tuple[int, float]]:
    """system -> (n, rate) of one universe, recounted from its verdict rows and its own resolved spec."""
    scale, estimator = spec.judge.scale, spec.scoring.estimator
    out = {}
    for system, rows in verdicts.groupby(verdicts["system"].astype(str)):
        ok = rows[rows["status"].astype(str) == "ok"]
        if estimator in ("pooled", "cell_balanced"):
            labels = ok["compliant"].astype(bool)
            if estimator == "pooled":
                rate = float(labels.mean()) if len(ok) else np.nan
            else:
                cells = ok.groupby([ok[f].astype(str) for f in factors])["compliant"].apply(lambda c: c.astype(bool).mean())
                rate = float(cells.mean()) if len(cells) else np.nan
        else:
            score = ok["score"].to_numpy(dtype=float)
            if estimator == "at_least":
                values = (score >= spec.scoring.cut).astype(float)
            else:
                values = (score - scale.min) / (scale.max - scale.min)
                if estimator == "win_rate" and spec.scoring.ties == "exclude":
                    values = values[score != (scale.min + scale.max) / 2]
            rate = float(values.mean()) if len(values) else np.nan
            ok = ok.iloc[:len(values)]
        out[system] = (len(ok), rate)
    return out


@hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(audit=audits)
def test_an_axis_over_any_field_is_refused_in_one_line_or_its_rates_equal_a_recount(store, audit):
    base, axes = audit
    folder = Path(tempfile.mkdtemp(prefix="axis-", dir=store.parent))
    spec_path = folder / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(_document(base, axes), sort_keys=False))
    try:
        checked = validate(spec_path)
    except SpecError as refused:
        message = str(refused)
        assert "\n" not in message and message.startswith(str(spec_path)), message
        assert refused.path, f"the refusal names no field: {message}"
        hypothesis.event("refused at validate")
        return
    hypothesis.event("ran")
    run(checked.spec, out=folder / "run", store=store, progress=False)
    verdicts = pd.read_parquet(folder / "run" / "verdicts.parquet")
    rates = pd.read_parquet(folder / "run" / "rates.parquet")
    rates = rates[rates["subgroup"] == "all"]
    factors = list(checked.spec.factors)
    for universe in checked.universes:
        mine = verdicts[verdicts["universe_id"].astype(str) == universe.id]
        for system, (n, rate) in _expected(mine, universe.spec, factors).items():
            row = rates[(rates["universe_id"].astype(str) == universe.id) & (rates["system"].astype(str) == system)]
            assert len(row) == 1, (universe.label, system)
            assert int(row["n"].iloc[0]) == n, (universe.label, system)
            found = float(row["rate"].iloc[0])
            assert (np.isnan(found) and np.isnan(rate)) or found == pytest.approx(rate, abs=1e-12), \
                (universe.label, system, found, rate)
            if np.isfinite(found):
                assert 0 <= float(row["ci_low"].iloc[0]) <= found <= float(row["ci_high"].iloc[0]) <= 1


def test_the_catalogue_reaches_both_outcomes():
    # The property is only as good as its draws: some patches must validate and some must be refused.
    outcomes = set()
    with tempfile.TemporaryDirectory() as folder:
        for (base, (field, values)) in itertools.product(sorted(BASES), FIELDS.items()):
            for value in values[-1:] + values[:1]:
                path = Path(folder) / "spec.yaml"
                path.write_text(yaml.safe_dump(_document(base, [(field, value)]), sort_keys=False))
                try:
                    validate(path)
                    outcomes.add("ok")
                except SpecError:
                    outcomes.add("refused")
    assert outcomes == {"ok", "refused"}
