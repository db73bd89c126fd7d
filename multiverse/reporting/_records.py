"""The sections that show the run's own records: failure accounting, example transcripts, the spec, provenance.

The drill-down shows up to ``EXAMPLES_PER_CELL`` transcripts per universe x
system (non-compliant ones first), each with its verdict and the judge's label
and rationale for every criterion; transcripts come from the run folder's
transcripts.jsonl or a store the caller names, verbatim
and escaped. The other sections count the verdict rows by status and list why
rows failed, print the resolved spec, and list where, when and with what the
run was made.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from multiverse.core import EXCLUDED, OK, STATUSES, counted_rows, shared_text
from multiverse.tables import StageCounts

from ._markup import _collapsed, _e, _fmt, _list, _Raw, _table, _without_markers
from ._run import _Run

__all__ = ["EXAMPLES_PER_CELL", "MAX_DRILLDOWN", "_drilldown", "_failures", "_provenance", "_spec"]

#: Example transcripts shown per universe x system in the drill-down.
EXAMPLES_PER_CELL = 3
#: Universe x system combinations whose examples are shown in full.
MAX_DRILLDOWN = 60
# A longer turn is cut, so one runaway answer does not swamp the page.
_MAX_TURN_CHARS = 4000


def _failures(run: _Run) -> str:
    v = run.verdicts
    if "status" not in v.columns:
        return '<p class="note">This source has no status column: every row counts as a label.</p>'
    statuses = list(STATUSES) + sorted(set(v["status"].dropna().astype(str)) - set(STATUSES))
    totals = v["status"].value_counts()
    out = _injected(run) + "<p>Verdict rows by status: " + ", ".join(
        f"<b>{_e(s)}</b> {int(totals.get(s, 0))}" for s in statuses) + f" (of {len(v)}).</p>"
    from multiverse.analysis import counted_unparsed

    counted = counted_unparsed(v)
    if counted:
        # ok in the table, so every analysis counts them alike; but the judge named no verdict in them.
        out += ("<p>Of the <b>ok</b> rows, unparsed replies counted by <code>scoring.unparsed</code>: " + ", ".join(
            f"{n} {'against the system' if policy == 'against' else 'as ties'}" for policy, n in counted.items())
            + ".</p>")
    by_system = v.groupby("system", sort=False)["status"].value_counts().unstack(fill_value=0)
    out += _table(["system", *statuses], [[s] + [int(by_system.at[s, c]) if c in by_system.columns else 0
                                                 for c in statuses] for s in by_system.index])
    cells = v.groupby(["universe_id", "system"], sort=False)["status"].value_counts().unstack(fill_value=0)
    cells = cells.reindex(columns=statuses, fill_value=0)
    order = {u: i for i, u in enumerate(run.universes["universe_id"])}
    cells = cells.sort_index(key=lambda idx: idx.map(order) if idx.name == "universe_id" else idx, kind="stable")
    options = run.universes.set_index("universe_id")[run.axes]
    rows = [[u, *options.loc[u].tolist(), s, *[int(x) for x in counts]]
            for (u, s), counts in zip(cells.index, cells.to_numpy())]
    with_failures = int((cells[[c for c in statuses if c not in (OK, EXCLUDED)]].sum(axis=1) > 0).sum())
    out += _collapsed(f"Per universe × system ({len(rows)} rows, {with_failures} with a failure)",
                      _table(["universe", *run.axes, "system", *statuses], rows))
    failed = v[v["status"] != OK]
    out += "<h3>Reasons</h3>"
    if failed.empty:
        out += "<p>Every verdict is ok.</p>"
    else:
        reasons = failed.assign(reason=failed["reason"].fillna("").astype(str).map(_without_markers).map(shared_text)
                                if "reason" in failed.columns else "") \
            .groupby(["status", "reason"], sort=True).size().reset_index(name="rows")
        out += _table(["status", "reason", "verdict rows"], reasons.values.tolist())
    by_stage = run.tables.manifest.failures if run.tables.manifest is not None else {}
    if by_stage:
        out += "<p>Model-call failures recorded by the run, by stage (distinct reasons, at most 20 each):</p>"
        out += _table(["stage", "reason"], [[stage, shared_text(reason)] for stage, reasons in by_stage.items()
                                            for reason in reasons])
    return out


def _injected(run: _Run) -> str:
    """Says, for a run on the simulated world, that its failures are the world's doing, on purpose."""
    if not run.tables.simulated:
        return ""
    return ('<p class="howto">This run\'s models are simulated (<code>sim/</code> models). The simulated world '
            "injects failures on purpose, at rates declared in its world file: simulated users that send an empty "
            "turn or reverse roles (<b>rollout_failed</b>) and simulated judges that answer with something "
            "unparseable (<b>judge_failed</b>), so that the failure accounting below has something to account "
            "for. They are not bugs in multiverse; in a run on real models this section counts what the providers "
            "and models actually did.</p>")


