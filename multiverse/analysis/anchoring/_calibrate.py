"""Human-anchored rates: a few human labels correct every judge (prediction-powered inference).

A team labels a uniform random sample of transcripts by hand. In each
universe x system, the judge's verdicts on *all* its transcripts and the
humans' labels on the sample combine into PPI++ (Angelopoulos, Duchi & Zrnic
2023, arXiv:2311.01453; PPI: Angelopoulos et al., Science 2023) with the
power-tuned lambda::

    rate = lambda * mean(f over the unlabelled) + mean(Y - lambda * f over the labelled)

``Y`` is the human label (1 = compliant), ``f`` the judge's verdict. The
estimate targets the human-level rate whatever the judge's bias. It is
ppi-python's ``ppi_mean_pointestimate`` (lambda tuned, clipped to [0, 1]),
reimplemented because that package pulls in numba and scikit-learn;
``ppi_mean_batch`` is also its ``ppi_mean_ci``, and the tests check both to
1e-9. That normal interval is not what ``calibrate`` reports: with a few
dozen labels and rare violations it under-covers and can be a point, so the
interval is the score interval of ``multiverse.analysis.anchoring``,
clustered by case when cases have replicates. The labelled and unlabelled
sets are disjoint, as PPI assumes: the unlabelled set is every judged
transcript of the cell that nobody labelled.

Where ppi-python returns NaN or divides by zero we take lambda = 0: a judge
constant over the cell (every lambda then gives the same estimate), and a
cell labelled in full (N = 0, where PPI is the humans-only mean).
``calibrate`` clips the rate to [0, 1].

A scored run (``judge.scale`` ordinal or continuous) is anchored to human
scores on the judge's scale, each universe reading them through its own
estimator: a mean by ``ppi_interval.ppi_bounded_mean``, a share at a cut by
the same 0/1 PPI++ as here (``anchored_scores``). Reading and matching the
labels file is ``anchored_labels``.

Only ``ok`` verdicts carry a judge label, so in each universe the estimate
is the human rate among the transcripts its judge rated; labelled transcripts
that universe excluded or failed are left out of it, and a note counts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import special

from multiverse.core import COUNTED_STATUS
from multiverse.errors import InputError

from .._kernel import contributions, wilson
from ._labels import labels_by_key, read_labels, transcript_keys
from ._ppi import design_effects, ppi_binary, ppi_bounded_mean, ppi_lambda
from ._scores import check_anchorable, human_contributions, mean_agreement, native

if TYPE_CHECKING:
    from multiverse.tables import ScaleRecord

__all__ = [
    "MIN_LABELS",
    "Calibration",
    "PPIEstimate",
    "calibrate",
    "calibration_document",
    "ppi_binary",
    "ppi_mean",
    "ppi_mean_batch",
    "read_labels",
    "rollout_configurations",
    "transcript_keys",
]

#: Fewer human labels than this for a system (in one rollout configuration) are refused.
MIN_LABELS = 10


class PPIEstimate(NamedTuple):
    rate: float
    ci_low: float
    ci_high: float
    lam: float


class Calibration(NamedTuple):
    """What ``calibrate`` returns: per universe x system rates, per universe judge accuracy, notes, and the labels used.

    ``labelled``: one row per labelled transcript of the run (transcript_key,
    system, rollout: its rollout configuration, 0, 1, ...), each counted once
    however many universes share it.
    """

    rates: pd.DataFrame
    judges: pd.DataFrame
    notes: list[str]
    labelled: pd.DataFrame


def ppi_mean_batch(labels: np.ndarray, predictions: np.ndarray, unlabelled: np.ndarray,
                   alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ppi-python's PPI++ mean and its normal interval, for many problems at once: arrays (problems, n), (problems, N).

    Returns (rate, ci_low, ci_high, lam), each of shape (problems,). Any
    real-valued labels; the reference the anchored estimate is checked
    against. For 0/1 labels ``ppi_mean`` gives the interval that holds with
    few labels.
    """
    y = np.asarray(labels, float)
    f = np.asarray(predictions, float)
    u = np.asarray(unlabelled, float)
    n, big_n = y.shape[-1], u.shape[-1]
    if n < 1:
        raise InputError("ppi: expected at least one labelled transcript", param="human")
    # lambda* = Cov(Y, f) / ((1 + n/N) Var(f)): ppi-python's _calc_lam_glm for a mean, with its
    # 1/n covariance over the labelled set and ddof=1 variance over labelled + unlabelled predictions.
    cov = ((y - y.mean(-1, keepdims=True)) * (f - f.mean(-1, keepdims=True))).mean(-1)
    var_f = np.var(np.concatenate([f, u], axis=-1), axis=-1, ddof=1) if n + big_n > 1 else np.zeros(y.shape[:-1])
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = cov / ((1.0 + n / big_n) * var_f) if big_n > 0 else np.zeros(y.shape[:-1])
    lam = np.clip(np.where(np.isfinite(lam), lam, 0.0), 0.0, 1.0)
    lam_ = lam[..., None]
    unlabelled_mean = (lam_ * u).mean(-1) if big_n else np.zeros(y.shape[:-1])
    rate = unlabelled_mean + (y - lam_ * f).mean(-1)
    imputed_var = (lam * u.std(-1)) ** 2 / big_n if big_n else np.zeros(y.shape[:-1])
    rectifier_var = (y - lam_ * f).std(-1) ** 2 / n
    half = special.ndtri(1 - alpha / 2) * np.sqrt(imputed_var + rectifier_var)
    return rate, rate - half, rate + half, lam


