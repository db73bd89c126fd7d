"""Human-anchored rates: PPI++ against ppi-python, coverage under a biased judge, refusals, planning."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from multiverse.analysis import (
    anchored_width,
    calibrate,
    calibration_document,
    human_power,
    ppi_mean,
    read_labels,
    rollout_configurations,
)
from multiverse.analysis.anchoring._calibrate import MIN_LABELS, ppi_mean_batch
from multiverse.analysis.anchoring._ppi import ppi_binary
from multiverse.errors import InputError


def _judge(truth: np.ndarray, sensitivity: float, specificity: float, rng) -> np.ndarray:
    """A judge's verdicts (1 = compliant): violations (truth 0) caught with ``sensitivity``."""
    draw = rng.random(truth.shape)
    return np.where(truth == 1, draw < specificity, draw >= sensitivity).astype(float)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n,big_n", [(10, 40), (13, 500), (60, 61), (150, 20), (25, 3)])
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_equals_ppi_python(seed, n, big_n, alpha):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.9)
    y = (rng.random(n) < p).astype(float)
    f = _judge(y, 0.85, 0.8, rng)
    u = _judge((rng.random(big_n) < p).astype(float), 0.85, 0.8, rng)
    point = float(np.squeeze(ppi_mean_pointestimate(y, f, u)))
    low, high = (float(np.squeeze(x)) for x in ppi_mean_ci(y, f, u, alpha=alpha))
    # ppi_mean_batch is ppi-python's estimate and normal interval, for any labels
    rate, lo, hi, lam = ppi_mean_batch(y[None], f[None], u[None], alpha)
    assert (rate[0], lo[0], hi[0]) == pytest.approx((point, low, high), abs=1e-9)
    # the anchored estimate, from the arrays and from per-cell sums as calibrate computes it, is ppi-python's
    # too; its interval is the score interval (tests/analysis/test_anchoring_interval.py), around it
    ours = ppi_mean(y, f, u, alpha)
    assert ours.rate == pytest.approx(point, abs=1e-9) and ours.lam == pytest.approx(lam[0], abs=1e-12)
    assert 0.0 <= ours.lam <= 1.0 and ours.ci_low < min(max(point, 0), 1) < ours.ci_high
    rate, lo, hi, _ = ppi_binary(*(np.array([x], float) for x in (n, y.sum(), f.sum(), (y * f).sum(), big_n, u.sum())),
                                 alpha)
    assert (rate[0], lo[0], hi[0]) == pytest.approx((ours.rate, ours.ci_low, ours.ci_high), abs=1e-12)


def test_degenerate_judges_fall_back_to_the_humans_only_mean():
    y = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1], float)
    constant = ppi_mean(y, np.ones(10), np.ones(30))  # ppi-python gives NaN here
    assert constant.lam == 0.0 and constant.rate == pytest.approx(y.mean())
    everything_labelled = ppi_mean(y, y, np.array([]))
    assert everything_labelled.rate == pytest.approx(y.mean()) and everything_labelled.lam == 0.0
    assert everything_labelled.ci_high - everything_labelled.ci_low > 0


def test_coverage_with_a_biased_judge():
    # Sensitivity 0.85, specificity 0.80: at a true compliant rate of 0.7 the judge reads 0.605.
    rng = np.random.default_rng(20261201)
    reps, n, big_n, p = 4000, 60, 440, 0.7
    y = (rng.random((reps, n)) < p).astype(float)
    f = _judge(y, 0.85, 0.8, rng)
    u = _judge((rng.random((reps, big_n)) < p).astype(float), 0.85, 0.8, rng)
    _rate, low, high, _ = ppi_binary(np.full(reps, n, float), y.sum(1), f.sum(1), (y * f).sum(1),
                                     np.full(reps, big_n, float), u.sum(1), 0.05)
    coverage = np.mean((low <= p) & (p <= high))
    assert coverage >= 0.93
    raw = np.concatenate([f, u], axis=1).mean(1)
    raw_half = 1.96 * np.sqrt(raw * (1 - raw) / (n + big_n))
    raw_coverage = np.mean(np.abs(raw - p) <= raw_half)
    assert abs(raw.mean() - p) > 0.08 and raw_coverage < 0.05
    # and the anchored interval is narrower than 60 labels alone
    human_half = 1.96 * y.std(1) / np.sqrt(n)
    assert np.median(high - low) < np.median(2 * human_half)