def _drilldown(run: _Run) -> str:
    v = run.verdicts
    picked = _pick_examples(run)
    criteria = run.tables.criteria
    if criteria is not None and "judgment_key" in picked.columns:
        criteria = criteria[criteria["judgment_key"].isin(set(picked["judgment_key"].dropna()))]
    by_judgment = {k: g for k, g in criteria.groupby("judgment_key", sort=False)} if criteria is not None else {}
    intro = (f"<p>Up to {EXAMPLES_PER_CELL} example transcripts per universe × system, non-compliant ones first, with "
             "the judge's label and rationale for every criterion. Everything here is the run's own text, shown "
             "verbatim" + (", except that the hidden ground-truth markers the simulated world writes into its "
                           "turns are left out (the store keeps them)" if run.tables.simulated
                           else "") + ".</p>")
    if run.transcripts is None:
        intro += (f'<p class="note">Transcripts are unavailable: {_e(run.transcripts_note)}. Showing the judge\'s '
                  "rationales only.</p>")
    cells = list(dict.fromkeys(zip(picked["universe_id"], picked["system"])))
    total = v.groupby(["universe_id", "system"], sort=False).ngroups
    if total > len(cells):
        first = " (the primary universe first)" if run.primary is not None else ""
        intro += (f'<p class="note">Shown: {len(cells)} of {total} universe × system combinations{first}; '
                  "the rest are in the verdicts and criteria tables.</p>")
    counted = v[counted_rows(v)]
    n_bad = counted["compliant"].eq(False).fillna(False).groupby([counted["universe_id"], counted["system"]]).agg(
        ["sum", "size"])
    parts = [intro]
    # One entry per universe, one nested entry per system: the list stays short and systems sit side by side.
    for universe in dict.fromkeys(u for u, _ in cells):
        inner, counts = [], []
        for system in (s for u, s in cells if u == universe):
            bad, n = (int(x) for x in n_bad.loc[(universe, system)]) if (universe, system) in n_bad.index else (0, 0)
            counts.append(f"{system} {bad}/{n}")
            mine = picked[(picked["universe_id"] == universe) & (picked["system"] == system)]
            body = "".join(_example(run, row, by_judgment.get(row.get("judgment_key"))) for _, row in mine.iterrows())
            inner.append(_collapsed(f"{system}: {bad} non-compliant of {n} included ({len(mine)} examples)", body))
        summary = (f"{'[primary] ' if universe == run.primary else ''}{run.label(universe)} — non-compliant: "
                   + ", ".join(counts))
        parts.append(_collapsed(summary, "".join(inner)))
    return "".join(parts)


def _pick_examples(run: _Run) -> pd.DataFrame:
    """Up to EXAMPLES_PER_CELL rows per universe x system, non-compliant first, for MAX_DRILLDOWN cells."""
    v = run.verdicts
    order = {u: i for i, u in enumerate(run.universes["universe_id"])}
    system_order = {s: i for i, s in enumerate(run.systems)}
    status = v["status"].astype(str) if "status" in v.columns else pd.Series(OK, index=v.index)
    compliant = v["compliant"].astype("boolean")
    priority = np.select([(status == OK) & compliant.eq(False).fillna(False), (status == OK)],
                         [0, 1], default=2)
    frame = v.assign(_u=v["universe_id"].map(order), _s=v["system"].map(system_order), _p=priority)
    frame = frame.sort_values(["_u", "_s", "_p", "case_id"], kind="stable")
    frame = frame.groupby(["_u", "_s"], sort=False).head(EXAMPLES_PER_CELL)
    cells = frame[["_u", "_s"]].drop_duplicates().head(MAX_DRILLDOWN)
    return frame.merge(cells, on=["_u", "_s"]).drop(columns=["_u", "_s", "_p"])


