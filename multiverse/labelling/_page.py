"""The labelling page's fixed parts: its style and its script (data goes in as JSON, never as markup).

The script builds every element with ``textContent``, so no model or spec
string is ever parsed as HTML; the page's Content-Security-Policy allows only
these two blocks (by hash), no network and no other script.
"""

from __future__ import annotations

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f4}
header{position:sticky;top:0;background:#fff;border-bottom:1px solid #ccc;padding:.6em 1.2em;z-index:1;
display:flex;gap:1em;align-items:center;flex-wrap:wrap}
header h1{font-size:1.1em;margin:0}
main,#intro{max-width:60em;margin:0 auto;padding:0 1.2em}
.card{background:#fff;border:1px solid #ccc;border-radius:6px;margin:1.2em 0;padding:.8em 1em}
.card.done{border-color:#3a7d44;box-shadow:inset 4px 0 0 #3a7d44}
.meta{color:#555;font-size:.9em;margin:0 0 .6em}
.turn{white-space:pre-wrap;overflow-wrap:anywhere;padding:.4em .6em;margin:.3em 0;border-radius:4px;background:#f1f1ef}
.turn.user{background:#eef3fb}.turn.assistant{background:#f7f3ea}
.role{display:block;font-weight:600;font-size:.8em;text-transform:uppercase;color:#555}
.criterion{margin:.4em 0 .8em}.criterion h3{font-size:1em;margin:0}
.tag{font-size:.8em;color:#555;font-weight:normal}
.evidence{margin:.2em 0 0 1em;color:#333}
fieldset{border:1px solid #ddd;border-radius:4px;margin-top:.8em}
textarea{width:100%;box-sizing:border-box;min-height:3em}
table.fields td{padding:.1em .6em;vertical-align:top;overflow-wrap:anywhere}
.note{color:#8a4b00}
"""

SCRIPT = r"""
"use strict";
(function () {
  var data = JSON.parse(document.getElementById("sheet-data").textContent);
  var storeKey = "multiverse-sheet:" + data.id;
  var state = {};
  try { state = JSON.parse(window.localStorage.getItem(storeKey) || "{}") || {}; } catch (e) { state = {}; }
  var warned = false;
  function save() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(state)); }
    catch (e) {
      if (!warned) { warned = true; document.getElementById("progress").textContent += " (this browser does not keep progress: export before closing)"; }
    }
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function criteriaList() {
    var box = el("div", "criteria");
    if (!data.criteria.length) { box.appendChild(el("p", "note", "This folder has no rubric.")); }
    data.criteria.forEach(function (c) {
      var item = el("div", "criterion");
      var h = el("h3", null, c.name + " ");
      h.appendChild(el("span", "tag", "(" + c.id + ", " + (c.permissible ? "permissible: should appear when called for" : "impermissible: must not appear") + ")"));
      item.appendChild(h);
      if (c.definition) { item.appendChild(el("p", null, c.definition)); }
      Object.keys(c.evidence).forEach(function (level) {
        item.appendChild(el("p", "evidence", "Evidence (" + level + "): " + c.evidence[level]));
      });
      box.appendChild(item);
    });
    return box;
  }
  var column = data.label.column;
  // A label counts only when it is one the sheet allows: a choice offered, or a number on the scale.
  function valid(value) {
    if (value === undefined || value === null || value === "") { return false; }
    if (data.label.choices) { return data.label.choices.some(function (c) { return c[0] === value; }); }
    if (!/^\s*-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$/.test(value)) { return false; }
    var x = Number(value);
    return isFinite(x) && x >= data.label.min && x <= data.label.max && (!data.label.whole || Math.floor(x) === x);
  }
  function labelled(s) { return !!s && valid(s[column]); }
  function progress() {
    var done = 0;
    data.rows.forEach(function (_, i) { if (labelled(state[i])) { done += 1; } });
    document.getElementById("progress").textContent = done + " of " + data.rows.length + " labelled";
  }
  function card(row, i) {
    var box = el("section", "card");
    box.id = "row-" + i;
    var meta = [(i + 1) + " / " + data.rows.length];
    if (!data.blind) { meta.push("system " + row.cells.system); }
    meta.push("case " + row.cells.case_id, "replicate " + row.cells.replicate);
    data.factors.forEach(function (f) { meta.push(f + " " + row.cells[f]); });
    box.appendChild(el("p", "meta", meta.join(" \u00b7 ")));
    if (row.turns) {
      if (!row.turns.length) { box.appendChild(el("p", "note", "This transcript has no turns.")); }
      row.turns.forEach(function (t) {
        var turn = el("div", "turn " + (["user", "assistant", "tool", "system"].indexOf(t.role) >= 0 ? t.role : "other"));
        turn.appendChild(el("span", "role", t.role));
        turn.appendChild(document.createTextNode(t.text));
        box.appendChild(turn);
      });
    } else {
      box.appendChild(el("p", "note", "No transcript in this folder (an import): this is what its table has."));
      var table = el("table", "fields");
      Object.keys(row.fields).forEach(function (k) {
        var tr = el("tr");
        tr.appendChild(el("td", null, k));
        tr.appendChild(el("td", null, row.fields[k]));
        table.appendChild(tr);
      });
      box.appendChild(table);
    }
    var rubric = el("details");
    rubric.appendChild(el("summary", null, "Rubric"));
    rubric.appendChild(criteriaList());
    box.appendChild(rubric);
    var form = el("fieldset");
    form.appendChild(el("legend", null, data.label.question));
    var saved = state[i] || {};
    function change(value) { var c = {}; c[column] = value; update(i, c); }
    var number = null, warning = null;
    if (data.label.choices) {
      data.label.choices.forEach(function (choice) {
        var label = el("label");
        var input = el("input");
        input.type = "radio"; input.name = column + "-" + i; input.value = choice[0];
        input.checked = saved[column] === choice[0];
        input.addEventListener("change", function () { change(choice[0]); });
        label.appendChild(input);
        label.appendChild(document.createTextNode(" " + choice[1] + "  "));
        form.appendChild(label);
      });
    } else {
      number = el("input");
      number.type = "number"; number.min = String(data.label.min); number.max = String(data.label.max);
      number.step = data.label.whole ? "1" : "any";
      number.setAttribute("aria-label", column);
      number.value = saved[column] || "";
      warning = el("span", "note");
      number.addEventListener("input", function () {
        // Only a number on the scale is kept; anything else leaves the row unlabelled and says why.
        var ok = number.value === "" || valid(number.value);
        warning.textContent = ok ? "" : " expected " + data.label.expected;
        change(ok ? number.value.trim() : "");
      });
      form.appendChild(number);
      form.appendChild(warning);
    }
    var clear = el("button", null, "clear");
    clear.type = "button";
    clear.addEventListener("click", function () {
      form.querySelectorAll("input[type=radio]").forEach(function (r) { r.checked = false; });
      if (number) { number.value = ""; warning.textContent = ""; }
      change("");
    });
    form.appendChild(clear);
    var note = el("textarea");
    note.placeholder = "note (optional)";
    note.setAttribute("aria-label", "note");
    note.value = saved.note || "";
    note.addEventListener("input", function () { update(i, {note: note.value}); });
    form.appendChild(note);
    box.appendChild(form);
    if (labelled(saved)) { box.classList.add("done"); }
    return box;
  }
  function update(i, change) {
    var s = state[i] || {note: ""};
    Object.keys(change).forEach(function (k) { s[k] = change[k]; });
    state[i] = s;
    save();
    document.getElementById("row-" + i).classList.toggle("done", labelled(s));
    progress();
  }
  function csvCell(value) {
    if (value === null || value === undefined) { return ""; }
    var text = String(value);
    // A spreadsheet runs a cell starting like a formula; the same quote the toolkit's CSVs use makes it text.
    if (typeof value === "string" && /^[=+\-@\t\r']/.test(text)) { text = "'" + text; }
    if (/[",\r\n]/.test(text)) { text = '"' + text.replace(/"/g, '""') + '"'; }
    return text;
  }
  function exportCsv() {
    var lines = [data.columns.map(csvCell).join(",")];
    data.rows.forEach(function (row, i) {
      var s = state[i] || {};
      lines.push(data.columns.map(function (c) {
        if (c === column) { return labelled(s) ? csvCell(s[column]) : ""; }
        if (c === "note") { return csvCell(s.note || ""); }
        return csvCell(row.cells[c]);
      }).join(","));
    });
    var blob = new Blob([lines.join("\r\n") + "\r\n"], {type: "text/csv;charset=utf-8"});
    var link = el("a");
    link.href = URL.createObjectURL(blob);
    link.download = data.export_name;
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
  }
  function nextUnlabelled() {
    for (var i = 0; i < data.rows.length; i += 1) {
      var s = state[i];
      if (!labelled(s)) { document.getElementById("row-" + i).scrollIntoView(); return; }
    }
  }
  document.getElementById("rubric-top").appendChild(criteriaList());
  var rows = document.getElementById("rows");
  data.rows.forEach(function (row, i) { rows.appendChild(card(row, i)); });
  document.getElementById("export").addEventListener("click", exportCsv);
  document.getElementById("next").addEventListener("click", nextUnlabelled);
  progress();
})();
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="referrer" content="no-referrer">
<title>Labelling sheet ({count} transcripts)</title>
<style>{style}</style>
</head>
<body>
<header><h1>Labelling sheet</h1><span id="progress"></span>
<button type="button" id="next">next unlabelled</button>
<button type="button" id="export">export filled CSV</button></header>
<div id="intro">
<p>Read each transcript and {task}, with a note if you wish.
The judges' verdicts are deliberately not shown.{blind} Your progress stays in this browser; when you are done,
export the filled CSV and hand it back to whoever runs the audit: it anchors the judges' rates to your labels. Label every transcript, or stop at any
point in the order shown: the sample must stay a uniform random one. The exported file names its sample
(the <code>sample_</code> columns); keep those columns and its rows as they are, with no row added: a sheet
that is not the sample drawn is refused.</p>
<p class="meta" id="sample">Sample: {sample}.</p>
<details id="rubric-top" open><summary>Rubric</summary></details>
</div>
<main id="rows"></main>
<script id="sheet-data" type="application/json">{data}</script>
<script>{script}</script>
</body>
</html>
"""