def test_planned_width_matches_simulation():
    rng = np.random.default_rng(7)
    reps, n, total, p, se, sp = 3000, 50, 400, 0.8, 0.9, 0.85
    y = (rng.random((reps, n)) < p).astype(float)
    f = _judge(y, se, sp, rng)
    u = _judge((rng.random((reps, total - n)) < p).astype(float), se, sp, rng)
    _, low, high, _ = ppi_mean_batch(y, f, u, 0.05)
    planned = anchored_width(n, total, p, se, sp)
    assert np.mean(high - low) == pytest.approx(float(planned["anchored_width"]), rel=0.05)
    assert float(planned["ratio"]) < 0.8
    # a judge no better than chance buys nothing; a perfect one everything but the finite-N term
    assert float(anchored_width(n, total, p, 0.5, 0.5)["ratio"]) == pytest.approx(1.0)
    assert float(anchored_width(n, total, p, 1.0, 1.0)["ratio"]) == pytest.approx(np.sqrt(n / total))
    report = human_power(labels=60, transcripts=480, baseline_rate=0.8)
    ratios = [j["ratio"] for j in report["judges"]]
    assert ratios == sorted(ratios, reverse=True) and report["judges"][0]["human_width"] > 0
    with pytest.raises(InputError, match="labels"):
        human_power(labels=600, transcripts=480, baseline_rate=0.8)


# -- calibrate on a table ---------------------------------------------------------------------------------


def _world(rng, cases: int = 80, judges=(("lenient", 0.6, 0.95), ("harsh", 0.95, 0.6))):
    """Verdicts of 2 users (rollout axis) x 2 judges x 2 systems, and the true labels per transcript."""
    rows, truth = [], {}
    for user in ("coop", "adv"):
        for system, p in (("atlas", 0.8), ("beacon", 0.6)):
            y = (rng.random(cases) < (p - (0.1 if user == "adv" else 0))).astype(int)
            for i in range(cases):
                truth[f"{user}-{system}-{i}"] = y[i]
            for judge, se, sp in judges:
                f = _judge(y, se, sp, rng)
                for i in range(cases):
                    rows.append({"universe_id": f"{judge}-{user}", "judge": judge, "user": user, "system": system,
                                 "case_id": f"c{i:03d}", "behavior": "b" + str(i % 3), "replicate": 0,
                                 "transcript_key": f"{user}-{system}-{i}", "status": "ok", "reason": "",
                                 "compliant": bool(f[i])})
    frame = pd.DataFrame(rows)
    frame["compliant"] = frame["compliant"].astype("boolean")
    return frame, truth


def _sheet(verdicts, truth, n, rng):
    keys = verdicts.drop_duplicates("transcript_key")
    order = keys.assign(_r=rng.random(len(keys))).sort_values("_r")
    picked = order.groupby(["user", "system"], sort=False).head(n)
    return picked[["system", "case_id", "replicate", "transcript_key"]].assign(
        compliant=picked["transcript_key"].map(truth).to_numpy())


