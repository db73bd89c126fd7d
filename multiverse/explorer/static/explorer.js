/* multiverse explorer: draws the data document of the page (#explorer-data) as plain SVG and HTML.
   Every string from the run goes into the page through textContent or setAttribute on a fixed
   attribute name; nothing is ever parsed as markup, and the page's CSP allows no other script. */
(function () {
  'use strict';
  var errors = 0, messages = [];
  function failed(message) {
    errors++; messages.push(String(message));
    document.body.setAttribute('data-script-errors', String(errors));
    document.body.setAttribute('data-script-error-messages', messages.join(' | '));
  }
  window.addEventListener('error', function (e) { failed(e.message || e.type); });
  window.addEventListener('unhandledrejection', function (e) { failed(e.reason || e.type); });
  // A headless browser judges the page by these: every static figure decoded, no script error.
  window.addEventListener('load', function () {
    var im = document.images, ok = 0;
    for (var i = 0; i < im.length; i++) if (im[i].complete && im[i].naturalWidth > 0) ok++;
    document.body.setAttribute('data-images-total', String(im.length));
    document.body.setAttribute('data-images-loaded', String(ok));
  });

  var D = JSON.parse(document.getElementById('explorer-data').textContent);
  var SVG = 'http://www.w3.org/2000/svg';
  // Okabe & Ito (2008): distinguishable with every common colour-vision deficiency; yellow last (weak on white).
  var PALETTE = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#E69F00', '#56B4E9', '#000000', '#F0E442'];
  var U = D.universes, A = D.axes, SYS = D.systems, NU = U.id.length, NS = SYS.length;
  var MAX_CASES = 400, MAX_COMPARE = 600, MAX_JUDGES = 8;

  // rate row of (system, universe), -1 when the system has no counted verdict there
  var RI = new Int32Array(NU * NS).fill(-1);
  D.rates.universe.forEach(function (u, i) { RI[D.rates.system[i] * NU + u] = i; });
  function rateRow(s, u) { return RI[s * NU + u]; }
  // Which way the document's rates read (report.rate): its words; the numbers are already flipped (core.orient).
  var RATE = D.rate_name || 'compliance rate', COUNTED = D.counted || 'compliant';
  // no prototype: a universe id from a table may be any string, "__proto__" or "hasOwnProperty" included
  var uById = Object.create(null); U.id.forEach(function (id, i) { uById[id] = i; });
  function universeOf(id) { return id !== null && id in uById ? uById[id] : null; }

  var S = { exclude: A.map(function () { return {}; }), sort: 0, hidden: {}, universe: null, kase: null, ksys: null,
            cmp: null, brush: null, focus: null };

  // ------------------------------------------------------------------ helpers
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) { if (attrs[k] !== null && attrs[k] !== undefined) e.setAttribute(k, attrs[k]); }
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) { for (var i = 1; i < arguments.length; i++) if (arguments[i]) parent.appendChild(arguments[i]); return parent; }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function pct(x) { return x === null || x === undefined ? '—' : (100 * x).toFixed(1) + '%'; }
  function colour(s) { return PALETTE[s % PALETTE.length]; }
  function option(a, u) { return A[a].options[U.options[a][u]]; }
  function table(head, rows) {
    var t = el('table'), tr = el('tr');
    head.forEach(function (h) { tr.appendChild(el('th', null, h)); });
    add(t, add(el('thead'), tr));
    var body = el('tbody');
    rows.forEach(function (r) {
      var row = el('tr', r.cls ? { 'class': r.cls } : null);
      r.cells.forEach(function (c) {
        if (c instanceof Node) row.appendChild(add(el('td'), c));
        else row.appendChild(el('td', typeof c === 'number' ? { 'class': 'num' } : null, c));
      });
      body.appendChild(row);
    });
    return add(el('div', { 'class': 'scroll' }), add(t, body));
  }
  function median(xs) {
    if (!xs.length) return null;
    var v = xs.slice().sort(function (a, b) { return a - b; }), m = v.length >> 1;
    return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  }

  // ------------------------------------------------------------------ lazy blocks
  var blocks = {};
  function inflate(block) {
    var bin = atob(block), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
    return new Response(stream).text().then(JSON.parse);
  }
  function unpack(name) {
    if (!blocks[name]) blocks[name] = inflate(D.blocks[name]);
    return blocks[name];
  }
  // long texts (turns, rationales), each stored once, in chunks: only the chunks a case needs are inflated
  var STR = Object.create(null), chunks = {};
  function chunkOf(id) {
    var lo = 0, hi = D.string_chunks.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (D.string_chunks[mid] <= id) lo = mid; else hi = mid - 1; }
    return lo;
  }
  function loadStrings(ids) {
    var need = {};
    ids.forEach(function (id) { if (typeof id === 'number' && id >= 0 && !(id in STR)) need[chunkOf(id)] = true; });
    return Promise.all(Object.keys(need).map(function (k) {
      if (!chunks[k]) chunks[k] = inflateTexts(D.blocks.strings[k]).then(function (list) {
        var start = D.string_chunks[k];
        list.forEach(function (text, i) { STR[start + i] = text; });
      });
      return chunks[k];
    }));
  }
  function inflateTexts(chunk) {
    // ['z', packed list] or ['h', packed {tokens, counts, texts}, Huffman bits] (see _packing.pack_texts)
    if (chunk[0] === 'z') return inflate(chunk[1]);
    return inflate(chunk[1]).then(function (V) {
      var bin = atob(chunk[2]), bytes = new Uint8Array(bin.length), words = V.tokens, counts = V.counts;
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var out = [], cur = [], pos = 0, end = bytes.length * 8;
      while (out.length < V.texts && pos < end) {
        var code = 0, first = 0, index = 0;
        for (var l = 0; l < counts.length; l++) {  // the canonical decoder of deflate's puff.c
          code += (bytes[pos >> 3] >> (7 - (pos & 7))) & 1; pos++;
          if (code - counts[l] < first) {
            var w = words[index + code - first];
            if (w === null) { out.push(cur.join('')); cur = []; } else cur.push(w);
            break;
          }
          index += counts[l]; first = (first + counts[l]) * 2; code *= 2;
        }
      }
      return out;
    });
  }
  function str(id) { return typeof id === 'number' && id in STR ? STR[id] : ''; }
  var IX = null;  // indexes over the verdict rows, built once
  function rows() {
    return unpack('rows').then(function (R) {
      if (IX) return R;
      IX = { cell: {}, byTranscript: {} };
      for (var i = 0; i < R.universe.length; i++) {
        var key = R.universe[i] + ':' + R.system[i];
        (IX.cell[key] = IX.cell[key] || []).push(i);
        if (R.transcript[i] >= 0) (IX.byTranscript[R.transcript[i]] = IX.byTranscript[R.transcript[i]] || []).push(i);
      }
      return R;
    });
  }
  var CX = null;
  function texts() {
    return unpack('texts').then(function (T) {
      if (!CX) {
        CX = {};
        T.criteria.judgment.forEach(function (j, i) { (CX[j] = CX[j] || []).push(i); });
      }
      return T;
    });
  }
  function verdictChip(code, onClick) {
    var name = D.verdicts[code], cls = name === 'compliant' || name === 'non-compliant' ? name : 'other';
    var mark = name === 'compliant' ? '✓ ' : name === 'non-compliant' ? '✗ ' : '· ';
    var b = el(onClick ? 'button' : 'span', { 'class': 'v v-' + cls, type: onClick ? 'button' : null }, mark + name);
    if (onClick) b.addEventListener('click', onClick);
    return b;
  }

  // ------------------------------------------------------------------ selection and the URL fragment
  function included(u) {
    for (var a = 0; a < A.length; a++) if (S.exclude[a][U.options[a][u]]) return false;
    return true;
  }
  function visibleUniverses() {
    var out = [];
    for (var u = 0; u < NU; u++) if (included(u)) out.push(u);
    var s = S.sort;
    out.sort(function (x, y) {
      var i = rateRow(s, x), j = rateRow(s, y);
      if (i < 0 || j < 0) return (i < 0) - (j < 0) || x - y;
      return D.rates.rate[i] - D.rates.rate[j] || x - y;
    });
    return out;
  }
  function writeFragment() {
    var p = new URLSearchParams();
    A.forEach(function (ax, a) { for (var o in S.exclude[a]) p.append('x', ax.name + '=' + ax.options[o]); });
    if (S.sort) p.set('sort', SYS[S.sort]);
    Object.keys(S.hidden).forEach(function (s) { p.append('hide', SYS[s]); });
    if (S.universe !== null) p.set('u', U.id[S.universe]);
    if (S.kase !== null) { p.set('case', D.cases.id[S.kase]); p.set('sys', SYS[S.ksys]); }
    if (S.cmp) { p.set('cmp', S.cmp.kind); p.set('a', S.cmp.kind === 'u' ? U.id[S.cmp.a] : SYS[S.cmp.a]);
                 p.set('b', S.cmp.kind === 'u' ? U.id[S.cmp.b] : SYS[S.cmp.b]); }
    var hash = '#' + p.toString();
    if (location.hash === hash || (hash === '#' && !location.hash)) return;
    try { history.replaceState(null, '', hash); } catch (e) { location.hash = hash; }
  }
  function readFragment() {
    var p = new URLSearchParams(location.hash.slice(1));
    S.exclude = A.map(function () { return {}; });
    p.getAll('x').forEach(function (v) {
      var cut = v.indexOf('='), name = v.slice(0, cut), opt = v.slice(cut + 1);
      A.forEach(function (ax, a) { var o = ax.options.indexOf(opt); if (ax.name === name && o >= 0) S.exclude[a][o] = true; });
    });
    S.sort = Math.max(0, SYS.indexOf(p.get('sort')));
    S.hidden = {}; p.getAll('hide').forEach(function (n) { var s = SYS.indexOf(n); if (s >= 0) S.hidden[s] = true; });
    S.universe = universeOf(p.get('u'));
    var c = D.cases.id.indexOf(p.get('case')), ks = SYS.indexOf(p.get('sys'));
    S.kase = S.universe !== null && c >= 0 && ks >= 0 ? c : null; S.ksys = S.kase !== null ? ks : null;
    var kind = p.get('cmp'), a2 = p.get('a'), b2 = p.get('b');
    S.cmp = null;
    if (kind === 'u' && universeOf(a2) !== null && universeOf(b2) !== null) S.cmp = { kind: 'u', a: universeOf(a2), b: universeOf(b2) };
    if (kind === 's' && SYS.indexOf(a2) >= 0 && SYS.indexOf(b2) >= 0 && S.universe !== null)
      S.cmp = { kind: 's', a: SYS.indexOf(a2), b: SYS.indexOf(b2) };
  }

  // ------------------------------------------------------------------ page skeleton
  var app = document.getElementById('app');
  var tip = el('div', { 'class': 'tip', role: 'tooltip', hidden: '' });
  document.body.appendChild(tip);
  var controls = el('div', { 'class': 'controls', id: 'filters' });
  var facts = el('ul', { 'class': 'facts', id: 'facts' });
  var legend = el('div', { 'class': 'legend', id: 'legend' });
  var curveBox = el('div', { id: 'curve' });
  var rankBox = el('div', { id: 'ranks' }), summaryBox = el('div', { id: 'summary' });
  var universeBox = el('section', { id: 'universe' }), compareBox = el('section', { id: 'compare' });
  add(app, el('p', { 'class': 'note' }, D.systems.length + ' systems · ' + NU + ' universes · ' + D.cases.id.length +
      ' cases · intervals: ' + D.ci + '. Click a point (or focus one and press Enter) to open its universe; ' +
      'untick options to leave universes out; drag across the curve to brush a range.'),
      controls, facts, legend, curveBox,
      add(el('div', { 'class': 'cols' }), add(el('div'), el('h2', null, 'Rank of each system'), rankBox),
          add(el('div'), el('h2', null, 'Summary'), summaryBox)),
      universeBox, compareBox);

  function buildControls() {
    clear(controls);
    A.forEach(function (ax, a) {
      var f = add(el('fieldset', { 'data-axis': ax.name }), el('legend', null, ax.name));
      ax.options.forEach(function (name, o) {
        var box = el('input', { type: 'checkbox', 'data-axis': ax.name, 'data-option': name });
        box.checked = !S.exclude[a][o];
        box.addEventListener('change', function () { toggle(a, o, !box.checked); });
        f.appendChild(add(el('label'), box, document.createTextNode(name)));
      });
      controls.appendChild(f);
    });
    var sort = el('select', { id: 'sort', 'aria-label': 'order universes by system' });
    SYS.forEach(function (name, s) { var o = el('option', { value: String(s) }, name); o.selected = s === S.sort; sort.appendChild(o); });
    sort.addEventListener('change', function () { S.sort = +sort.value; S.focus = null; update(); });
    var systems = add(el('fieldset'), el('legend', null, 'systems (order by)'), sort);
    SYS.forEach(function (name, s) {
      var box = el('input', { type: 'checkbox', 'data-system': name });
      box.checked = !S.hidden[s];
      box.addEventListener('change', function () { if (box.checked) delete S.hidden[s]; else S.hidden[s] = true; update(); });
      systems.appendChild(add(el('label'), box, add(el('span', { 'class': 'swatch' })), document.createTextNode(name)));
      systems.lastChild.querySelector('.swatch').style.background = colour(s);
    });
    var reset = el('button', { type: 'button', id: 'reset' }, 'reset filters');
    reset.addEventListener('click', function () { S.exclude = A.map(function () { return {}; }); S.brush = null; buildControls(); update(); });
    add(controls, systems, reset);
  }
  function toggle(a, o, off) {
    if (off) S.exclude[a][o] = true; else delete S.exclude[a][o];
    S.brush = null; S.focus = null;
    buildControls(); update(); closeExcluded();
  }
  function closeExcluded() {
    // a universe the filter leaves out is no longer on the curve: its view (and a comparison inside it) goes too
    if (S.universe === null || included(S.universe)) return;
    var gone = U.id[S.universe];
    S.universe = null; S.kase = null; S.ksys = null;
    if (S.cmp && S.cmp.kind === 's') { S.cmp = null; drawCompare(); }
    emptyUniverse('Universe ' + gone + ' is left out by the filter; click a point on the curve to open another.');
    writeFragment();
  }
  function emptyUniverse(text) {
    document.body.removeAttribute('data-universe-open'); document.body.removeAttribute('data-case-open');
    clear(universeBox); add(universeBox, el('h2', null, 'Universe'), el('p', { 'class': 'note' }, text));
  }

  // ------------------------------------------------------------------ the specification curve
  var order = [], points = [];
  function drawCurve() {
    order = visibleUniverses();
    var shown = SYS.map(function (_, s) { return s; }).filter(function (s) { return !S.hidden[s]; });
    var longest = 0;
    A.forEach(function (ax) { ax.options.forEach(function (o) { longest = Math.max(longest, ax.name.length + o.length + 2); }); });
    // top: room above the plotting area for the primary's label, so it never sits on a point at 100%
    var W = 960, L = Math.max(90, Math.min(280, 6.2 * longest + 14)), R = 12, top = 30, H = 260, rowH = 13;
    var rowsN = A.reduce(function (n, ax) { return n + ax.options.length; }, 0);
    var indTop = top + H + 28, nTop = indTop + rowsN * rowH + A.length * 4 + 10, nH = 44;
    var svg = sv('svg', { 'class': 'chart', viewBox: '0 0 ' + W + ' ' + (nTop + nH + 22), role: 'group',
                          'aria-label': 'specification curve: one point per universe and system' });
    var n = order.length, step = (W - L - R) / Math.max(n, 1), r = Math.max(1.6, Math.min(4.5, step / 2.2));
    // systems side by side within a universe's slot when there is room, so their points do not hide each other
    var dodge = step > 4 * r * Math.max(shown.length, 1) ? 2 * r : step > 3 * r ? r * 0.6 : 0;
    function x(i, s) { var at = s === undefined ? 0 : shown.indexOf(s) - (shown.length - 1) / 2; return L + step * (i + 0.5) + dodge * at; }
    function y(v) { return top + H * (1 - v); }
    [0, 0.25, 0.5, 0.75, 1].forEach(function (v) {
      add(svg, sv('line', { 'class': 'grid', x1: L, x2: W - R, y1: y(v), y2: y(v) }),
          sv('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end' }, pct(v).replace('.0', '')));
    });
    add(svg, sv('text', { x: 4, y: top + 4 }, RATE), sv('line', { 'class': 'axis', x1: L, x2: W - R, y1: y(0), y2: y(0) }));
    var bg = sv('rect', { 'class': 'bg', x: L, y: top, width: W - L - R, height: H });
    svg.appendChild(bg);
    if (S.brush) {
      var b0 = Math.min(S.brush[0], S.brush[1]), b1 = Math.max(S.brush[0], S.brush[1]);
      svg.appendChild(sv('rect', { 'class': 'brush', x: L + step * b0, y: top, width: step * (b1 - b0 + 1), height: H }));
    }
    var pi = order.indexOf(D.primary);
    if (D.primary !== null && pi >= 0) {
      var leftward = x(pi) > W - R - 60;  // near the right edge the label reads leftwards from the line
      add(svg, sv('line', { 'class': 'primary', x1: x(pi), x2: x(pi), y1: top - 24, y2: nTop + nH }),
          sv('text', { 'class': 'primary-label', x: x(pi) + (leftward ? -3 : 3), y: top - 12,
                       'text-anchor': leftward ? 'end' : 'start' }, 'primary'));
    }
    points = SYS.map(function () { return []; });
    // every system's whiskers first, then every point on top, so no whisker hides a point
    var whiskers = sv('g'), dots = sv('g');
    shown.forEach(function (s) {
      var g = sv('g', { 'data-system': SYS[s] }), d = '';
      order.forEach(function (u, i) {
        var k = rateRow(s, u);
        if (k < 0) { points[s].push(null); return; }
        if (D.rates.low[k] !== null) d += 'M' + x(i, s).toFixed(1) + ' ' + y(D.rates.low[k]).toFixed(1) + 'V' + y(D.rates.high[k]).toFixed(1);
        var c = sv('circle', { 'class': u === S.universe ? 'pt sel' : 'pt', cx: x(i, s).toFixed(1), cy: y(D.rates.rate[k]).toFixed(1),
                               r: r.toFixed(1), fill: colour(s), tabindex: '-1', role: 'button', 'data-universe': U.id[u],
                               'data-system': SYS[s], 'data-i': String(i), 'data-s': String(s),
                               'aria-label': SYS[s] + ', ' + U.label[u] + ': ' + pct(D.rates.rate[k]) });
        points[s].push(c); g.appendChild(c);
      });
      whiskers.appendChild(sv('path', { 'class': 'ci', d: d, stroke: colour(s), 'data-system': SYS[s] }));
      dots.appendChild(g);
    });
    add(svg, whiskers, dots);
    // roving tabindex: one point is in the tab order, the arrow keys move between the rest
    var first = S.focus && points[S.focus[0]] && points[S.focus[0]][S.focus[1]];
    if (!first) { var s0 = shown.length ? shown[0] : -1; first = s0 >= 0 ? points[s0].filter(Boolean)[0] : null; }
    if (first) first.setAttribute('tabindex', '0');
    // the indicator panel: which option each universe uses, in the curve's order
    var row = 0;
    svg.appendChild(sv('text', { x: 4, y: indTop - 8 }, 'options'));
    A.forEach(function (ax, a) {
      ax.options.forEach(function (name, o) {
        var yy = indTop + row * rowH + a * 4, d = '';
        order.forEach(function (u, i) { if (U.options[a][u] === o) d += 'M' + (L + step * i).toFixed(1) + ' ' + yy + 'h' + Math.max(step - 0.3, 0.6).toFixed(2) + 'v' + (rowH - 3) + 'h-' + Math.max(step - 0.3, 0.6).toFixed(2) + 'z'; });
        var label = sv('text', { 'class': 'row-label' + (S.exclude[a][o] ? ' off' : ''), x: L - 6, y: yy + rowH - 4,
                                 'text-anchor': 'end', 'data-axis': ax.name, 'data-option': name }, ax.name + ': ' + name);
        label.addEventListener('click', function () { toggle(a, o, !S.exclude[a][o]); });
        add(svg, sv('line', { 'class': 'grid', x1: L, x2: W - R, y1: yy + rowH - 1.5, y2: yy + rowH - 1.5 }), label,
            sv('path', { 'class': 'ind', d: d }));
        row++;
      });
    });
    // n under the curve (the ordering system's), as specr draws it: n varies with failures and exclusions
    var maxN = 1, nd = '';
    order.forEach(function (u) { var k = rateRow(S.sort, u); if (k >= 0) maxN = Math.max(maxN, D.rates.n[k]); });
    order.forEach(function (u, i) {
      var k = rateRow(S.sort, u); if (k < 0) return;
      var h = nH * D.rates.n[k] / maxN;
      nd += 'M' + (L + step * i).toFixed(1) + ' ' + (nTop + nH - h).toFixed(1) + 'h' + Math.max(step - 0.3, 0.6).toFixed(2) + 'V' + (nTop + nH) + 'h-' + Math.max(step - 0.3, 0.6).toFixed(2) + 'z';
    });
    add(svg, sv('text', { x: 4, y: nTop + 12 }, 'n (' + SYS[S.sort] + ')'),
        sv('text', { x: L - 6, y: nTop + 8, 'text-anchor': 'end' }, String(maxN)),
        sv('text', { x: L - 6, y: nTop + nH, 'text-anchor': 'end' }, '0'),
        sv('path', { 'class': 'nbar', d: nd, 'data-role': 'n' }),
        sv('text', { x: L, y: nTop + nH + 16 }, 'universes ordered by the rate of ' + SYS[S.sort] + ' (' + n + ' shown)'));
    // brushing: drag across the plot to mark a range of universes
    var start = null;
    function at(evt) { var p = svg.getBoundingClientRect(), vx = (evt.clientX - p.left) * W / p.width;
                       return Math.max(0, Math.min(n - 1, Math.floor((vx - L) / step))); }
    bg.addEventListener('mousedown', function (evt) { start = at(evt); evt.preventDefault(); });
    svg.addEventListener('mouseup', function (evt) {
      if (start === null) return;
      var end = at(evt); S.brush = end === start ? null : [start, end]; start = null; update();
    });
    svg.addEventListener('mouseover', function (evt) { if (evt.target.classList.contains('pt')) showTip(evt.target); });
    svg.addEventListener('mouseout', function (evt) { if (evt.target.classList.contains('pt')) tip.hidden = true; });
    svg.addEventListener('focusin', function (evt) { if (evt.target.classList.contains('pt')) showTip(evt.target); });
    svg.addEventListener('focusout', function () { tip.hidden = true; });
    svg.addEventListener('click', function (evt) { if (evt.target.classList.contains('pt')) openPoint(evt.target); });
    svg.addEventListener('keydown', function (evt) { if (evt.target.classList.contains('pt')) keyNav(evt, shown); });
    clear(curveBox).appendChild(svg);
    clear(legend);
    shown.forEach(function (s) {
      var sw = el('span', { 'class': 'swatch' }); sw.style.background = colour(s);
      legend.appendChild(add(el('span'), sw, document.createTextNode(SYS[s])));
    });
  }
  function showTip(c) {
    var u = uById[c.getAttribute('data-universe')], s = +c.getAttribute('data-s'), k = rateRow(s, u);
    var lines = [SYS[s] + (u === D.primary ? ' · primary universe' : '')];
    A.forEach(function (ax, a) { lines.push(ax.name + ': ' + option(a, u)); });
    lines.push(RATE + ' ' + pct(D.rates.rate[k]) + '  CI ' + pct(D.rates.low[k]) + ' – ' + pct(D.rates.high[k]));
    lines.push('n ' + D.rates.n[k] + ' (' + D.rates.k[k] + ' ' + COUNTED + ')');
    tip.textContent = lines.join('\n');
    var box = c.getBoundingClientRect();
    tip.hidden = false;
    tip.style.left = Math.min(window.innerWidth - tip.offsetWidth - 8, box.right + 8) + 'px';
    tip.style.top = Math.max(4, box.top - tip.offsetHeight - 6) + 'px';
  }
  function keyNav(evt, shown) {
    var c = evt.target, s = +c.getAttribute('data-s'), i = +c.getAttribute('data-i'), next = null;
    function along(step) { for (var j = i + step; j >= 0 && j < order.length; j += step) if (points[s][j]) return points[s][j]; return null; }
    function across(step) { var k = shown.indexOf(s); for (k += step; k >= 0 && k < shown.length; k += step) if (points[shown[k]][i]) return points[shown[k]][i]; return null; }
    if (evt.key === 'ArrowRight') next = along(1);
    else if (evt.key === 'ArrowLeft') next = along(-1);
    else if (evt.key === 'ArrowUp') next = across(-1);
    else if (evt.key === 'ArrowDown') next = across(1);
    else if (evt.key === 'Home') next = points[s].filter(Boolean)[0];
    else if (evt.key === 'End') next = points[s].filter(Boolean).pop();
    else if (evt.key === 'Enter' || evt.key === ' ') { evt.preventDefault(); openPoint(c); return; }
    else return;
    evt.preventDefault();
    if (!next) return;
    c.setAttribute('tabindex', '-1'); next.setAttribute('tabindex', '0'); next.focus();
    S.focus = [+next.getAttribute('data-s'), +next.getAttribute('data-i')];
  }
  function openPoint(c) {
    S.focus = [+c.getAttribute('data-s'), +c.getAttribute('data-i')];
    openUniverse(uById[c.getAttribute('data-universe')], true);
  }

  // ------------------------------------------------------------------ rank chart and summary numbers
  // Ranks come with the document, from the ranking analysis (competition rank, 1 = highest rate, and the size
  // of the tie): a tie of t systems shares its t positions, 1/t each, so shares sum to 1 like P(top).
  function addPositions(counts, u) {
    for (var s = 0; s < NS; s++) {
      var k = rateRow(s, u); if (k < 0) continue;
      var r = D.rates.rank[k], t = D.rates.tied[k];
      for (var q = r - 1; q < r - 1 + t && q < NS; q++) counts[s][q] += 1 / t;
    }
  }
  function drawSummary() {
    var sel = order, brushed = null;
    if (S.brush) { var b0 = Math.min(S.brush[0], S.brush[1]), b1 = Math.max(S.brush[0], S.brush[1]); brushed = order.slice(b0, b1 + 1); }
    var base = brushed || sel;
    clear(facts);
    add(facts, add(el('li'), el('b', null, sel.length), document.createTextNode(' of ' + NU + ' universes selected')));
    if (brushed) add(facts, add(el('li'), el('b', null, brushed.length), document.createTextNode(' brushed (summary and ranks below)')));
    var counts = SYS.map(function () { return new Array(NS).fill(0); }), rates = SYS.map(function () { return []; });
    base.forEach(function (u) {
      addPositions(counts, u);
      for (var s = 0; s < NS; s++) { var k = rateRow(s, u); if (k >= 0) rates[s].push(D.rates.rate[k]); }
    });
    // rank chart: share of the selected universes in which each system takes each rank
    var cw = 64, ch = 30, L = 120, svg = sv('svg', { 'class': 'chart', id: 'rank-chart', viewBox: '0 0 ' + (L + cw * NS + 10) + ' ' + (ch * NS + 34),
                                             width: String(L + cw * NS + 10), height: String(ch * NS + 34),
                                             role: 'img', 'aria-label': 'share of selected universes in which each system takes each rank' });
    for (var r = 0; r < NS; r++) svg.appendChild(sv('text', { x: L + cw * r + cw / 2, y: 12, 'text-anchor': 'middle' }, 'rank ' + (r + 1)));
    var total = base.length;  // shares of every selected universe, as the ranking analysis's are of all of them
    SYS.forEach(function (name, s) {
      svg.appendChild(sv('text', { x: L - 6, y: 20 + ch * s + ch / 2 + 4, 'text-anchor': 'end' }, name));
      counts[s].forEach(function (c, r) {
        var share = total ? c / total : 0;
        add(svg, sv('rect', { x: L + cw * r + 1, y: 20 + ch * s + 1, width: cw - 2, height: ch - 2, fill: colour(s),
                              'fill-opacity': (0.06 + 0.94 * share).toFixed(3), 'data-system': name, 'data-rank': String(r + 1),
                              'data-share': share.toFixed(4) }),
            sv('text', { x: L + cw * r + cw / 2, y: 20 + ch * s + ch / 2 + 4, 'text-anchor': 'middle' }, total ? Math.round(100 * share) + '%' : ''));
      });
    });
    clear(rankBox).appendChild(svg);
    var rowsOut = SYS.map(function (name, s) {
      var v = rates[s], p = D.primary !== null ? rateRow(s, D.primary) : -1;
      return { cells: [name, v.length, pct(median(v)), v.length ? pct(Math.min.apply(null, v)) + ' – ' + pct(Math.max.apply(null, v)) : '—',
                       p >= 0 ? pct(D.rates.rate[p]) : '—', total ? pct(counts[s][0] / total) : '—'] };
    });
    clear(summaryBox).appendChild(table(['system', 'universes', 'median ' + RATE, 'range', 'primary', 'ranked first'], rowsOut));
    summaryBox.appendChild(el('p', { 'class': 'note' }, 'Ranked first and the rank chart are shares of the selected universes; ' +
      'systems tied on a rate share the positions they tie for (two tied for first: half a universe each), as P(top) ' +
      'in the ranking section does, so the shares ranked first add up to 100%.'));
    if (brushed && brushed.length) {  // which options the brushed range over-represents, as boba shows
      var lines = [];
      A.forEach(function (ax, a) {
        ax.options.forEach(function (name, o) {
          var inB = brushed.filter(function (u) { return U.options[a][u] === o; }).length;
          var inS = sel.filter(function (u) { return U.options[a][u] === o; }).length;
          if (inS) lines.push({ cells: [ax.name, name, pct(inB / brushed.length), pct(inS / sel.length)] });
        });
      });
      add(summaryBox, el('h3', null, 'Options in the brushed range'), table(['axis', 'option', 'share brushed', 'share selected'], lines));
    }
    document.body.setAttribute('data-selected', String(sel.length));
  }

  // ------------------------------------------------------------------ universe view
  function optionDiff(u, ref) {
    return A.map(function (ax, a) { return U.options[a][u] !== U.options[a][ref] ? ax.name + '=' + option(a, u) : null; }).filter(Boolean);
  }
  function openUniverse(u, scroll) {
    if (S.universe !== u) { S.kase = null; S.ksys = null; }
    S.universe = u;
    Array.prototype.forEach.call(curveBox.querySelectorAll('.pt'), function (c) {
      c.setAttribute('class', c.getAttribute('data-universe') === U.id[u] ? 'pt sel' : 'pt');
    });
    clear(universeBox);
    add(universeBox, el('h2', null, 'Universe ' + U.id[u] + (u === D.primary ? ' (primary)' : '')), el('p', { 'class': 'note' }, U.label[u]));
    var p = D.primary;
    universeBox.appendChild(table(['axis', 'option', 'primary universe'], A.map(function (ax, a) {
      var diff = p !== null && U.options[a][u] !== U.options[a][p];
      return { cls: diff ? 'diff' : null, cells: [ax.name, option(a, u), p === null ? '—' : diff ? option(a, p) : 'same'] };
    })));
    var diffs = p !== null && p !== u ? optionDiff(u, p) : [];
    if (diffs.length) universeBox.appendChild(el('p', { 'class': 'note' }, 'Differs from the primary in: ' + diffs.join(', ')));
    universeBox.appendChild(el('h3', null, 'Rates per system'));
    universeBox.appendChild(table(['system', 'n', COUNTED, RATE, 'CI (' + D.ci + ')', RATE + ' at primary'], SYS.map(function (name, s) {
      var k = rateRow(s, u), q = p !== null ? rateRow(s, p) : -1;
      return { cells: [name, k >= 0 ? D.rates.n[k] : 0, k >= 0 ? D.rates.k[k] : 0, k >= 0 ? pct(D.rates.rate[k]) : '—',
                       k >= 0 ? pct(D.rates.low[k]) + ' – ' + pct(D.rates.high[k]) : '—', q >= 0 ? pct(D.rates.rate[q]) : '—'] };
    })));
    var cmpBtn = el('button', { type: 'button', id: 'compare-primary' }, p !== null && p !== u ? 'compare with the primary universe' : 'compare with the next universe');
    cmpBtn.addEventListener('click', function () { S.cmp = { kind: 'u', a: u, b: p !== null && p !== u ? p : (u + 1) % NU }; drawCompare(true); writeFragment(); });
    if (NU > 1) universeBox.appendChild(cmpBtn);
    var cases = el('div', { id: 'cases' }, 'Loading the cases…');
    var detail = el('div', { id: 'case-detail' });
    add(universeBox, el('h3', null, 'Cases: verdict per system'), cases, detail);
    writeFragment();
    if (scroll) universeBox.scrollIntoView({ block: 'start' });
    return rows().then(function (R) {
      if (S.universe !== u) return;
      var byCase = {};
      SYS.forEach(function (_, s) {
        (IX.cell[u + ':' + s] || []).forEach(function (i) { var c = R.case[i]; (byCase[c] = byCase[c] || {}); (byCase[c][s] = byCase[c][s] || []).push(i); });
      });
      var ids = Object.keys(byCase).map(Number).sort(function (a, b) { return a - b; });
      var out = ids.slice(0, MAX_CASES).map(function (c) {
        var cells = [D.cases.id[c]];
        D.cases.factors.forEach(function (f) { cells.push(f.levels[f.codes[c]]); });
        SYS.forEach(function (_, s) {
          var span = el('span');
          (byCase[c][s] || []).forEach(function (i) {
            span.appendChild(verdictChip(R.verdict[i], function () { openCase(u, c, s); }));
            span.lastChild.setAttribute('data-case', D.cases.id[c]); span.lastChild.setAttribute('data-system', SYS[s]);
          });
          cells.push(span);
        });
        return { cells: cells };
      });
      clear(cases).appendChild(table(['case'].concat(D.cases.factors.map(function (f) { return f.name; }), SYS), out));
      if (ids.length > MAX_CASES) cases.appendChild(el('p', { 'class': 'note' }, 'Showing ' + MAX_CASES + ' of ' + ids.length + ' cases.'));
      document.body.setAttribute('data-universe-open', U.id[u]);
      if (S.kase !== null) return openCase(u, S.kase, S.ksys);
    });
  }
  function openCase(u, c, s) {
    S.kase = c; S.ksys = s; writeFragment();
    var detail = document.getElementById('case-detail');
    clear(detail).appendChild(el('p', { 'class': 'note' }, 'Loading the transcript…'));
    var R, T, mine;
    return Promise.all([rows(), texts()]).then(function (both) {
      R = both[0]; T = both[1];
      mine = (IX.cell[u + ':' + s] || []).filter(function (i) { return R.case[i] === c; });
      return loadStrings(caseStrings(R, T, mine));
    }).then(function () {
      if (S.universe !== u || S.kase !== c) return;
      var panel = add(el('div', { 'class': 'panel', 'data-case': D.cases.id[c], 'data-system': SYS[s] }),
                      el('h3', null, 'Case ' + D.cases.id[c] + ' · ' + SYS[s]));
      mine.forEach(function (i) {
        var head = add(el('p'), document.createTextNode((R.replicate ? 'replicate ' + R.replicate[i] + ' · ' : '') + 'verdict: '), verdictChip(R.verdict[i]));
        if (R.reasons[R.reason[i]]) head.appendChild(document.createTextNode(' — ' + R.reasons[R.reason[i]]));
        add(panel, head, transcriptView(T, R.transcript[i]), judgesView(R, T, i));
      });
      clear(detail).appendChild(panel);
      document.body.setAttribute('data-case-open', D.cases.id[c] + ' ' + SYS[s]);
    });
  }
  function caseStrings(R, T, mine) {
    // the turns of these rows' transcripts and the rationales of every judgment of them
    var ids = [];
    mine.forEach(function (i) {
      var rec = R.transcript[i] >= 0 ? T.transcripts[R.transcript[i]] : null;
      if (rec) rec.turns.forEach(function (turn) { ids.push(turn.content); });
      (R.transcript[i] >= 0 ? IX.byTranscript[R.transcript[i]] : [i]).forEach(function (r) {
        (R.judgment[r] >= 0 ? CX[R.judgment[r]] || [] : []).forEach(function (k) { ids.push(T.criteria.rationale[k]); });
      });
    });
    return ids;
  }
  function transcriptView(T, t) {
    var box = el('div', { 'class': 'transcript' });
    var rec = t >= 0 ? T.transcripts[t] : null;
    if (!rec) return add(box, el('p', { 'class': 'note' }, 'The transcript is not in this report (no transcripts.jsonl, or a table without transcripts).'));
    box.appendChild(el('h4', null, 'Transcript'));
    rec.turns.forEach(function (turn) {
      var kind = ['user', 'assistant', 'tool'].indexOf(turn.role) >= 0 ? turn.role : 'other';
      var div = add(el('div', { 'class': 'turn ' + kind }), el('span', { 'class': 'role' }, turn.role + (turn.name ? ' (' + turn.name + ')' : '')),
                    document.createTextNode(str(turn.content)));
      (turn.calls || []).forEach(function (call) { div.appendChild(el('span', { 'class': 'call' }, '→ calls ' + call[0] + '(' + call[1] + ')')); });
      box.appendChild(div);
    });
    if (!rec.turns.length) box.appendChild(el('p', { 'class': 'note' }, 'The transcript has no turns.'));
    if (rec.status !== 'ok') box.appendChild(el('p', { 'class': 'note' }, 'Rollout status: ' + rec.status + ' ' + rec.reason));
    return box;
  }
  function judgesView(R, T, i) {
    // every judgment of this transcript, this universe's first: where two judges disagree, the reasons sit side by side
    var u = R.universe[i], groups = {}, keys = [];
    (R.transcript[i] >= 0 ? IX.byTranscript[R.transcript[i]] : [i]).forEach(function (r) {
      var j = R.judgment[r]; if (j < 0 && r !== i) return;
      if (!groups[j]) { groups[j] = []; keys.push(j); }
      groups[j].push(r);
    });
    keys.sort(function (a, b) { return (b === R.judgment[i]) - (a === R.judgment[i]); });
    var wrap = add(el('div'), el('h4', null, keys.length > 1 ? 'Judgments of this transcript (' + keys.length + ', side by side)' : 'Judgment'));
    var grid = el('div', { 'class': 'judges' });
    keys.slice(0, MAX_JUDGES).forEach(function (j) {
      var us = groups[j].map(function (r) { return R.universe[r]; });
      var col = el('div', { 'class': 'judge' + (j === R.judgment[i] ? ' mine' : ''), 'data-judgment': j >= 0 ? T.judgments[j] : '' });
      col.appendChild(el('p', null, j === R.judgment[i] ? 'This universe\'s judgment' : 'Also used by ' + us.length + ' universe(s)'));
      var other = us.filter(function (x) { return x !== u; })[0];
      if (j !== R.judgment[i] && other !== undefined) col.appendChild(el('p', { 'class': 'note' }, 'e.g. ' + U.id[other] + ': ' + (optionDiff(other, u).join(', ') || 'same options')));
      var verdicts = Object.create(null);
      groups[j].forEach(function (r) { verdicts[D.verdicts[R.verdict[r]]] = (verdicts[D.verdicts[R.verdict[r]]] || 0) + 1; });
      col.appendChild(el('p', { 'class': 'note' }, 'verdicts: ' + Object.keys(verdicts).map(function (k) { return k + ' ×' + verdicts[k]; }).join(', ')));
      var C = T.criteria, crit = j >= 0 ? (CX[j] || []).slice() : [];
      // what decided the verdict first: breached criteria, then met ones, then those that did not apply
      var weight = function (k) { return C.compliant[k] === 0 ? 0 : C.applicable[k] ? 1 : 2; };
      crit.sort(function (p, q) { return C.sample[p] - C.sample[q] || weight(p) - weight(q) || p - q; });
      if (!crit.length) col.appendChild(el('p', { 'class': 'note' }, 'No criterion-level judgment for this row.'));
      crit.forEach(function (k) {
        var f = function (x) { return x === null ? '—' : x ? 'yes' : 'no'; };
        var head = el('p', { 'class': 'crit-head' + (C.compliant[k] === 0 ? ' crit-no' : C.applicable[k] ? '' : ' crit-na') },
                      C.names[C.criterion[k]] + (C.sample[k] ? ' (sample ' + C.sample[k] + ')' : '') + ' · applies ' +
                      f(C.applicable[k]) + ' · compliant ' + f(C.compliant[k]));
        add(col, head, el('p', { 'class': 'rationale' }, str(C.rationale[k])));
      });
      grid.appendChild(col);
    });
    if (keys.length > MAX_JUDGES) wrap.appendChild(el('p', { 'class': 'note' }, 'Showing ' + MAX_JUDGES + ' of ' + keys.length + ' judgments.'));
    return add(wrap, grid);
  }

  // ------------------------------------------------------------------ compare two universes or two systems
  function drawCompare(scroll) {
    clear(compareBox).appendChild(el('h2', null, 'Compare'));
    var kind = el('select', { id: 'cmp-kind', 'aria-label': 'compare what' });
    [['u', 'two universes'], ['s', 'two systems in the open universe']].forEach(function (o) { kind.appendChild(el('option', { value: o[0] }, o[1])); });
    var cur = S.cmp || { kind: 'u', a: S.universe !== null ? S.universe : 0, b: D.primary !== null ? D.primary : Math.min(1, NU - 1) };
    kind.value = cur.kind;
    var pickA = el('select', { id: 'cmp-a', 'aria-label': 'first' }), pickB = el('select', { id: 'cmp-b', 'aria-label': 'second' });
    function fill() {
      clear(pickA); clear(pickB);
      var names = kind.value === 'u' ? U.id.map(function (id, i) { return id + ' · ' + U.label[i]; }) : SYS;
      names.forEach(function (n, i) { pickA.appendChild(el('option', { value: String(i) }, n)); pickB.appendChild(el('option', { value: String(i) }, n)); });
    }
    fill();
    if (kind.value === cur.kind) { pickA.value = String(cur.a); pickB.value = String(cur.b); }
    else if (kind.value === 's') pickB.value = String(Math.min(1, NS - 1));
    kind.addEventListener('change', function () { fill(); if (kind.value === 's') pickB.value = String(Math.min(1, NS - 1)); });
    var go = el('button', { type: 'button', id: 'cmp-go' }, 'compare');
    var out = el('div', { id: 'cmp-out' });
    go.addEventListener('click', function () {
      if (kind.value === 's' && S.universe === null) { clear(out).appendChild(el('p', { 'class': 'note' }, 'Open a universe first.')); return; }
      S.cmp = { kind: kind.value, a: +pickA.value, b: +pickB.value }; writeFragment(); runCompare(out, true);
    });
    add(compareBox, add(el('div', { 'class': 'controls' }), kind, pickA, pickB, go), out);
    if (S.cmp) runCompare(out, scroll);
  }
  function runCompare(out, scroll) {
    var c = S.cmp;
    clear(out).appendChild(el('p', { 'class': 'note' }, 'Loading…'));
    // the reader asked for it: bring the result into view (it sits under the universe, often off screen)
    if (scroll) compareBox.scrollIntoView({ block: 'start' });
    return rows().then(function (R) {
      var pairs = [];  // [label, system, case, rows of A, rows of B]
      function byCase(u, s) { var m = {}; (IX.cell[u + ':' + s] || []).forEach(function (i) { (m[R.case[i]] = m[R.case[i]] || []).push(i); }); return m; }
      if (c.kind === 'u') SYS.forEach(function (_, s) {
        var a = byCase(c.a, s), b = byCase(c.b, s);
        Object.keys(Object.assign({}, a, b)).forEach(function (k) { pairs.push([s, +k, a[k] || [], b[k] || []]); });
      });
      else { var a = byCase(S.universe, c.a), b = byCase(S.universe, c.b);
             Object.keys(Object.assign({}, a, b)).forEach(function (k) { pairs.push([null, +k, a[k] || [], b[k] || []]); }); }
      function sig(list) { return list.map(function (i) { return R.verdict[i]; }).join(','); }
      pairs.forEach(function (p) { p.push(sig(p[2]) !== sig(p[3])); });
      pairs.sort(function (x, y) { return (y[4] - x[4]) || (x[0] || 0) - (y[0] || 0) || x[1] - y[1]; });
      var nd = pairs.filter(function (p) { return p[4]; }).length;
      var nameA = c.kind === 'u' ? U.id[c.a] : SYS[c.a], nameB = c.kind === 'u' ? U.id[c.b] : SYS[c.b];
      clear(out);
      out.appendChild(el('p', { id: 'cmp-count', 'data-disagree': String(nd) }, nd + ' of ' + pairs.length + ' case verdicts differ between ' + nameA + ' and ' + nameB + ' (differences first).'));
      if (c.kind === 'u') { var d = optionDiff(c.a, c.b); out.appendChild(el('p', { 'class': 'note' }, 'Options that differ: ' + (d.join(', ') || 'none') + ' (vs ' + optionDiff(c.b, c.a).join(', ') + ')')); }
      var list = pairs.slice(0, MAX_COMPARE).map(function (p) {
        function chips(rs) { var sp = el('span'); rs.forEach(function (i) { sp.appendChild(verdictChip(R.verdict[i])); }); if (!rs.length) sp.textContent = '—'; return sp; }
        return { cls: p[4] ? 'diff' : null, cells: (c.kind === 'u' ? [SYS[p[0]]] : []).concat([D.cases.id[p[1]], chips(p[2]), chips(p[3]), p[4] ? 'differs' : 'same']) };
      });
      out.appendChild(table((c.kind === 'u' ? ['system'] : []).concat(['case', nameA, nameB, '']), list));
      if (pairs.length > MAX_COMPARE) out.appendChild(el('p', { 'class': 'note' }, 'Showing ' + MAX_COMPARE + ' of ' + pairs.length + ' rows.'));
      document.body.setAttribute('data-compare', c.kind + ' ' + nd);
      if (scroll) compareBox.scrollIntoView({ block: 'start' });
    });
  }

  // ------------------------------------------------------------------ wiring
  function update() {
    drawCurve(); drawSummary(); writeFragment();
  }
  function restore() {
    readFragment(); buildControls(); drawCurve(); drawSummary(); drawCompare();
    if (S.universe !== null && !included(S.universe)) S.universe = null;  // a shared link can name both
    if (S.universe !== null) openUniverse(S.universe, false);
    else emptyUniverse('Click a point on the curve to see its universe: options, rates, cases, transcripts and the judges\' reasons.');
  }
  window.addEventListener('hashchange', function () {
    // A link to a part of the page (#curves) is not a view to restore: keep the reader's selection.
    var h = location.hash.slice(1);
    if (h && h.indexOf('=') < 0 && document.getElementById(h)) return;
    restore();
  });
  restore();
  document.body.setAttribute('data-script-errors', String(errors));
  document.body.setAttribute('data-curve-drawn', performance.now().toFixed(0));
})();