def ppi_mean(labels: Sequence[float], predictions: Sequence[float], unlabelled: Sequence[float],
             alpha: float = 0.05) -> PPIEstimate:
    """PPI++ estimate of a 0/1 rate and its two-sided (1 - alpha) score interval, lambda power-tuned.

    ``labels``: human labels (0/1) of the labelled transcripts;
    ``predictions``: the judge (0/1) on those same transcripts;
    ``unlabelled``: the judge on the rest. Transcripts independent (for
    replicates, ``calibrate`` clusters by case). The estimate is
    ppi-python's; the interval is ``ppi_interval.score_interval``.
    """
    y, f = np.asarray(labels, float), np.asarray(predictions, float)
    u = np.asarray(unlabelled, float).reshape(-1)
    if y.shape != f.shape or y.ndim != 1:
        raise InputError("ppi: labels and predictions must be 1-d and of the same length", param="predictions")
    if len(y) < 1:
        raise InputError("ppi: expected at least one labelled transcript", param="human")
    for name, x in (("labels", y), ("predictions", f), ("unlabelled", u)):
        if not np.isin(x, (0.0, 1.0)).all():
            raise InputError(f"ppi: {name}: expected 0/1 values", param=name)
    sums = (np.array([len(y)], float), np.array([y.sum()]), np.array([f.sum()]), np.array([(y * f).sum()]),
            np.array([len(u)], float), np.array([u.sum()]))
    rate, low, high, lam = ppi_binary(*sums, alpha)
    return PPIEstimate(float(rate[0]), float(low[0]), float(high[0]), float(lam[0]))


# -- matching labels to a run ---------------------------------------------------------------------------


