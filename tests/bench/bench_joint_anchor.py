"""Benchmark: the joint tests against a plain numpy computation of the same output, at equal resamples.

Not collected by pytest (no test functions). Run from the repository root:

    python tests/bench/bench_joint_anchor.py --sizes 1000 10000 [--boot 1000] [--json]

For each size, ``scale_tables.write_grid`` writes a run folder (N universes x
5 systems x 120 cases, one label a case), ``multiverse.load_run`` reads it and
``Results.case_matrix()`` counts it. Then, for one system, the library's
``joint_rate_test`` and ``joint_difference_test`` run beside the anchors
below, each computing the same output (observed effects and z, the three
joint statistics of every null curve, their p-values and the 2.5/50/97.5%
band of the sorted null curves) from the same counts with the same number of
resamples, in the plainest vectorised numpy:

- rate: the same latent null (the dependence refitted on a case bootstrap of
  the probe universes for every draw, one case effect per case and draw,
  then every label), with float uniforms where the library compares 16-bit
  integers; the design effect is 1 (one label a case);
- difference: a matrix of random sign flips times the case contributions.

The anchors' random numbers differ from the library's, so their p-values
agree within Monte Carlo error, not exactly (printed beside each other).
The library draws the rate test's null as count histograms, not label by
label (``analysis/null_histograms.py``): where its universes saw different
cases and their cells pass a million, with the cases nested, a conservative
null the anchor does not share; so there the anchor is slower by design,
and its p-values may be the smaller.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from scipy import special

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_tables import write_grid  # noqa: E402  (beside this file, not a package)

import multiverse as mv  # noqa: E402
from multiverse.analysis import joint_difference_test, joint_rate_test  # noqa: E402
from multiverse.analysis.inference._rate_null import fit_latent_null  # noqa: E402

Z = special.ndtri(0.975)


def _statistics(effect: np.ndarray, z: np.ndarray, sign: float) -> np.ndarray:
    return np.column_stack([sign * np.median(effect, 1), (sign * z > Z).sum(1), sign * z.mean(1)])


def anchor_rate(n: np.ndarray, k: np.ndarray, t: float, boot: int, seed: int) -> dict:
    """The joint rate test's output, plainly (one label a case)."""
    model = fit_latent_null(n, k)
    rng = np.random.default_rng(seed)
    total = n.sum(1)
    effect = k.sum(1) / total - t
    z = effect / np.sqrt(t * (1 - t) / total)
    sign = np.sign(np.median(effect)) or 1.0
    observed = _statistics(effect[None], z[None], sign)[0]
    null, curves, step = [], [], max(1, 4_000_000 // n.size)
    for start in range(0, boot, step):
        size = min(step, boot - start)
        lam = model._lambdas(size, rng)[0][:, None, None]
        case = rng.standard_normal((size, 1, n.shape[1]))
        p = special.ndtr((special.ndtri(t) - np.sqrt(lam) * case) / np.sqrt(1 - lam))
        counts = ((rng.random((size, *n.shape)) < p) & (n > 0)).sum(2)
        null_effect = counts / total - t
        null.append(_statistics(null_effect, null_effect / np.sqrt(t * (1 - t) / total), sign))
        curves.append(np.sort(null_effect, 1))
    null_stats = np.concatenate(null)
    p_values = np.minimum(1, 2 * (1 + (null_stats >= observed - [1e-9, 0, 1e-9]).sum(0)) / (boot + 1))
    band = np.percentile(np.concatenate(curves), [2.5, 50, 97.5], axis=0) + t
    return {"p": p_values, "band": band}


def anchor_difference(d: np.ndarray, w: np.ndarray, boot: int, seed: int) -> dict:
    """The joint sign-flip test's output, plainly."""
    rng = np.random.default_rng(seed)
    c = (d != 0).any(0) | (w > 0).any(0)
    d, w = d[:, c], w[:, c]
    n_cases = (w > 0).sum(1)

    def z_of(diff, dw):
        var = n_cases / (n_cases - 1) * np.maximum((d * d).sum(1) - 2 * diff * dw + diff**2 * (w * w).sum(1), 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.clip(np.nan_to_num(diff / np.sqrt(var)), -50, 50)

    diff = d.sum(1)
    sign = np.sign(np.median(diff)) or 1.0
    observed = _statistics(diff[None], z_of(diff, (d * w).sum(1))[None], sign)[0]
    flips = rng.choice([1.0, -1.0], size=(boot, d.shape[1]))
    null_diff = flips @ d.T
    null_stats = _statistics(null_diff, z_of(null_diff, flips @ (d * w).T), sign)
    p_values = np.minimum(1, 2 * (1 + (null_stats >= observed - [1e-9, 0, 1e-9]).sum(0)) / (boot + 1))
    return {"p": p_values, "band": np.percentile(np.sort(null_diff, 1), [2.5, 50, 97.5], axis=0)}


def _timed(thunk):
    started = time.perf_counter()
    out = thunk()
    return out, time.perf_counter() - started


def one_size(folder: Path, size: int, boot: int) -> dict:
    if not (folder / "manifest.json").exists():
        write_grid(folder, size, grid="full")
    results = mv.load_run(folder)
    m = results.case_matrix()
    s, a, b = m.system_index("system_0"), m.system_index("system_4"), m.system_index("system_0")
    n, k = m.included[s], m.compliant[s]
    keep = n.sum(1) > 0
    n, k = n[keep][:, n.sum(0) > 0], k[keep][:, n.sum(0) > 0]
    t = 0.7
    ours_rate, ours_rate_s = _timed(lambda: joint_rate_test(m, system="system_0", threshold=t, boot=boot, seed=0))
    plain_rate, plain_rate_s = _timed(lambda: anchor_rate(n, k, t, boot, 0))
    from multiverse.analysis.cases import paired_cases as _paired

    ours_diff, ours_diff_s = _timed(lambda: joint_difference_test(m, a="system_4", b="system_0", boot=boot, seed=0))

    def plain_difference():
        pair = _paired(m, "system_4", "system_0")
        return anchor_difference(pair.contribution, pair.weight, boot, 0)

    plain_diff, plain_diff_s = _timed(plain_difference)
    del a, b
    return {
        "universes": int(keep.sum()), "cases": int(n.shape[1]), "boot": boot,
        "rate": {"library_s": round(ours_rate_s, 3), "numpy_s": round(plain_rate_s, 3),
                 "ratio": round(ours_rate_s / plain_rate_s, 2),
                 "p_library": [round(ours_rate.p[x], 4) for x in ("median_effect", "n_significant", "stouffer_z")],
                 "p_numpy": [round(float(x), 4) for x in plain_rate["p"]]},
        "difference": {"library_s": round(ours_diff_s, 3), "numpy_s": round(plain_diff_s, 3),
                       "ratio": round(ours_diff_s / plain_diff_s, 2),
                       "p_library": [round(ours_diff.p[x], 4) for x in ("median_effect", "n_significant", "stouffer_z")],
                       "p_numpy": [round(float(x), 4) for x in plain_diff["p"]]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--keep", type=Path, help="write the run folders here and keep them")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    document = {"command": " ".join(shlex.quote(a) for a in ["python", *sys.argv]),
                "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "load_average": round(os.getloadavg()[0], 2), "sizes": {}}
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-anchor-"))
    for size in args.sizes:
        document["sizes"][str(size)] = entry = one_size(base / f"full-{size}", size, args.boot)
        if not args.json:
            for kind in ("rate", "difference"):
                e = entry[kind]
                print(f"{size:,} universes, {kind} test, B={args.boot}: library {e['library_s']:.2f} s, plain numpy "
                      f"{e['numpy_s']:.2f} s ({e['ratio']:.2f}x); p library {e['p_library']}, numpy {e['p_numpy']}")
    if args.json:
        print(json.dumps(document, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