def test_calibrate_matches_ppi_python_per_cell(rng):
    verdicts, truth = _world(rng)
    human = _sheet(verdicts, truth, 20, rng)
    failed = verdicts.index[verdicts.transcript_key.eq(human["transcript_key"].iloc[0])][0]
    verdicts.loc[failed, ["status", "compliant"]] = ["judge_failed", pd.NA]
    rates, judges, notes, _ = calibrate(verdicts, human, ["judge", "user"], ["behavior"], alpha=0.1)
    assert list(rates.columns) == ["universe_id", "judge", "user", "system", "n", "n_human", "judge_rate", "rate",
                                   "ci_low", "ci_high", "human_rate", "human_ci_low", "human_ci_high",
                                   "anchored_wider"]
    assert len(rates) == 8 and len(judges) == 4
    labels = dict(zip(human["transcript_key"], human["compliant"]))
    for row in rates.itertuples():
        cell = verdicts[(verdicts.universe_id == row.universe_id) & (verdicts.system == row.system)
                        & verdicts.status.eq("ok")]
        mask = cell.transcript_key.isin(labels).to_numpy()
        f = cell.compliant.astype(float).to_numpy()
        y = cell.transcript_key[mask].map(labels).astype(float).to_numpy()
        assert row.rate == pytest.approx(float(np.squeeze(ppi_mean_pointestimate(y, f[mask], f[~mask]))), abs=1e-9)
        # one transcript per case: the score interval of these transcripts, unclustered
        alone = ppi_mean(y, f[mask], f[~mask], alpha=0.1)
        assert (row.ci_low, row.ci_high) == pytest.approx((alone.ci_low, alone.ci_high), abs=1e-9)
        assert row.anchored_wider == (row.ci_high - row.ci_low > row.human_ci_high - row.human_ci_low + 1e-12)
        assert row.n == len(cell) and row.n_human == mask.sum() and row.judge_rate == pytest.approx(f.mean())
        assert row.human_rate == pytest.approx(y.mean()) and row.human_ci_low < row.human_rate < row.human_ci_high
    assert any("no ok verdict" in n for n in notes)
    harsh = judges[judges.judge == "harsh"].iloc[0]
    cell = verdicts[(verdicts.universe_id == harsh.universe_id) & verdicts.transcript_key.isin(labels)
                    & verdicts.status.eq("ok")]
    y = cell.transcript_key.map(labels).to_numpy()
    f = cell.compliant.astype(bool).to_numpy()
    assert harsh.n_human == len(cell)
    assert harsh.sensitivity == pytest.approx(np.mean(~f[y == 0]))
    assert harsh.specificity == pytest.approx(np.mean(f[y == 1]))
    assert harsh.sensitivity_ci[0] < harsh.sensitivity <= harsh.sensitivity_ci[1]
    document = json.loads(json.dumps(calibration_document(calibrate(verdicts, human, ["judge", "user"]), 0.1)))
    assert set(document) == {"alpha", "rates", "judges", "labelled", "notes"} and len(document["judges"][0]["sensitivity_ci"]) == 2


def test_anchoring_brings_biased_judges_together(rng):
    # The lenient and the harsh judge disagree by far more than their intervals; anchored, they agree.
    verdicts, truth = _world(np.random.default_rng(11), cases=300)
    human = _sheet(verdicts, truth, 60, np.random.default_rng(12))
    rates = calibrate(verdicts, human, ["judge", "user"]).rates.set_index(["user", "system", "judge"])
    for user in ("coop", "adv"):
        for system in ("atlas", "beacon"):
            a, b = rates.loc[(user, system, "lenient")], rates.loc[(user, system, "harsh")]
            assert a.judge_rate - b.judge_rate > 0.2
            assert abs(a.rate - b.rate) < 0.1
            assert a.ci_high - a.ci_low < a.human_ci_high - a.human_ci_low


def test_rollout_configurations_follow_shared_transcripts(rng):
    verdicts, _ = _world(rng, cases=12)
    groups = rollout_configurations(verdicts)
    assert groups["lenient-coop"] == groups["harsh-coop"] != groups["lenient-adv"] == groups["harsh-adv"]
    # a grader that skipped items still shares the rest: same configuration
    skipped = verdicts.drop(verdicts.index[(verdicts.universe_id == "harsh-coop") & (verdicts.case_id == "c003")])
    again = rollout_configurations(skipped)
    assert again["harsh-coop"] == again["lenient-coop"] and again.nunique() == 2


def test_labels_without_transcript_key_match_on_case_when_unambiguous(rng):
    verdicts, truth = _world(rng, cases=30)
    only_coop = verdicts[verdicts.user == "coop"]
    human = _sheet(only_coop, truth, 12, rng).drop(columns=["transcript_key"])
    human["compliant"] = human["compliant"].map({1: "true", 0: "False"})
    rates = calibrate(only_coop, human, ["judge"]).rates
    assert (rates.n_human == 12).all()
    with pytest.raises(InputError, match=r"names 2 transcripts.*transcript_key"):
        calibrate(verdicts, human, ["judge", "user"])


