"""The claims file's reader: strict types on every field, every problem at once, a suggestion for a misspelt key.

Every field is attacked with values of the wrong kind (booleans, text, nulls, lists, mappings, NaN,
infinities, out-of-range and huge numbers). A value is accepted only when it is what the field means
(a number is never a boolean or text, a name is never a number written bare, ...); anything else is one
line naming the file, the claim and the field.
"""

from __future__ import annotations

import math

import pytest
import yaml
from cli_runner import run_cli

from multiverse.errors import SpecError
from multiverse.gate import parse_claims, read_claims

ATTACKS = [True, False, "0.5", "", "x" * 300, None, [], [0.5], ["a", True], {}, {"a": 1}, float("nan"), float("inf"),
           -float("inf"), -1, 0, 1, 2, 0.5, 10**30, -(10**30), 1e308, 5e-324]

RATE = {"id": "x", "system": "atlas", "rate": {"at_least": 0.5}, "in": "all"}
RANK = {"id": "x", "system": "atlas", "rank": 2, "in": "all"}
NO_REGRESSION = {"id": "x", "candidate": "atlas", "baseline": "beacon", "margin": 0.05, "in": "all"}
ORDER = {"id": "x", "better": "atlas", "worse": "beacon", "in": "all"}


def _number(value, *, low: float, high: float, low_open: bool = True, high_open: bool = True) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return False
    above = value > low if low_open else value >= low
    below = value < high if high_open else value <= high
    return above and below


def _name(value) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 200


def _option(value) -> bool:
    one = lambda v: (isinstance(v, str) and v != "") or (isinstance(v, int) and not isinstance(v, bool))  # noqa: E731
    return one(value) or (isinstance(value, list) and len(value) > 0 and all(one(v) for v in value))


# field -> (the claim it is set on, how to set it, what a valid value is)
FIELDS = {
    "rate.at_least": (RATE, lambda c, v: {**c, "rate": {"at_least": v}}, lambda v: _number(v, low=0, high=1)),
    "rate.at_most": (RATE, lambda c, v: {**c, "rate": {"at_most": v}}, lambda v: _number(v, low=0, high=1)),
    "rank": (RANK, lambda c, v: {**c, "rank": v},
             lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 100_000),
    "margin": (NO_REGRESSION, lambda c, v: {**c, "margin": v},
               lambda v: _number(v, low=0, high=1, low_open=True)),  # 0 needs rule: not_refuted
    "in": (RATE, lambda c, v: {**c, "in": v}, lambda v: v in ("all", "primary")),
    "in.share": (RATE, lambda c, v: {**c, "in": {"share": v}},
                 lambda v: _number(v, low=0, high=1, high_open=False)),
    "where.judge": (RATE, lambda c, v: {**c, "where": {"judge": v}}, _option),
    "rule": (RATE, lambda c, v: {**c, "rule": v}, lambda v: v in ("shown", "not_refuted")),
    "id": (RATE, lambda c, v: {**c, "id": v}, _name),
    **{f: (base, lambda c, v, f=f: {**c, f: v}, _name)
       for f, base in (("system", RATE), ("better", ORDER), ("worse", ORDER), ("candidate", NO_REGRESSION),
                       ("baseline", NO_REGRESSION))},
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_field_takes_only_what_it_means(field):
    base, put, valid = FIELDS[field]
    for value in ATTACKS:
        document = {"claims": [put(base, value)]}
        same_system = field in ("worse", "baseline") and value in ("atlas",)
        if valid(value) and not same_system:
            parse_claims(document, "c.yaml")
            continue
        with pytest.raises(SpecError) as caught:
            parse_claims(document, "c.yaml")
        lines = caught.value.problems
        claim = "claim #1" if field == "id" else "claim x"
        top = field.split(".")[0]
        # The field's own line; a null where a value is needed may be named as the claim missing its shape.
        named = [ln for ln in lines if ln.startswith(f"c.yaml: {claim}: {top}") or
                 (value is None and ln.startswith(f"c.yaml: {claim}"))]
        assert named, (field, value, lines)
        assert len(lines) == 1, (field, value, lines)


@pytest.mark.parametrize("value", ATTACKS)
def test_the_files_alpha_is_a_number_between_0_and_a_half(value):
    document = {"alpha": value, "claims": [RATE]}
    if _number(value, low=0, high=0.5):
        assert parse_claims(document).alpha == value
        return
    with pytest.raises(SpecError) as caught:
        parse_claims(document, "c.yaml")
    assert [ln for ln in caught.value.problems if ln.startswith("c.yaml: alpha")], caught.value.problems


def test_a_margin_of_0_needs_the_rule_that_fails_only_on_evidence():
    with pytest.raises(SpecError, match="margin: expected a margin above 0 with rule: shown"):
        parse_claims({"claims": [{**NO_REGRESSION, "margin": 0}]})
    assert parse_claims({"claims": [{**NO_REGRESSION, "margin": 0, "rule": "not_refuted"}]}).claims[0].margin == 0
    # The file's rule reaches the claim that gives none.
    assert parse_claims({"rule": "not_refuted", "claims": [{**NO_REGRESSION, "margin": 0}]}).claims[0].rule == \
        "not_refuted"


def test_every_problem_of_a_file_is_reported_at_once_with_its_line_and_a_suggestion(tmp_path):
    text = """alpha: 0.05
claims:
  - {id: floor, system: atlas, rate: {atleast: 0.5}, in: all}
  - id: first
    system: beacon
    rank: true
    in: all
  - {id: nr, candidate: atlas, baseline: beacon, margn: 0.05, in: all}
  - {id: floor, system: atlas, rate: {at_most: '0.5'}, in: every}
"""
    path = tmp_path / "claims.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        read_claims(path)
    lines = caught.value.problems
    assert lines == [
        f"{path}: claim floor: rate.atleast (line 3): unknown key; expected one of: at_least, at_most "
        "(did you mean at_least?)",
        f"{path}: claim first: rank (line 6): expected an integer, got a boolean",
        f"{path}: claim nr: margn (line 8): unknown key; expected one of: baseline, better, candidate, id, in, "
        "margin, rank, rate, rule, system, where, worse (did you mean margin?)",
        f"{path}: claim floor (#4): in (line 9): expected 'all', 'primary' or {{share: s}}, got 'every'",
        f"{path}: claim floor (#4): rate.at_most (line 9): expected a number, got the string '0.5'",
        f"{path}: claim floor (#4): id (line 9): expected each claim's id once (also claim #1)",
    ]
    # The command prints the same lines, one each, and exits 2 before reading the run.
    done = run_cli(["check", tmp_path / "no-such-run", "--claims", path])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {line}" for line in lines]


def test_a_misspelt_key_of_the_file_itself_gets_a_suggestion():
    with pytest.raises(SpecError) as caught:
        parse_claims({"clams": [RATE], "alpha": 0.05}, "c.yaml")
    assert "c.yaml: clams: unknown key; expected one of: alpha, claims, rule (did you mean claims?)" in \
        caught.value.problems


def test_problems_against_the_run_are_reported_at_once(sim_run, tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [
        {"id": "a", "system": "zephyr", "rate": {"at_least": 0.5}, "in": "all"},
        {"id": "b", "system": "atlas", "rate": {"at_least": 0.5}, "in": "all", "where": {"judge": "judge_z"}},
        {"id": "c", "system": "atlas", "rank": 3, "in": "all"},
    ]}), encoding="utf-8")
    done = run_cli(["check", sim_run.out, "--claims", path])
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert [ln.split(": ")[2] for ln in lines] == ["claim a", "claim b", "claim c"]
    assert lines[0].startswith(f"error: {path}: claim a: system: expected one of the systems")
    assert lines[1].startswith(f"error: {path}: claim b: where.judge: expected one of the options")
    assert lines[2].startswith(f"error: {path}: claim c: rank: expected 1 to 1 with 2 systems")