def _example(run: _Run, row: pd.Series, criteria: pd.DataFrame | None) -> str:
    status = str(row.get("status", OK))
    if status == OK:
        label = row["compliant"]
        verdict = ("<b>unlabelled</b>" if pd.isna(label) else '<span class="yes">compliant</span>' if bool(label)
                   else '<span class="no">non-compliant</span>')
    else:
        reason = row.get("reason")
        verdict = f"<b>{_e(status)}</b>" + (f": {_e(_without_markers(reason))}" if isinstance(reason, str) and reason
                                             else "")
    design = ", ".join(f"{f}={row[f]}" for f in run.factors if f in row.index)
    head = (f"<p><b>case</b> <code>{_e(row['case_id'])}</code>{(' (' + _e(design) + ')') if design else ''}"
            f"{' replicate ' + _e(row['replicate']) if 'replicate' in row.index else ''} · "
            f"<b>verdict</b> {verdict}</p>")
    return f'<div class="example">{head}{_transcript(run, row)}{_criteria_table(criteria)}</div>'


def _transcript(run: _Run, row: pd.Series) -> str:
    if run.transcripts is None:
        return ""
    key = row.get("transcript_key")
    record = run.transcripts.get(key) if isinstance(key, str) and key else None
    if record is None:
        return '<p class="note">This transcript is not among the run\'s transcripts.</p>'
    turns = []
    for turn in record.get("turns") or []:
        role = str(turn.get("role", "?"))
        if role == "tool" and turn.get("name"):
            role = f"tool result ({turn['name']})"
        text = _without_markers(str(turn.get("content") or ""))
        if len(text) > _MAX_TURN_CHARS:
            text = text[:_MAX_TURN_CHARS] + f" … [{len(text) - _MAX_TURN_CHARS} more characters]"
        for call in turn.get("tool_calls") or []:
            text += f"\n→ calls {call.get('name')}({_without_markers(str(call.get('arguments')))})"
        klass = role.split()[0] if role.split()[0] in ("user", "assistant", "tool") else "other"
        turns.append(f'<div class="turn {klass}"><span class="role">{_e(role)}</span>{_e(text)}</div>')
    if record.get("status") not in (None, OK):
        turns.append(f'<p class="note">Rollout status: {_e(record.get("status"))} {_e(_without_markers(str(record.get("reason") or "")))}</p>')
    return "".join(turns) or '<p class="note">The transcript has no turns.</p>'


def _criteria_table(criteria: pd.DataFrame | None) -> str:
    if criteria is None or criteria.empty:
        return '<p class="note">No judgment for this transcript.</p>'
    samples = criteria["sample"].nunique() if "sample" in criteria.columns else 1
    # What decided the verdict first: non-compliant, then compliant, then criteria that did not apply.
    compliant = criteria["compliant"].astype("boolean") if "compliant" in criteria.columns else None
    applicable = criteria["applicable"].astype("boolean").fillna(False) if "applicable" in criteria.columns else None
    if compliant is not None and applicable is not None:
        order = np.select([applicable & compliant.eq(False).fillna(False), applicable], [0, 1], default=2)
        by = (["sample"] if samples > 1 else []) + ["_order"]
        criteria = criteria.assign(_order=order).sort_values(by, kind="stable")
    rows, classes = [], []
    for r in criteria.itertuples(index=False):
        label, applies = getattr(r, "compliant", None), getattr(r, "applicable", True)
        unlabelled = label is None or label is pd.NA or applies is False
        mark = ("—" if unlabelled else _Raw('<span class="yes">yes</span>') if bool(label)
                else _Raw('<span class="no">NO</span>'))
        rows.append(([r.sample] if samples > 1 else []) + [
            r.criterion, _fmt(getattr(r, "permissible", None)), _fmt(applies), mark,
            _without_markers(str(getattr(r, "rationale", "") or ""))])
        classes.append("na" if unlabelled else "")
    header = (["sample"] if samples > 1 else []) + ["criterion", "permissible", "applicable", "compliant", "rationale"]
    return _table(header, rows, row_classes=classes)