@pytest.mark.parametrize("change,message", [
    (lambda h: h.assign(compliant=h["compliant"].astype(object).where(h.index != h.index[3], "maybe")),
     r"labels.csv: row 5: compliant: expected 0/1, true/false or yes/no, got 'maybe'"),
    (lambda h: h.assign(compliant=h["compliant"].where(h.index != h.index[0], 2)), "row 2: compliant: .*got '2'"),
    (lambda h: h.assign(transcript_key=h["transcript_key"].where(h.index != h.index[5], "nope")),
     r"row 7: transcript_key 'nope' is not a transcript of the run"),
    (lambda h: h.drop(columns="transcript_key").assign(case_id=h["case_id"].where(h.index != h.index[0], "zzz")),
     r"row 2: system=\w+, case_id=zzz, replicate=0 is not a transcript of the run"),
    (lambda h: h.assign(system=h["system"].where(h.index != h.index[0], "beacon" if h["system"].iloc[0] == "atlas"
                                                 else "atlas")), "belongs to system"),
    (lambda h: h.iloc[3:], rf"system \w+: {MIN_LABELS - 3} labels .* expected at least {MIN_LABELS}"),
    (lambda h: pd.concat([h, h.iloc[:1]]), "labelled 2 times"),
])
def test_refusals_name_the_file_and_the_field(rng, change, message):
    verdicts, truth = _world(rng, cases=30)
    verdicts = verdicts[verdicts.user == "coop"]
    human = _sheet(verdicts, truth, MIN_LABELS, rng).sort_values("system", kind="stable").reset_index(drop=True)
    with pytest.raises(InputError, match=message) as caught:
        calibrate(verdicts, change(human), ["judge"], source="labels.csv")
    assert "\n" not in str(caught.value) and caught.value.param == "human"


def test_blank_labels_are_left_out_with_a_note(rng, tmp_path):
    verdicts, truth = _world(rng, cases=30)
    verdicts = verdicts[verdicts.user == "coop"]
    human = _sheet(verdicts, truth, 14, rng)
    human["compliant"] = human["compliant"].astype(object)
    human.iloc[:2, human.columns.get_loc("compliant")] = None
    path = tmp_path / "labels.csv"
    human.to_csv(path, index=False)
    rates, _, notes, _ = calibrate(verdicts, read_labels(path), ["judge"], source=str(path))
    assert set(rates.n_human) <= {12, 13, 14} and any("2 rows" in n for n in notes)
    human.iloc[5, human.columns.get_loc("transcript_key")] = "nope"  # file row 7, after the two blank ones
    with pytest.raises(InputError, match="row 7: transcript_key 'nope'"):
        calibrate(verdicts, human, ["judge"])
    (tmp_path / "bad.csv").write_text("system,case\natlas,c1\n")
    with pytest.raises(InputError, match=r"bad\.csv: missing column.*case_id"):
        read_labels(tmp_path / "bad.csv")


def test_tables_without_universe_ids_get_the_derived_ones(rng):
    verdicts, truth = _world(rng, cases=20)
    human = _sheet(verdicts, truth, 10, rng)
    with_ids = calibrate(verdicts, human, ["judge", "user"]).rates
    derived = calibrate(verdicts.drop(columns="universe_id"), human, ["judge", "user"]).rates
    assert derived["universe_id"].nunique() == 4 and not set(derived["universe_id"]) & set(with_ids["universe_id"])
    assert derived.drop(columns="universe_id").equals(with_ids.drop(columns="universe_id"))
    with pytest.raises(InputError, match=r"verdicts: missing column.*compliant"):
        calibrate(verdicts.drop(columns="compliant"), human, ["judge", "user"])


def test_alpha_is_checked(rng):
    verdicts, truth = _world(rng, cases=12)
    with pytest.raises(InputError, match="alpha") as caught:
        calibrate(verdicts, _sheet(verdicts, truth, 10, rng), ["judge", "user"], alpha=1.5)
    assert caught.value.param == "alpha"


# -- downstream views ------------------------------------------------------------------------------------