def rollout_configurations(verdicts: pd.DataFrame) -> pd.Series:
    """A rollout-configuration id per universe: universes linked by shared transcripts share an id.

    Judge, evidence and scoring axes leave the transcripts alone, so their
    universes fall together; a rollout axis (setting, user...) splits them.
    Universes that share only some transcripts (an import where one grader
    skipped items) still fall together: the groups are the connected
    components of universes and the transcripts they hold. Indexed by
    universe id, ids numbered 0, 1, ... in order of first appearance.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    u_codes, universes = pd.factorize(verdicts["universe_id"].astype(str))
    k_codes, keys = pd.factorize(transcript_keys(verdicts))
    size = len(universes) + len(keys)
    graph = coo_matrix((np.ones(len(u_codes)), (u_codes, len(universes) + k_codes)), shape=(size, size))
    _, component = connected_components(graph, directed=False)
    first = pd.factorize(component[: len(universes)])[0]  # renumbered in order of first appearance
    return pd.Series(first, index=pd.Index(universes, name="universe_id"), name="rollout")


def _with_universes(verdicts: pd.DataFrame, axes: Sequence[str]) -> pd.DataFrame:
    """``verdicts`` with a transcript key per row and universe ids (derived from the axes when absent)."""
    from multiverse.tables import universe_ids

    missing = [c for c in ("system", "case_id", "compliant") if c not in verdicts.columns]
    if missing:
        raise InputError(f"verdicts: missing column(s) {', '.join(missing)}; expected a verdicts table",
                         param="verdicts")
    return verdicts.assign(_key=transcript_keys(verdicts), universe_id=universe_ids(verdicts, list(axes)))


# -- calibration -----------------------------------------------------------------------------------------


def calibrate(verdicts: pd.DataFrame, human: pd.DataFrame, axes: Sequence[str], factors: Sequence[str] = (),
              alpha: float = 0.05, *, source: str = "human labels", scale: ScaleRecord | None = None,
              scoring: pd.DataFrame | None = None) -> Calibration:
    """Anchor every universe x system rate to the human labels in ``human``.

    ``human`` has ``system``, ``case_id``, ``compliant`` (0/1 or true/false;
    blank = not labelled yet) and, when those two do not name one transcript,
    ``replicate`` or ``transcript_key``. ``source`` names it in messages.
    Refuses (InputError) labels for transcripts not in the run, fewer than
    ``MIN_LABELS`` labels for a system in some rollout configuration, and
    labels that are not binary. For a scored run (``scale`` ordinal or
    continuous, ``scoring`` each universe's estimator and cut, as
    ``Results.scoring_choices``) people give a ``score`` on the judge's scale
    instead, and each universe reads it as its estimator reads the judge's
    (``analysis.anchored_scores``); a pairwise scale or a win rate is refused.

    ``rates``: universe_id, axes, system, n, n_human, judge_rate, rate, ci_low,
    ci_high, human_rate, human_ci_low, human_ci_high, anchored_wider (PPI++
    rate and its score interval, clustered by case where cases have
    replicates; the humans-only rate with its Wilson interval; whether the
    anchored interval is the wider of the two, with a note counting those);
    a scored run adds estimator and the means in the scale's units
    (``anchored_scores.native``). ``judges``: universe_id,
    axes, n_human, sensitivity, sensitivity_ci, specificity, specificity_ci,
    accuracy, accuracy_ci, kappa: how often the universe's judge calls a
    violation that people call one, compliance that people call compliance,
    and any label as people do, and Cohen's kappa against people (Wilson
    intervals, pooled over systems: ``Results.calibrate(by="system")`` gives
    them per system), intervals as (low, high) or None; a scored run adds
    mean_difference and correlation for the universes of a mean.
    """
    if not 0.0 < alpha < 1.0 or not math.isfinite(alpha):
        raise InputError(f"alpha: expected a number between 0 and 1, got {alpha}", param="alpha")
    del factors  # design factors vary inside a universe: the anchored rate is over all of them
    scored = scale if scale is not None and scale.scored else None
    if scored is not None:
        check_anchorable(scored, scoring, source)
    notes: list[str] = []
    axes = [a for a in axes if a in verdicts.columns]
    v = _with_universes(verdicts, axes)
    labels = labels_by_key(v, human, source, notes, scored)
    labelled_transcripts = _enough_labels(v, labels, source)

    status_ok = v["status"].eq(COUNTED_STATUS) if "status" in v.columns else pd.Series(True, index=v.index)
    human_value = v["_key"].map(labels).to_numpy(float)
    if scored is not None:
        judge_value = contributions(v, scored, scoring)
        human_value, means = human_contributions(v, human_value, scored, scoring)
    else:
        judge_value, means = v["compliant"].astype("boolean").to_numpy(dtype=float, na_value=np.nan), np.zeros(len(v), bool)
    rated = status_ok.to_numpy() & ~np.isnan(judge_value)
    judged = v[rated].assign(_f=judge_value[rated], _y=human_value[rated], _mean=means[rated])
    dropped = v[~status_ok & v["_key"].isin(labels.index)]
    if len(dropped):
        notes.append(f"{len(dropped)} labelled (universe, transcript) pairs have no ok verdict (excluded or failed) and "
                     "are left out of those universes' anchored rates, which are over the transcripts the judge rated")

    level = 1 - alpha
    options = v.drop_duplicates("universe_id").set_index("universe_id")[axes]
    labelled = judged["_y"].notna()
    sums, cells = _anchored_cells(judged, labelled, alpha)
    n_l = sums["n_human"].to_numpy(float)
    enough = n_l >= 2
    for universe, system, count in sums.loc[~enough, ["universe_id", "system", "n_human"]].itertuples(index=False):
        notes.append(f"universe {universe}, system {system}: {int(count)} labelled transcripts with an ok verdict; "
                     "no anchored rate")
    rates = pd.concat([sums[["universe_id"]], options.loc[sums["universe_id"]].reset_index(drop=True),
                       sums[["system", "n", "n_human"]]], axis=1)
    rates["judge_rate"] = sums["sf"] / sums["n"]
    for column, values in cells.items():
        values = np.clip(values, 0.0, 1.0) if column in ("rate", "ci_low", "ci_high") else values
        rates[column] = np.where(enough, values, np.nan)
    # Where the judge adds less than its lambda's noise costs, the labels alone give the narrower interval.
    rates["anchored_wider"] = enough & ((rates["ci_high"] - rates["ci_low"])
                                        > (rates["human_ci_high"] - rates["human_ci_low"]) + 1e-12).to_numpy()
    wider = int(rates["anchored_wider"].sum())
    if wider:
        notes.append(f"in {wider} of {int(enough.sum())} universe x system cells the anchored interval is wider than "
                     "the humans-only one (anchored_wider): there the judge does not help, and the humans-only rate "
                     "is the better one to quote")
    if scored is not None:
        estimator = scoring.drop_duplicates("universe_id").set_index("universe_id")["estimator"] \
            if scoring is not None else pd.Series(dtype=object)
        rates.insert(rates.columns.get_loc("n"), "estimator",
                     estimator.reindex(rates["universe_id"].astype(str)).to_numpy(dtype=object))
        rates = native(rates, scored, sums["_mean"].to_numpy(bool))
    judges = _judges(judged[labelled], options, level, notes, scored)
    return Calibration(rates, judges, notes, labelled_transcripts)


def _enough_labels(v: pd.DataFrame, labels: pd.Series, source: str) -> pd.DataFrame:
    """Refuse fewer than ``MIN_LABELS`` labels for a system in some rollout configuration; the labelled transcripts."""
    rollout = rollout_configurations(v)
    first = v.assign(_rollout=v["universe_id"].map(rollout)).drop_duplicates("_key")
    labelled = first[first["_key"].isin(labels.index)]
    counts = labelled.groupby(["_rollout", "system"]).size()
    for cell in first.groupby(["_rollout", "system"]).size().index:
        if counts.get(cell, 0) < MIN_LABELS:
            universe = rollout.index[rollout.eq(cell[0])][0]
            raise InputError(f"{source}: system {cell[1]}: {int(counts.get(cell, 0))} labels for the transcripts of "
                             f"universe {universe} (and those sharing its transcripts); expected at least {MIN_LABELS}",
                             param="human")
    return pd.DataFrame({"transcript_key": labelled["_key"].to_numpy(), "system": labelled["system"].to_numpy(),
                         "rollout": labelled["_rollout"].to_numpy(int)})


def _anchored_cells(judged: pd.DataFrame, labelled: pd.Series, alpha: float) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per universe x system sums, and the anchored and humans-only rates with their intervals.

    A share (0/1 values) takes ``ppi_binary`` and Wilson; a mean of rescaled
    scores takes ``ppi_bounded_mean`` and its humans-only form.
    """
    y = judged["_y"].fillna(0.0)
    f = judged["_f"]
    sums = pd.DataFrame({
        "universe_id": judged["universe_id"], "system": judged["system"], "n": 1, "n_human": labelled.astype(int),
        "sy": y, "syy": y * y, "sf": f, "sfl": f * labelled, "sffl": f * f * labelled, "sff": f * f, "syf": y * f,
        "_mean": judged["_mean"],
    }).groupby(["universe_id", "system"], sort=False).agg(
        {**{c: "sum" for c in ("n", "n_human", "sy", "syy", "sf", "sfl", "sffl", "sff", "syf")}, "_mean": "any"}
    ).reset_index()
    n_l = sums["n_human"].to_numpy(float)
    big_n = sums["n"].to_numpy(float) - n_l
    sy, sfl, syf = (sums[c].to_numpy(float) for c in ("sy", "sfl", "syf"))
    sfu = sums["sf"].to_numpy(float) - sfl
    moments = (n_l, sy, sfl, syf, big_n, sfu)
    means = sums["_mean"].to_numpy(bool)
    # lambda for the design effect: a mean's verdicts are not 0/1, so their squares are summed, not their values.
    lam = ppi_lambda(*moments, np.where(means, sums["sff"].to_numpy(float), sums["sf"].to_numpy(float)))
    deff = _design_effects(judged, labelled, sums, moments, lam)
    level = 1 - alpha
    rate, low, high, _ = ppi_binary(*moments, alpha, deff)
    with np.errstate(divide="ignore", invalid="ignore"):
        human_rate = sy / n_l
    human_low, human_high = wilson(human_rate, n_l, level)
    if means.any():
        second = (n_l, sy, sums["syy"].to_numpy(float), sfl, sums["sffl"].to_numpy(float), syf, big_n, sfu,
                  (sums["sff"] - sums["sffl"]).to_numpy(float))
        m_rate, m_low, m_high, _ = ppi_bounded_mean(*second, alpha, deff)
        _, h_low, h_high, _ = ppi_bounded_mean(*second, alpha, judge=False)
        rate, low, high = (np.where(means, a, b) for a, b in ((m_rate, rate), (m_low, low), (m_high, high)))
        human_low, human_high = np.where(means, h_low, human_low), np.where(means, h_high, human_high)
    return sums, {"rate": rate, "ci_low": low, "ci_high": high, "human_rate": human_rate,
                  "human_ci_low": human_low, "human_ci_high": human_high}