KEYS = ["id", "in", "where", "system", "rate", "rank", "better", "worse", "candidate", "baseline", "margin", "rule",
        "atleast", "margn"]


def _values():
    from hypothesis import strategies as st

    scalar = st.sampled_from(ATTACKS + ["atlas", "beacon", "all", "primary", "shown", "not_refuted", 0.05, 3])
    nested = st.one_of(scalar, st.dictionaries(st.sampled_from(["at_least", "at_most", "share", "judge", "atleast"]),
                                               scalar, max_size=2), st.lists(scalar, max_size=3))
    anything = st.dictionaries(st.sampled_from(KEYS), nested, max_size=7)
    # A valid claim of each shape with one key set to anything (or removed): mostly near misses, some valid.
    mutated = st.builds(lambda base, key, value, drop: {k: v for k, v in {**base, key: value}.items()
                                                        if not (drop and k == key)},
                        st.sampled_from([RATE, RANK, NO_REGRESSION, ORDER]), st.sampled_from(KEYS), nested,
                        st.booleans())
    return st.one_of(anything, mutated)


def test_any_claim_is_read_or_refused_in_lines_naming_file_and_claim(tmp_path, monkeypatch):
    # Hypothesis keeps its files (examples, constants) under this folder: none in the checkout.
    monkeypatch.setenv("HYPOTHESIS_STORAGE_DIRECTORY", str(tmp_path / "hypothesis"))
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    # No example database: the tests write nothing into the checkout.
    read: list[int] = []
    refused: list[int] = []

    @settings(max_examples=300, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(_values(), min_size=1, max_size=3), st.sampled_from([None, "shown", "not_refuted", True, "x"]))
    def check(claims, rule):
        document = {"claims": claims, **({} if rule is None else {"rule": rule})}
        try:
            parsed = parse_claims(document, "c.yaml")
        except SpecError as exc:
            lines = exc.problems
            assert lines and all(ln.startswith(("c.yaml: claim ", "c.yaml: rule")) for ln in lines), lines
            assert all("\n" not in ln for ln in lines)
            refused.append(1)
            return
        # Read: every claim keeps its id and is decided by a rule the file or the claim gave.
        read.append(1)
        assert [c.id for c in parsed.claims] == [c["id"] for c in claims]
        assert all(c.rule in ("shown", "not_refuted") for c in parsed.claims)

    check()
    assert len(read) >= 5 and len(refused) >= 100, (len(read), len(refused))  # both doors were tried


def test_a_spec_and_a_claims_file_word_a_misspelt_key_alike(tmp_path):
    # One definition of a validation problem serves both files: the same suggestion, the same shape of line.
    from conftest import tiny_spec_document

    from multiverse.spec import load_spec

    document = tiny_spec_document()
    document["scoring"] = {"estimater": "mean"}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (line,) = [ln for ln in caught.value.problems if "estimater" in ln]
    assert line.startswith(f"{path}: scoring.estimater (line ")
    assert line.endswith("(did you mean estimator?)") and "unknown key; expected one of: " in line