def test_anchored_curve_draws_beside_the_raw_one(rng):
    from multiverse.analysis import anchored_curve
    from multiverse.plots import plot_curve

    verdicts, truth = _world(rng, cases=60)
    calibration = calibrate(verdicts, _sheet(verdicts, truth, 20, rng), ["judge", "user"])
    curve = anchored_curve(calibration, ["judge", "user"], primary="lenient-coop")
    raw = anchored_curve(calibration, ["judge", "user"], primary="lenient-coop", raw=True)
    assert len(curve) == len(raw) == 8 and curve["is_primary"].sum() == 2
    for frame in (curve, raw):
        for _, part in frame.groupby("system"):
            assert part["position"].tolist() == list(range(1, len(part) + 1))
            assert part["rate"].is_monotonic_increasing
    assert (curve["n"] == 20).all() and (raw["n"] == 60).all()
    assert set(curve["rate"]) == set(calibration.rates["rate"]) and set(raw["rate"]) == set(calibration.rates["judge_rate"])
    fig = plot_curve(curve, axes=["judge", "user"], system="atlas")
    assert len(fig.axes) == 2

    from multiverse.analysis import paired_curves, spec_curve
    from multiverse.plots import plot_curves

    judge_curve = spec_curve(verdicts, axes=["judge", "user"])
    paired = paired_curves(judge_curve, curve)
    assert list(dict.fromkeys(paired["system"])) == ["atlas · judge alone", "atlas · anchored to people",
                                                      "beacon · judge alone", "beacon · anchored to people"]
    left = paired[paired["system"] == "atlas · judge alone"]
    assert left["position"].tolist() == [1, 2, 3, 4] and left["rate"].is_monotonic_increasing
    assert (left["ci_low"] < left["rate"]).all()  # the judge's own intervals
    fig = plot_curves(paired, axes=["judge", "user"], col_wrap=2)
    assert sum(1 for ax in fig.axes if ax.get_title(loc="left")) == 4


def test_ranking_change_reports_flipped_tops():
    from multiverse.analysis import ranking_change

    rates = pd.DataFrame({
        "universe_id": ["u1", "u1", "u2", "u2"], "system": ["a", "b", "a", "b"],
        "judge_rate": [0.9, 0.5, 0.6, 0.7], "rate": [0.8, 0.6, 0.8, 0.5],
        "ci_low": [0.7, 0.5, 0.65, 0.4], "ci_high": [0.9, 0.68, 0.95, 0.6],
    })
    change = ranking_change(rates, primary="u2")
    first, second = change["universes"]
    assert first["same_top"] and first["anchored_top_separable"]
    assert not second["same_top"] and second["judge_order"] == ["b", "a"] and second["anchored_order"] == ["a", "b"]
    assert change["same_top"] == 0.5 and change["primary"] == second


def test_calibration_figure_draws_every_universe_and_names_verbatim(rng, tmp_path):
    from multiverse.plots import plot_calibration

    verdicts, truth = _world(rng, cases=40)
    verdicts["system"] = verdicts["system"].replace({"beacon": "$x^2$ {beacon}"})
    human = _sheet(verdicts, truth, 15, rng)
    calibration = calibrate(verdicts, human, ["judge", "user"])
    raw = (verdicts.assign(rate=verdicts.compliant.astype(float)).groupby(["universe_id", "system"], as_index=False)
           .rate.mean().assign(subgroup="all", ci_low=lambda f: f.rate - 0.05, ci_high=lambda f: f.rate + 0.05))
    for kwargs in ({}, {"raw": raw, "primary": "harsh-adv"}):
        fig = plot_calibration(calibration, ["judge", "user"], **kwargs)
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert [ax.get_title() for ax in panels] == ["atlas", r"\$x^2\$ {beacon}"]
        ticks = [t.get_text() for t in panels[0].get_yticklabels()]
        assert len(ticks) == 4 and ("★ harsh · adv" in ticks) == bool(kwargs)
        fig.savefig(tmp_path / "calibration.png")
        assert (tmp_path / "calibration.png").stat().st_size > 10_000


def _replicated_world(rng, cases=100, replicates=3, judge=(0.5, 0.5)):
    """One universe, systems 'mixed' (a case effect, rate about 0.7) and 'clean' (every label compliant)."""
    rows, truth = [], {}
    for system in ("mixed", "clean"):
        q = rng.beta(0.7 * 0.25 / 0.75, 0.3 * 0.25 / 0.75, size=cases) if system == "mixed" else np.ones(cases)
        for c in range(cases):
            for r in range(replicates):
                y = int(rng.random() < q[c])
                f = _judge(np.array([y]), *judge, rng)[0]
                key = f"{system}-{c}-{r}"
                truth[key] = y
                rows.append({"universe_id": "u", "judge": "j", "system": system, "case_id": f"c{c:03d}",
                             "replicate": r, "transcript_key": key, "status": "ok", "compliant": bool(f)})
    return pd.DataFrame(rows).astype({"compliant": "boolean"}), truth