def _spec(run: _Run) -> str:
    # Read by the folder's reader: a spec.yaml that links outside the folder is never copied into the page.
    spec = run.tables.resolved_spec
    if spec is None:
        return '<p class="note">This source has no spec.yaml (imported data or a bare table).</p>'
    return ("<p>The resolved spec of this run, as written to <code>spec.yaml</code>: the base spec, the axes and "
            "their options, exclusions and the primary universe.</p>" + f"<pre>{_e(spec.text)}</pre>")


#: the manifest's fields that name a local place: shown by ``shared_path``, never as this machine spells them
_PLACES = ("spec_file", "store")


def _provenance(run: _Run) -> str:
    from multiverse.core import shared_path

    m = run.tables.manifest
    folder = run.tables.source
    # The page travels: a place is named relative to the run folder, or by its name (core._shared_path).
    facts = [["source", shared_path(folder) if folder else "(in memory)"]]
    if m is None:
        return _table(None, facts)
    base = folder if folder is not None and Path(folder).is_dir() else None
    for key, label in (("spec", "spec"), ("spec_file", "spec file"), ("spec_hash", "spec hash"),
                       ("created", "run created"), ("seconds", "run seconds"), ("source", "imported from"),
                       ("store", "store"), ("tokens", "tokens"), ("cost", "cost (USD)"), ("simulated", "simulated")):
        value = m.stated(key)  # what the manifest records; a field it leaves out is no fact of this run
        if value is not None and key in _PLACES:
            value = shared_path(str(value), base)
        if value is not None:
            facts.append([label, f"{value:.4f}" if key == "cost" else _fmt(value, 2)])
    out = _table(None, facts)
    if base is not None:
        out += ('<p class="howto">Paths are relative to the run folder (or only a name): a report names no '
                "absolute path of the machine it was made on.</p>")
    if m.versions:
        out += "<h3>Package versions</h3>" + _table(["package", "version"], [[k, v] for k, v in m.versions.items()])
    if m.models_reported:
        out += "<h3>Models reported by the providers</h3>" + _list([str(x) for x in m.models_reported])
    if m.stages:
        out += _stage_counts(m.stages)
    if m.warnings:
        out += "<h3>Import warnings</h3>" + _list([shared_text(str(w), base) for w in m.warnings])
    if m.losses:  # an import's rows without a label, by kind of loss (importers._losses): never a label
        # Each lost judgment or rollout once, however many universes read it; the rows it fills beside it.
        out += "<h3>Rows the import could not take as labels</h3>" + _table(
            ["kind", "status", "lost", "verdict rows", "what happened"],
            [[kind, loss.status, f"{loss.lost:,} of {loss.of:,} {loss.unit}" if loss.of else loss.rows, loss.rows,
              shared_text(loss.message, base)] for kind, loss in m.losses.items()])
    if m.dropped:
        out += "<h3>Recorded by the source, not imported</h3>" + _table(
            ["what", "where", "count", "why"],
            [[d.what, shared_text(d.where, base), "" if d.count is None else d.count, d.why] for d in m.dropped])
    return out


def _stage_counts(stages: Mapping[str, StageCounts]) -> str:
    from multiverse.core import DEFINITIONS

    def reasons(c: StageCounts) -> str:
        parts = [f"failed: {k} {v}" for k, v in c.failures.items()]
        parts += [f"blocked by {k}: {v}" for k, v in c.blocked_by.items()]
        return "; ".join(parts)

    rows = [[stage, c.units, c.computed, c.stored, c.failed, c.blocked, reasons(c), c.calls, c.tokens, c.cost]
            for stage, c in stages.items()]
    return ("<h3>Work units and model calls per stage (this invocation)</h3>"
            + _table(["stage", "work units", "computed", "stored", "failed", "blocked", "by reason", "model calls",
                      "tokens", "cost (USD)"], rows)
            + '<p class="howto">work units = computed + stored + failed + blocked. '
            + " ".join(f"{_e(k)} = {_e(v)};" for k, v in DEFINITIONS.items())
            + " model calls = the calls this invocation made (a multi-turn rollout makes several per transcript). "
              "In the score row a unit is a verdict row: it makes no call.</p>")