def _judges(people: pd.DataFrame, options: pd.DataFrame, level: float, notes: list[str],
            scored: ScaleRecord | None) -> pd.DataFrame:
    """Each universe's judge against the labelled transcripts: sensitivity and specificity of a share's 0/1 values.

    A universe of a mean has no violations to catch: it gets None there, and
    (in a scored run) ``mean_difference`` and ``correlation`` instead.
    """
    shares = people[~people["_mean"]]
    # Sensitivity: violations people found that the judge flags too; specificity: compliance it confirms.
    agree = pd.DataFrame({
        "universe_id": people["universe_id"], "n_human": 1,
        "violations": shares["_y"].eq(0).astype(int), "caught": (shares["_y"].eq(0) & shares["_f"].eq(0)).astype(int),
        "compliant": shares["_y"].eq(1).astype(int), "confirmed": (shares["_y"].eq(1) & shares["_f"].eq(1)).astype(int),
    }).fillna(0).groupby("universe_id", sort=False).sum().reset_index()
    judges = pd.concat([agree[["universe_id"]], options.loc[agree["universe_id"]].reset_index(drop=True),
                        agree[["n_human"]]], axis=1)
    agree["labels"] = agree["violations"] + agree["compliant"]
    agree["agreed"] = agree["caught"] + agree["confirmed"]
    for name, hits, total in (("sensitivity", "caught", "violations"), ("specificity", "confirmed", "compliant"),
                              ("accuracy", "agreed", "labels")):
        share, interval = _shares(agree[hits].to_numpy(float), agree[total].to_numpy(float), level)
        judges[name], judges[f"{name}_ci"] = share, interval
    judges["kappa"] = _kappa(agree)
    mean_universes = set(people.loc[people["_mean"], "universe_id"])
    for universe in agree.loc[agree["violations"].eq(0), "universe_id"]:
        if universe not in mean_universes:
            notes.append(f"universe {universe}: people found no violation among its labelled transcripts; "
                         "sensitivity is undefined")
    if scored is not None:
        agreement = mean_agreement(people[people["_mean"]], scored).set_index("universe_id")
        judges["mean_difference"] = judges["universe_id"].map(agreement["mean_difference"]).astype(object)
        judges["correlation"] = judges["universe_id"].map(agreement["correlation"]).astype(object)
    return judges


