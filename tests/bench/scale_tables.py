"""The scale benchmark's synthetic run tables, written chunk by chunk (bench_scale.py builds them).

A verdicts table has the columns a run writes: universe_id, the axes (setting,
user, judge, evidence, scoring, prompt, then temperature and seed as the grid
grows), system, case_id, two design factors (behavior, interaction_condition),
replicate, transcript_key, judgment_key, status, reason, compliant. Keys
follow the cache-key rules: a transcript depends on the system, the case, the
replicate and the rollout axes only; a judgment adds the judge axes; scoring
shares judgments. So agreement pairs on identical transcripts, as in a run.

The tables are generated a block of universes at a time and streamed to
parquet, so 100k universes (60M rows) take a few hundred MB to build, not the
tens of GB a whole frame of strings would. Nothing random depends on the
block: a transcript's or a judgment's identity is a mixed-radix integer code
of its axes (not an index of first appearance), its key is that code
scrambled by an odd 64-bit multiplier (distinct codes, distinct keys), and
each of its random draws is a counter-based hash of (stream, code). So the
same transcript gets the same truth in every universe that shares it,
whichever block the universe falls in, and the tables do not depend on the
block size.

Written as ``tables.write_table`` writes a run's tables to parquet: text
columns as large_string, ``replicate`` int64, ``compliant`` a nullable
boolean, with pandas' schema metadata, in row groups of at most 1Mi rows.
Like a run's folder (``tables.write_run_folder``), a table of at least
``tables.INDEXED_ROWS`` rows gets its columnar index (``.index/``) as the
folder is written. The CSV copy ``write_table`` also writes is left out: ``load_run`` reads the
parquet when both exist, and at 60M rows the CSV would be about 10 GB of disk.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from multiverse.tables import INDEXED_ROWS, index_table

# (axis, store stage it touches, options), added in order until the grid has N universes.
AXES = [
    ("setting", "rollout", 2),
    ("user", "rollout", 5),
    ("judge", "judge", 5),
    ("evidence", "judge", 2),
    ("scoring", "score", 2),
    ("prompt", "rollout", 5),
    ("temperature", "rollout", 10),
    ("seed", "rollout", 10),
]
BEHAVIORS = ["fabricate_evidence", "overstate_capability", "false_tool_claim",
             "inconsistent_commitment", "misattribute_source", "uncertain_as_settled"]
CONDITIONS = ["material_reliance", "consistency_probe", "overclaim_pressure", "outside_basis"]
FACTORS = ["behavior", "interaction_condition"]
CRITERIA = ["cites_real_source", "states_own_limits", "keeps_commitments"]
STATUSES = ["ok", "excluded", "judge_failed", "rollout_failed"]
REASONS = ["", "no applicable criterion", "criterion missing from the answer", "role_reversal (after 3 attempts)"]
GRIDS = {"full": {"cases": 120, "replicates": 1, "exclude": False},
         "exclusions": {"cases": 60, "replicates": 2, "exclude": True}}
ROW_GROUP = 1024 * 1024  # pyarrow's default, as DataFrame.to_parquet writes
BLOCK_ROWS = ROW_GROUP  # rows generated at once (one row group): about 0.6 GB of working arrays

# The random streams: one per kind of draw, so no two draws share a hash input.
TRUTH, FLIP, FORGIVE, ROLLOUT_FAIL, STATUS_DRAW, LENIENT, APPLICABLE, CRITERION_LABEL = range(8)


def grid_axes(n_universes: int) -> list[tuple[str, str, int]]:
    axes, size = [], 1
    for axis in AXES:
        if size >= n_universes:
            break
        axes.append(axis)
        size *= axis[2]
    if size != n_universes:
        raise SystemExit(f"--sizes: {n_universes}: expected one of 1000, 10000, 100000")
    return axes


def uniform(stream: int, code: np.ndarray, seed: int = 0) -> np.ndarray:
    """Uniform [0, 1) draws that are a function of (seed, stream, code) alone (splitmix64's finaliser)."""
    z = code.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z += np.uint64((seed * 0x632BE59BD9B4E019 + stream * 0xD1B54A32D192ED03 + 1) % 2**64)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex_keys(code: np.ndarray, multiplier: int) -> pa.Array:
    """16 hex digits of ``code * multiplier mod 2**64`` per row, as keys.digest writes them (an odd
    multiplier is a bijection, so distinct codes give distinct keys); built without a Python string."""
    scrambled = code.astype(np.uint64) * np.uint64(multiplier)
    octets = scrambled.astype(">u8").view(np.uint8).reshape(-1, 8)
    digits = np.empty((len(code), 16), dtype=np.uint8)
    digits[:, 0::2] = _HEX[octets >> 4]
    digits[:, 1::2] = _HEX[octets & 15]
    offsets = np.arange(0, 16 * len(code) + 1, 16, dtype=np.int64)
    return pa.Array.from_buffers(pa.large_string(), len(code), [None, pa.py_buffer(offsets), pa.py_buffer(digits)])


def _text(values: list[str], codes: np.ndarray) -> pa.Array:
    return pa.array(values, type=pa.large_string()).take(pa.array(codes))


def _schema(columns: dict[str, str]) -> pa.Schema:
    """The schema (with pandas' metadata) that ``DataFrame.to_parquet`` writes for these dtypes."""
    empty = pd.DataFrame({name: pd.Series([], dtype=dtype) for name, dtype in columns.items()})
    return pa.Schema.from_pandas(empty, preserve_index=False)


def write_grid(folder: Path, n_universes: int, *, grid: str, systems: int = 5, seed: int = 0) -> dict:
    """Write verdicts.parquet (and criteria.parquet for the exclusions grid) and manifest.json.

    The exclusions grid leaves out universes with setting_1 and user_4 (an
    exclude rule) and has a criteria table: one row per judgment x criterion.
    Returns the counts the benchmark prints.
    """
    cases, replicates, exclude = (GRIDS[grid][k] for k in ("cases", "replicates", "exclude"))
    axes = grid_axes(n_universes)
    names = [name for name, _, _ in axes]
    sizes = np.array([k for _, _, k in axes])
    universe_codes = np.indices(sizes, dtype=np.int8).reshape(len(axes), -1).T  # U x A
    kept = np.arange(n_universes, dtype=np.int32)
    if exclude:
        kept = kept[~((universe_codes[:, 0] == 1) & (universe_codes[:, 1] == 4))]
    rollout = [i for i, (_, stage, _) in enumerate(axes) if stage == "rollout"]
    judging = [i for i, (_, stage, _) in enumerate(axes) if stage == "judge"]
    rollout_combo = np.zeros(n_universes, dtype=np.int64)  # mixed-radix code of a universe's rollout options
    for i in rollout:
        rollout_combo = rollout_combo * sizes[i] + universe_codes[:, i]
    judge_combo = np.zeros(n_universes, dtype=np.int64)
    for i in judging:
        judge_combo = judge_combo * sizes[i] + universe_codes[:, i]
    n_judge_combos = int(np.prod(sizes[judging]))
    n_transcript_codes = int(np.prod(sizes[rollout])) * systems * cases * replicates

    rng = np.random.default_rng(seed)
    case_difficulty = rng.normal(scale=0.8, size=cases)
    base = np.linspace(0.4, 1.2, systems)
    universe_ids = [f"{(k * 0x9E3779B97F4A7C15) % 2**64:016x}" for k in range(n_universes)]
    behavior = np.arange(cases) % len(BEHAVIORS)
    condition = (np.arange(cases) // len(BEHAVIORS)) % len(CONDITIONS)
    case_names = [f"{BEHAVIORS[behavior[j]]}.{CONDITIONS[condition[j]]}.{j // 24 + 1:02d}" for j in range(cases)]

    text = dict.fromkeys(["universe_id", *names, "system", "case_id", *FACTORS], "str")
    verdict_schema = _schema({**text, "replicate": "int64", "transcript_key": "str", "judgment_key": "str",
                              "status": "str", "reason": "str", "compliant": "boolean"})
    criteria_schema = _schema({"judgment_key": "str", "sample": "int64", "criterion": "str", "permissible": "bool",
                               "applicable": "bool", "compliant": "boolean", "rationale": "str"})
    folder.mkdir(parents=True, exist_ok=True)
    per_universe = systems * cases * replicates
    block = max(BLOCK_ROWS // per_universe, 1)
    seen_transcripts = np.zeros(n_transcript_codes, dtype=bool)
    seen_judgments = np.zeros(n_transcript_codes * n_judge_combos, dtype=bool)
    counts = {"rows": 0, "criteria_rows": 0, "table_bytes": 0, "universes": len(kept)}
    verdicts_out = pq.ParquetWriter(folder / "verdicts.parquet", verdict_schema)
    criteria_out = pq.ParquetWriter(folder / "criteria.parquet", criteria_schema) if exclude else None
    try:
        for start in range(0, len(kept), block):
            chunk = kept[start:start + block]
            # Row order as the pipeline writes it: universe, then system, then case, then replicate.
            u = np.repeat(chunk, per_universe)
            s = np.tile(np.repeat(np.arange(systems, dtype=np.int64), cases * replicates), len(chunk))
            c = np.tile(np.repeat(np.arange(cases, dtype=np.int64), replicates), len(chunk) * systems)
            r = np.tile(np.arange(replicates, dtype=np.int64), len(chunk) * systems * cases)
            option = {name: universe_codes[u, i] for i, name in enumerate(names)}
            transcript = ((rollout_combo[u] * systems + s) * cases + c) * replicates + r
            judgment = transcript * n_judge_combos + judge_combo[u]
            seen_transcripts[transcript] = True
            seen_judgments[judgment] = True

            shift = 0.3 * option["setting"] - 0.08 * option["user"] + 0.15 * (option["user"] == 4) * (s - 2)
            if "prompt" in option:
                shift = shift + 0.05 * option["prompt"]
            p_true = 1 / (1 + np.exp(-(base[s] + shift + case_difficulty[c])))
            truth = uniform(TRUTH, transcript, seed) < p_true
            # A judge-specific error rate and a lenient judge on system 0.
            error = 0.06 + 0.03 * option["judge"] + 0.04 * option["evidence"]
            flip = uniform(FLIP, judgment, seed) < error
            lenient = (option["judge"] == 3) & (s == 0)
            row = u.astype(np.int64) * per_universe + np.arange(len(u)) % per_universe
            label = (flip != truth) | (lenient & (uniform(LENIENT, row, seed) < 0.3))
            forgiven = uniform(FORGIVE, judgment, seed) < 0.25  # impermissible_only forgives some
            compliant = label | ((option["scoring"] == 1) & forgiven)
            # ~1% of transcripts fail to roll out; ~2% of judgments fail, ~1% are excluded.
            rollout_failed = uniform(ROLLOUT_FAIL, transcript, seed) < 0.01
            draw = uniform(STATUS_DRAW, judgment, seed)
            status = np.where(rollout_failed, 3, np.where(draw < 0.02, 2, np.where(draw < 0.03, 1, 0))).astype(np.int8)
            del shift, p_true, truth, flip, lenient, row, forgiven, rollout_failed, draw

            columns = [_text(universe_ids, u)]
            columns += [_text([f"{name}_{j}" for j in range(sizes[i])], option[name]) for i, name in enumerate(names)]
            columns += [_text([f"system_{j}" for j in range(systems)], s), _text(case_names, c),
                        _text(BEHAVIORS, behavior[c]), _text(CONDITIONS, condition[c]), pa.array(r),
                        hex_keys(transcript, 0xBF58476D1CE4E5B9), hex_keys(judgment, 0x94D049BB133111EB),
                        _text(STATUSES, status), _text(REASONS, status), pa.array(compliant, mask=status != 0)]
            table = pa.Table.from_arrays(columns, schema=verdict_schema)
            del columns
            verdicts_out.write_table(table, row_group_size=ROW_GROUP)
            counts["rows"] += table.num_rows
            counts["table_bytes"] += table.nbytes
            del table
            if criteria_out is not None:
                # Each judgment once: in the universe of its scoring_0 (scoring shares judgments).
                first = option["scoring"] == 0
                criteria = _criteria(judgment[first], status[first], label[first], seed, criteria_schema)
                criteria_out.write_table(criteria, row_group_size=ROW_GROUP)
                counts["criteria_rows"] += criteria.num_rows
                del criteria
    finally:
        verdicts_out.close()
        if criteria_out is not None:
            criteria_out.close()
    counts["transcripts"] = int(seen_transcripts.sum())
    counts["judgments"] = int(seen_judgments.sum())
    manifest = {"axes": names, "factors": list(FACTORS), "primary": universe_ids[int(kept[0])]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    # As a run's folder writer does for a long table: its columnar index, so no analysis reads the parquet.
    started = time.perf_counter()
    for name in ("verdicts", "criteria"):
        if counts.get(f"{name}_rows" if name == "criteria" else "rows", 0) >= INDEXED_ROWS:
            index_table(folder, name)
    counts["index_seconds"] = round(time.perf_counter() - started, 2)
    return counts


def _criteria(judgment: np.ndarray, status: np.ndarray, label: np.ndarray, seed: int, schema: pa.Schema) -> pa.Table:
    """One row per judgment x criterion: applicable unless the judgment was excluded,
    compliant agreeing with the verdict's label on the first criterion."""
    judged = np.flatnonzero(status <= 1)  # failed rollouts and judgments have no criteria
    k = len(CRITERIA)
    jj = np.repeat(judged, k)
    criterion = np.tile(np.arange(k, dtype=np.int64), len(judged))
    code = judgment[jj] * k + criterion  # one code per (judgment, criterion)
    applicable = (status[jj] == 0) & ((criterion == 0) | (uniform(APPLICABLE, code, seed) < 0.7))
    compliant = np.where(criterion == 0, label[jj], uniform(CRITERION_LABEL, code, seed) < 0.85)
    columns = [hex_keys(judgment[jj], 0x94D049BB133111EB), pa.array(np.zeros(len(jj), dtype=np.int64)),
               _text(CRITERIA, criterion), pa.array(criterion == 2), pa.array(applicable),
               pa.array(compliant, mask=~applicable), _text([f"reason {i}" for i in range(5)], judgment[jj] % 5)]
    return pa.Table.from_arrays(columns, schema=schema)