def test_calibrate_clusters_replicates_and_says_when_labels_alone_are_better(rng):
    verdicts, truth = _replicated_world(np.random.default_rng(5))
    picked = verdicts.sample(frac=1, random_state=6).groupby("system").head(60)
    human = picked[["system", "case_id", "replicate", "transcript_key"]].assign(
        compliant=picked["transcript_key"].map(truth).to_numpy())
    rates, _, notes, _ = calibrate(verdicts, human, ["judge"])
    rates = rates.set_index("system")
    assert (rates["ci_high"] - rates["ci_low"] > 0).all()
    # 'clean': every label compliant, lambda 0: the humans' Wilson interval, widened for labels sharing a case
    clean = rates.loc["clean"]
    assert clean.rate == 1.0 and clean.ci_high == 1.0 and clean.ci_low <= clean.human_ci_low < 1.0
    # 'mixed': the same transcripts as if independent give a narrower interval than the case-clustered one
    cell = verdicts[verdicts.system == "mixed"]
    mask = cell.transcript_key.isin(human.transcript_key).to_numpy()
    f = cell.compliant.astype(float).to_numpy()
    alone = ppi_mean(cell.transcript_key[mask].map(truth).to_numpy(float), f[mask], f[~mask])
    mixed = rates.loc["mixed"]
    assert mixed.rate == pytest.approx(alone.rate)
    assert mixed.ci_low <= alone.ci_low and mixed.ci_high >= alone.ci_high
    assert mixed.ci_high - mixed.ci_low > (alone.ci_high - alone.ci_low) * 1.02
    # a judge that guesses adds nothing: the anchored interval is the wider one, and the output says so
    assert mixed.anchored_wider and bool(rates["anchored_wider"].sum()) and any("humans-only" in n for n in notes)
    document = json.loads(json.dumps(calibration_document(calibrate(verdicts, human, ["judge"]), 0.05)))
    assert {r["system"]: r["anchored_wider"] for r in document["rates"]}["mixed"] is True


def test_calibrate_clusters_each_cell_on_its_own_transcripts():
    # Two judges x two systems with replicates: each cell's interval is the one computed from that cell alone.
    from multiverse.analysis.anchoring._ppi import design_effects, ppi_binary, ppi_lambda

    rng = np.random.default_rng(9)
    good, truth = _replicated_world(rng, cases=60, judge=(0.9, 0.9))
    other = good.assign(universe_id="v", judge="k",
                        compliant=pd.array(_judge(good["transcript_key"].map(truth).to_numpy(), 0.7, 0.95, rng) > 0,
                                           dtype="boolean"))
    verdicts = pd.concat([good, other], ignore_index=True)
    picked = good.sample(frac=1, random_state=2).groupby("system").head(40)
    human = picked[["system", "transcript_key", "case_id"]].assign(compliant=picked["transcript_key"].map(truth).to_numpy())
    rates = calibrate(verdicts, human, ["judge"]).rates
    assert len(rates) == 4
    for row in rates.itertuples():
        cell = verdicts[(verdicts.universe_id == row.universe_id) & (verdicts.system == row.system)]
        labelled = cell.transcript_key.isin(human.transcript_key).to_numpy()
        y = cell.transcript_key.map(truth).to_numpy(float) * labelled
        f = cell.compliant.astype(float).to_numpy()
        sums = tuple(np.array([x], float) for x in (labelled.sum(), y.sum(), (f * labelled).sum(), (y * f).sum(),
                                                     (~labelled).sum(), (f * ~labelled).sum()))
        deff = design_effects(np.zeros(len(cell), int), pd.factorize(cell.case_id)[0], labelled, y, f,
                              ppi_lambda(*sums), sums[0], sums[4], sums[1], sums[2], sums[5])
        _, low, high, _ = ppi_binary(*sums, 0.05, deff)
        assert (row.ci_low, row.ci_high) == pytest.approx((low[0], high[0]), abs=1e-9), row
        assert deff[0] >= 1.0 and row.ci_high > row.ci_low