def _kappa(agree: pd.DataFrame) -> list[float | None]:
    """Cohen's kappa of the judge's 0/1 against people's, per universe, from its 2 x 2 counts (None: undefined,
    no labels or one class on both sides)."""
    n = agree["labels"].to_numpy(float)
    judge_ok = (agree["confirmed"] + agree["violations"] - agree["caught"]).to_numpy(float)
    human_ok = agree["compliant"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = agree["agreed"].to_numpy(float) / n
        chance = (judge_ok * human_ok + (n - judge_ok) * (n - human_ok)) / n**2
        kappa = (observed - chance) / (1 - chance)
    return [float(k) if np.isfinite(k) else None for k in kappa]


def _design_effects(judged: pd.DataFrame, labelled: pd.Series, sums: pd.DataFrame, moments: tuple[Any, ...],
                    lam: np.ndarray) -> np.ndarray:
    """Each universe x system's design effect (``ppi_interval.design_effects``); 1 where no case has replicates."""
    cell = judged.groupby(["universe_id", "system"], sort=False).ngroup().to_numpy()  # the order of ``sums``
    case = pd.factorize(judged["case_id"].astype(str))[0]
    if not pd.Series(cell * (int(case.max(initial=0)) + 1) + case).duplicated().any():
        return np.ones(len(sums))
    n, sum_y, sum_f, _, big_n, sum_fu = moments
    return design_effects(cell, case, labelled.to_numpy(), judged["_y"].fillna(0.0).to_numpy(float),
                          judged["_f"].to_numpy(float), lam, n, big_n, sum_y, sum_f, sum_fu)


def _shares(hits: np.ndarray, total: np.ndarray, level: float) -> tuple[list[Any], list[Any]]:
    with np.errstate(divide="ignore", invalid="ignore"):
        share = hits / total
    low, high = wilson(share, total, level)
    return ([float(x) if t > 0 else None for x, t in zip(share, total)],
            [(float(lo), float(hi)) if t > 0 else None for lo, hi, t in zip(low, high, total)])


def calibration_document(calibration: Calibration, alpha: float) -> dict[str, Any]:
    """The JSON document of ``multiverse calibrate --json``: alpha, rates, judges, labelled, notes (undefined = null).

    ``labelled`` counts the labelled transcripts of the run, each once however
    many universes share it: ``transcripts``, ``rollout_configurations``,
    ``systems`` (per system, over configurations) and ``per_cell`` (the count
    per system and configuration when it is the same in all, else null).
    """

    def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
        out = []
        for record in frame.astype(object).to_dict("records"):
            out.append({k: (list(x) if isinstance(x, tuple) else _plain(x)) for k, x in record.items()})
        return out

    labelled = calibration.labelled
    cells = labelled.groupby(["rollout", "system"], sort=False).size()
    counted = {"transcripts": len(labelled), "rollout_configurations": int(labelled["rollout"].nunique()),
               "systems": {str(k): int(x) for k, x in labelled.groupby("system", sort=False).size().items()},
               "per_cell": int(cells.iloc[0]) if len(cells) and cells.nunique() == 1 else None}
    return {"alpha": alpha, "rates": records(calibration.rates), "judges": records(calibration.judges),
            "labelled": counted, "notes": list(calibration.notes)}


def _plain(x: Any) -> Any:
    if x is None or x is pd.NA:
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return None if not math.isfinite(float(x)) else float(x)
    return x
