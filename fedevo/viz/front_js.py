"""The script of front.html: linked selection across the views, colour-by, sortable tables, live reload.

Reads ``window.FEDEVO`` and ``window.FEDEVO_FIGS`` (the figures, written by :func:`fedevo.viz.front.front_html`)
and ``fedevoNum`` (:data:`fedevo.viz.numfmt.JS_NUM`). plotly.js is deferred; on DOMContentLoaded the script draws
the views itself, the first screen first (``fedevoLoad`` at the end): the 3D view, then it wires the page
(``fedevoInit``: caps, colour, tables, selection, the 3D view's clicks), draws the projections and, once that frame
is painted, sets ``window.fedevoInteractive`` (and ``fedevoInteractiveAt``, ms since navigation); then, a painted
frame between them, the parallel coordinates and the hypervolume (each view linked and brought to the page's state
as soon as drawn: ``fedevoProjectionsDrawn``, ``fedevoParallelDrawn``), and sets ``window.fedevoReady`` /
``fedevoReadyAt``: every view drawn and linked. The selection is one sorted list of evaluation ids:

* brushing the parallel coordinates (``plotly_restyle``) selects the ids inside every brushed range;
* lasso / box select in a 2D projection (``plotly_selected``) selects those ids (with Shift held: adds them); the
  outline is not kept: plotly keeps one per panel in ``layout.selections`` and merges an old lasso of another
  panel back into the next box (the panels then disagree), so the selected points alone show the selection;
* a click on a row of the Pareto-set table adds or removes its id (the selected rows are shaded);
* a click on a point of the 3D view adds or removes its id (gl3d emits ``plotly_click`` from its render loop
  while the button is down, again after every redraw: one toggle per press, applied after the event);
* a selection made anywhere is drawn everywhere: rings in 3D (trace ``selected``), ``selectedpoints`` in 2D (the
  projections' outlines removed), and in the parallel
  coordinates a brush of one small range per id on the ``id`` axis (plotly draws exactly those lines), other
  brushes removed; the table lists them with a copyable ``fedevo retrain RUN --pick ...`` and exports them as
  CSV or JSON;
* "clear selection", a double-click in a projection or an empty brush empties every view.

Choosing within caps: a cap input per objective of the run (``FEDEVO.objectives``) and a chooser (the knee, or the
lowest value of one objective, the highest of a maximised one). A cap applies on Enter or when its box is left
(``change``: never a part of what is being typed) and is read by ``fedevoParseNum`` (:data:`fedevo.viz.numfmt.JS_NUM`)
as the page writes numbers -- 1k, 1.3k, 1,000, 1000 params, inf / Infinity / ∞ (written ``inf`` in the offered
command, as ``fedevo.picking`` reads it); an entry it cannot read keeps that objective's last valid cap (said in
``#caps-invalid``) and is never saved. Typed ranges under the parallel coordinates are read the same way; a typed end
leaves the other box as it is (empty: the axis' end, exactly), and a dragged range keeps its ends exact. The knee is ``fedevoKnee`` of
:mod:`fedevo.viz.knee_js` (the rule of ``--pick knee:eps<=X:comm<=Y``: the caps remove candidates, they do not
rescale the space), the lowest is ``--pick eps<=X,comm<=Y,lowest-NAME`` (``highest-NAME``); the rings (knee black, lowest-error ×2 red, the choice green), the Pareto
table's marks and the note (what was chosen and why, with the equivalent command) follow, and every solution
outside the caps is dimmed: grey in the 3D view, the projections and the parallel coordinates (a colour value below
the scale), greyed rows in the tables.

``window.fedevoSelect(ids)``, ``window.fedevoSelection()``, ``window.fedevoCaps({eps, comm}, 'knee')`` and
``window.fedevoExport('csv' | 'json')`` (the text of a download) let tests and users drive it. Colour choice,
caps and selection survive the live reload (sessionStorage).
"""

FRONT_JS = r"""
function fedevoInit() {
  const D = window.FEDEVO;
  const g3 = document.getElementById('front3d');
  const g2 = document.getElementById('projections');
  const gp = document.getElementById('parallel');
  const byId = new Map(D.rows.map((r, i) => [r.id, i]));
  const KEY = 'fedevo:' + D.run;
  let selected = [];
  let colourKey = D.colour_default;
  let caps = {};  // objective -> its cap (a number, ∞ allowed): valid caps only
  let capText = {};  // objective -> the text that cap was typed as (what is saved and restored)
  let chooseBy = 'knee';
  let marksNow = new Map(D.rows.map(r => [r.id, r.marks.slice()]));  // the marks as the caps make them
  let inCaps = null;  // ids within the caps (every ok evaluation); null: no caps
  let quietParallel = 0, quiet2d = false;
  // the projections and the parallel view are drawn after the page is interactive (fedevoProjectionsDrawn,
  // fedevoParallelDrawn): until then the page's state (selection, caps, colour) is only held, and drawn with them
  let g2Drawn = false, gpDrawn = false;

  function evalTraces(gd) {
    const out = [];
    gd.data.forEach((t, i) => { if (t.meta === 'evaluations') out.push(i); });
    return out;
  }

  // a change of caps moves up to three rings in each view and recolours it: collected while `batched` runs and
  // drawn by one Plotly.restyle per view (each restyle redraws a whole view; a trace that an attribute does not
  // concern gets `undefined` there, which plotly leaves as it is)
  let batch = null;  // gd -> Map(trace index -> {attribute: value})
  function restyle(gd, upd, idx) {
    if (!batch) return Plotly.restyle(gd, upd, idx);
    if (!batch.has(gd)) batch.set(gd, new Map());
    const m = batch.get(gd);
    idx.forEach((t, i) => {
      const cur = m.get(t) || {};
      Object.keys(upd).forEach(a => { const v = upd[a]; cur[a] = Array.isArray(v) ? v[i % v.length] : v; });
      m.set(t, cur);
    });
  }
  function batched(fn) {
    if (batch) return fn();
    batch = new Map();
    try { return fn(); } finally {
      const b = batch;
      batch = null;
      b.forEach((m, gd) => {
        const idx = Array.from(m.keys()), attrs = new Set();
        m.forEach(u => Object.keys(u).forEach(a => attrs.add(a)));
        const upd = {};
        attrs.forEach(a => { upd[a] = idx.map(t => m.get(t)[a]); });
        Plotly.restyle(gd, upd, idx);
      });
    }
  }

  function shellQuote(s) { return /^[A-Za-z0-9_./:=@%+,-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }

  // ------------------------------------------------------------------ views
  function show3d() {
    const k = g3.data.findIndex(t => t.meta === 'selection');
    if (k < 0) return;
    const xs = [], ys = [], zs = [], ids = [];
    const want = new Set(selected);
    for (const i of evalTraces(g3)) {
      const t = g3.data[i];
      Array.from(t.customdata).forEach((id, j) => {
        if (want.has(id)) { xs.push(t.x[j]); ys.push(t.y[j]); zs.push(t.z[j]); ids.push(id); }
      });
    }
    Plotly.restyle(g3, {x: [xs], y: [ys], z: [zs], customdata: [ids]}, [k]);
  }

  function show2d() {
    if (!g2Drawn) return;
    const idx = evalTraces(g2);
    const want = new Set(selected);
    const sp = idx.map(i => selected.length ? Array.from(g2.data[i].customdata)
      .map((id, j) => want.has(id) ? j : -1).filter(j => j >= 0) : null);
    Plotly.restyle(g2, {selectedpoints: sp}, idx);
  }

  function dropShapes() {
    // the projections' lasso / box outlines: plotly keeps one per panel and merges an old one back into the next
    // selection (the panels then disagree), so none is kept; the selected points show the selection
    if (!g2Drawn || !(g2.layout.selections || []).length) return Promise.resolve();
    quiet2d = true;
    return Promise.resolve(Plotly.relayout(g2, {selections: []})).then(() => { quiet2d = false; },
                                                                       () => { quiet2d = false; });
  }

  function showParallel() {
    // the selection as one brush range per id on the id axis: plotly highlights exactly those lines
    typedInputs().forEach(el => { el.value = ''; forgetShown(el); el.classList.remove('invalid'); });
    rangeShown.clear();
    rangeBad.clear();
    sayRanges();
    if (!gpDrawn) return;  // drawn with the selection once it is drawn
    const dims = gp.data[0].dimensions;
    const upd = {};
    dims.forEach((d, k) => { upd['dimensions[' + k + '].constraintrange'] = [null]; });
    const k = dims.findIndex(d => d.label === 'id');
    if (selected.length && k >= 0) {
      upd['dimensions[' + k + '].constraintrange'] = [selected.map(id => [id - 0.4, id + 0.4])];
    }
    restyleParallel(upd);
  }

  function restyleParallel(upd) {
    // the page's own restyle of the parallel view: plotly emits plotly_restyle after its promise, where a brush
    // emits it at once; this one's event is not a brush (counted until the event has passed)
    quietParallel++;
    return Promise.resolve(Plotly.restyle(gp, upd, [0])).finally(() => { quietParallel--; });
  }

  function fromParallel() {
    const dims = gp.data[0].dimensions;
    const active = dims.filter(d => d.constraintrange && d.constraintrange.length);
    if (!active.length) return [];
    const inRange = (v, cr) => {
      const ranges = Array.isArray(cr[0]) ? cr : [cr];
      return ranges.some(r => v >= Math.min(r[0], r[1]) && v <= Math.max(r[0], r[1]));
    };
    const ids = [];
    D.rows.forEach((r, i) => {
      if (active.every(d => inRange(d.values[i], d.constraintrange))) ids.push(r.id);
    });
    return ids;
  }

  // ------------------------------------------------------------------ the parallel view: exact brushes, units
  // plotly.js 4 parcoords reads a brush at y = height − mouse − 2·pad through unitToPaddedPx (pad = 2 px, its
  // verticalPadding) while it draws every value (ticks, lines, the brush bar) at height·(1 − paddedUnit), where
  // paddedUnit = pad/height + unit·(1 − 2·pad/height): the brushed range lay 2–3 px below the pointer (a drag from
  // tick 0.3 to tick 0.1 gave 0.0925–0.294). Scaling each axis' capture rectangle by k = height/(height − 2·pad)
  // about a shift of pad·k makes the pointer's coordinate map through unitToPaddedPx to the drawn value exactly.
  const PC_PAD = 2;
  const PAR = D.parallel;  // [{key, label, log, kind, cap}] in the order of the dimensions

  function fixBrushGeometry() {
    gp.querySelectorAll('.axis-brush rect.background').forEach(rect => {
      const d = rect.__data__;
      if (!d || !d.height) return;
      const k = d.height / (d.height - 2 * PC_PAD);
      rect.setAttribute('transform', 'translate(0 ' + (PC_PAD * k) + ') scale(1 ' + k + ')');
    });
  }

  const isInt = v => Math.abs(v - Math.round(v)) < 1e-9;
  function unitText(p, v) {  // a drawn value (log10 on a log axis) as the quantity it stands for
    if (p.cap !== null && p.cap !== undefined && Math.abs(v - p.cap) < 1e-9) return p.cap_label || '∞';
    return fedevoNum(p.log ? Math.pow(10, v) : v);
  }
  function relabelParallel() {
    // log axes labelled in the quantity's units (0.01, 0.1, 1, 10: the decades; the ticks between them, at
    // 10^0.2 steps -- 1.58, 2.51, 3.98 --, unlabelled when two decades show as ticks), integer genes at integers
    // only; plotly would snap brushes to explicit tick values
    gp.querySelectorAll('.y-axis').forEach(a => {
      const d = a.__data__, p = d && PAR[d.xIndex];
      if (!p || !(p.log || p.kind === 'int')) return;
      const ticks = Array.from(a.querySelectorAll('g.tick'));
      const decades = ticks.filter(t => isInt(t.__data__)).length;
      ticks.forEach(t => {
        const v = t.__data__, txt = t.querySelector('text');
        if (!txt) return;
        txt.textContent = p.log ? ((decades >= 2 && !isInt(v)) ? '' : unitText(p, v)) : (isInt(v) ? String(Math.round(v)) : '');
      });
    });
    gp.querySelectorAll('.axis-extent-top-text, .axis-extent-bottom-text').forEach(t => {
      const d = t.__data__, p = d && PAR[d.xIndex];
      if (!p || !p.log || !d.domainScale) return;
      const dom = d.domainScale.domain();
      t.textContent = unitText(p, t.classList.contains('axis-extent-top-text') ? dom[dom.length - 1] : dom[0]);
    });
  }

  function typedInputs() { return Array.from(document.querySelectorAll('#parallel-ranges input')); }
  function rangeInput(i, end) {
    return document.querySelector('#parallel-ranges input[data-dim="' + i + '"][data-end="' + end + '"]');
  }
  // Each axis' inputs stand for one brushed range (rangeShown: axis -> that range, as rangeKey writes it). A typed
  // range is drawn as typed: the other box is not filled in, and a later brush elsewhere leaves both as they are.
  // A brush dragged on an axis fills in its boxes (4 significant digits), each keeping the brushed end in full
  // precision (data-exact) while its text is unchanged, so that typing into the other box does not move it.
  const rangeShown = new Map();
  const rangeBad = new Map();  // axis -> why its typed range was refused (said under the inputs)
  function rangeKey(cr) {
    if (!cr || !cr.length) return '';
    const rs = (Array.isArray(cr[0]) ? cr : [cr]).map(r => [Math.min(r[0], r[1]), Math.max(r[0], r[1])]);
    return JSON.stringify(rs.map(r => r.map(v => Number(v.toPrecision(12)))).sort((a, b) => a[0] - b[0]));
  }
  function forgetShown(el) { delete el.dataset.exact; delete el.dataset.shown; }
  function sayRanges() {
    const note = document.getElementById('parallel-ranges-note');
    if (!note) return;
    note.textContent = Array.from(rangeBad.values()).join(' ');
    note.classList.toggle('invalid', rangeBad.size > 0);
  }
  function showRanges() {  // after a brush: each axis whose range the brush changed, typed into its inputs
    const dims = gp._fullData[0].dimensions;
    const axes = new Set(typedInputs().map(el => Number(el.dataset.dim)));
    axes.forEach(i => {
      const p = PAR[i], cr = dims[i] && dims[i].constraintrange, key = rangeKey(cr);
      if ((rangeShown.get(i) || '') === key) return;  // as typed (or as filled in): left as it is
      rangeShown.set(i, key);
      rangeBad.delete(i);
      ['lo', 'hi'].forEach(end => {
        const el = rangeInput(i, end);
        if (!el) return;
        el.classList.remove('invalid');
        if (!key) { el.value = ''; forgetShown(el); return; }
        const rs = Array.isArray(cr[0]) ? cr : [cr];
        const v = end === 'lo' ? Math.min(...rs.map(r => Math.min(r[0], r[1])))
                               : Math.max(...rs.map(r => Math.max(r[0], r[1])));
        const x = p.log ? Math.pow(10, v) : v;
        el.value = String(Number(x.toPrecision(4)));
        el.dataset.exact = String(v);  // the drawn value (log10 on a log axis), in full
        el.dataset.shown = el.value;
      });
    });
    sayRanges();
  }
  function typedRange(i) {  // an axis' typed range brushed: an empty end is the axis' end
    const p = PAR[i], bad = [];
    const get = end => {
      const el = rangeInput(i, end);
      if (!el) return null;
      if (el.dataset.shown !== undefined && el.value === el.dataset.shown) return Number(el.dataset.exact);
      forgetShown(el);
      const r = fedevoParseNum(el.value, p.units || []);
      el.classList.toggle('invalid', !!r.error);
      if (r.error) { bad.push('"' + el.value.trim() + '" (' + r.error + ')'); return undefined; }
      if (r.value === null) return null;
      if (!Number.isFinite(r.value)) return r.value;  // ±∞: the axis' end (∞ on top where it has a cap)
      return p.log ? Math.log10(Math.max(r.value, 1e-300)) : r.value;
    };
    let lo = get('lo'), hi = get('hi');
    const name = PAR_NAME(p);
    if (bad.length) {  // the drawn range stays what it was, and the page says why
      rangeBad.set(i, name + ': ' + bad.join(', ') + ' is not a number the page reads (0.05, 1000, 1k, 1.3k, ' +
        '1,000, inf): the range on ' + name + ' is left as it was.');
      sayRanges();
      return;
    }
    rangeBad.delete(i);
    sayRanges();
    if (!gpDrawn) return;  // (typed before the view was drawn: applied then)
    const dim = gp.data[0].dimensions[i];
    const vals = Array.from(dim.values).filter(Number.isFinite);
    const ext = dim.range ? [Math.min(dim.range[0], ...vals), Math.max(dim.range[1], ...vals)]
                          : [Math.min(...vals), Math.max(...vals)];
    const end = (v, dflt) => v === null ? dflt : v === -Infinity ? ext[0] : v === Infinity ? ext[1] : v;
    const cr = (lo === null && hi === null) ? null : [end(lo, ext[0]), end(hi, ext[1])].sort((a, b) => a - b);
    const upd = {};
    upd['dimensions[' + i + '].constraintrange'] = cr ? [cr] : [null];
    rangeShown.set(i, rangeKey(cr));  // the boxes stand for it as typed: not filled in
    restyleParallel(upd);  // the selection follows at once (its plotly_restyle comes after the promise: ignored)
    setSelection(fromParallel(), 'parallel');
  }
  const PAR_NAME = p => ({eps: 'ε', eps_paper: 'ε paper', generation: 'gen'})[p.key] || p.label;

  // ------------------------------------------------------------------ the table, the command and the export
  const COLS = [['id', 'id'], ['generation', 'gen'], ['on_front', 'Pareto'], ['mark', 'mark'], ['error', 'error'],
                ['accuracy_global', 'global acc'], ['comm', 'comm'], ['eps', 'ε'], ['eps_paper', 'ε paper']]
    .filter(([k]) => !(D.undefined || []).includes(k))  // an ε with no finite value anywhere says nothing
    // every other objective of the run (worst_client_error, ...), a maximised one said so, then the genes
    .concat((D.objectives || []).filter(o => !['error', 'comm', 'eps', 'eps_paper'].includes(o.name))
      .map(o => [o.name, o.label + (o.maximize ? ' (maximised)' : '')]))
    .concat(D.genes.map(g => [g, g]));

  function markOf(r) { return (marksNow.get(r.id) || []).join(', '); }

  function retrainCmd(pick) {  // the run by its absolute path, the rounds retrain trains for
    return 'fedevo retrain ' + shellQuote(D.run) + ' --pick ' + shellQuote(pick) + ' --rounds ' + D.retrain_rounds;
  }

  function value(r, k) {
    if (k === 'mark') return markOf(r);
    if (k === 'on_front') return r.front;
    return r[k];
  }

  function cell(v) {
    if (typeof v === 'boolean') return v ? 'yes' : '';
    if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 1000 ? String(v) : fedevoNum(v);
    return v === null || v === undefined ? '–' : String(v);
  }

  function selectedRows() { return selected.map(id => D.rows[byId.get(id)]).filter(r => r); }

  function exportText(kind) {
    // the selected rows with every column of the table (genes included) as raw values; ∞ as "inf", NaN as empty
    // (CSV) / null (JSON), as evaluations.csv and `fedevo front --json` write them
    const rows = selectedRows();
    const raw = v => typeof v === 'number' && !Number.isFinite(v) ? (Number.isNaN(v) ? null : (v > 0 ? 'inf' : '-inf')) : v;
    if (kind === 'json') {
      return JSON.stringify(rows.map(r => Object.fromEntries(COLS.map(([k]) => [k, raw(value(r, k))]))), null, 1);
    }
    const q = v => {
      const s = v === null || v === undefined ? '' : String(v);
      return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
    };
    return [COLS.map(([k]) => q(k)).join(',')].concat(rows.map(r => COLS.map(([k]) => q(raw(value(r, k)))).join(',')))
      .join('\r\n') + '\r\n';
  }

  function download(kind) {
    const text = exportText(kind);
    const blob = new Blob([text], {type: kind === 'json' ? 'application/json' : 'text/csv'});
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = 'fedevo-selection-' + (D.run_id || 'run') + '.' + kind;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
  }

  function renderTable() {
    const summary = document.getElementById('selection-summary');
    const cmd = document.getElementById('retrain-cmd');
    const box = document.getElementById('selection-table');
    if (!summary) return;
    const rows = selectedRows();
    const buttons = ['copy-cmd', 'export-csv', 'export-json'].map(id => document.getElementById(id));
    buttons.forEach(b => { if (b) b.disabled = !rows.length; });
    if (!rows.length) {
      summary.textContent = 'Nothing selected.';
      cmd.textContent = '';
      box.innerHTML = '';
      return;
    }
    const nf = rows.filter(r => r.front).length;
    summary.textContent = rows.length + ' selected (' + nf + ' on the Pareto front): ids ' +
      rows.map(r => r.id).join(', ');
    cmd.textContent = retrainCmd(rows.map(r => r.id).join(','));
    const t = document.createElement('table');
    t.className = 'sortable';
    t.id = 'selected-table';
    const head = document.createElement('tr');
    COLS.forEach(([k, h]) => { const th = document.createElement('th'); th.textContent = h; head.appendChild(th); });
    const thead = document.createElement('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    const tb = document.createElement('tbody');
    rows.forEach(r => {
      const tr = document.createElement('tr');
      if (r.front) tr.className = 'front';
      if (inCaps && !inCaps.has(r.id)) tr.classList.add('outside');
      COLS.forEach(([k], n) => {
        const td = document.createElement('td');
        if (k === 'mark') td.className = 'l';
        const v = value(r, k);
        td.textContent = cell(v);
        td.dataset.v = v === Infinity ? 'Infinity' : (v === null || v === undefined ? '' : String(v));
        tr.appendChild(td);
      });
      tb.appendChild(tr);
    });
    t.appendChild(tb);
    box.innerHTML = '';
    box.appendChild(t);
    makeSortable(t);
  }

  function toggle(id, source) {
    setSelection(selected.includes(id) ? selected.filter(x => x !== id) : selected.concat([id]), source);
  }

  const frontMarkCol = Array.from(document.querySelectorAll('#front-table thead th'))
    .findIndex(th => th.textContent === 'mark');

  function markFrontTable() {
    // the selected rows of the Pareto-set table shaded, those outside the caps dimmed, the marks as the caps make them
    const want = new Set(selected);
    document.querySelectorAll('#front-table tbody tr').forEach(tr => {
      const id = Number(tr.cells[0].dataset.v);
      tr.style.background = want.has(id) ? '#ffe3c4' : '';
      tr.classList.toggle('outside', !!inCaps && !inCaps.has(id));
      if (frontMarkCol >= 0 && byId.has(id)) {
        const m = markOf(D.rows[byId.get(id)]);
        tr.cells[frontMarkCol].textContent = m;
        tr.cells[frontMarkCol].dataset.v = m;
      }
    });
  }

  function setSelection(ids, source) {
    selected = Array.from(new Set(ids.filter(id => byId.has(id)))).sort((a, b) => a - b);
    show3d();
    dropShapes().then(show2d);
    if (source !== 'parallel') showParallel();
    renderTable();
    markFrontTable();
    save();
  }

  // ------------------------------------------------------------------ choosing within caps
  const FRONT = D.front_ids.map(id => D.rows[byId.get(id)]).filter(r => r);
  const OBJ = D.objectives;
  const objOf = k => OBJ.find(o => o.name === k) || {name: k, label: k, maximize: false};

  function capNumber(v) {  // a cap as the command line's grammar writes it (fedevo.picking: a number or inf)
    return v === Infinity ? 'inf' : String(v);
  }
  function capTerms() {  // the caps as pick terms, in the objectives' order: eps<=0.05, comm<=1000, eps<=inf
    return OBJ.filter(o => o.name in caps).map(o => o.name + (o.maximize ? '>=' : '<=') + capNumber(caps[o.name]));
  }
  function readCap(k, v) {  // a typed cap (or a number from fedevoCaps): {value} (null: no cap) or {error}
    if (v === null || v === undefined) return {value: null};
    const r = typeof v === 'number' ? (Number.isNaN(v) ? {error: 'not a number'} : {value: v})
                                    : fedevoParseNum(v, objOf(k).units || []);
    if (r.value === -Infinity) return {error: '−∞ is no cap'};
    return r;
  }
  function withUnit(o, v) {  // a value as the page writes it, with its objective's unit: "12 ms", "624 params/round/client slot"
    const s = fedevoNum(v);
    return o.unit && v !== null && v !== undefined && Number.isFinite(Number(v)) ? s + ' ' + o.unit : s;
  }
  function capWords() {
    return OBJ.filter(o => o.name in caps)
      .map(o => o.label + (o.maximize ? ' ≥ ' : ' ≤ ') + withUnit(o, caps[o.name])).join(', ');
  }
  function lowestOf(rows, key, n, highest) {
    // fedevo.picking.lowest (highest: the highest `key` first): ties by the other objectives, each towards its
    // better end (missing values last), then id
    const others = OBJ.map(o => o.name).filter(k => k !== key);
    const v = (r, k) => {
      const x = r[k];
      if (x === null || x === undefined || Number.isNaN(Number(x))) return Infinity;
      return (k === key ? highest : objOf(k).maximize) ? -Number(x) : Number(x);
    };
    return rows.slice().sort((a, b) => {
      for (const k of [key].concat(others)) { const d = v(a, k) - v(b, k); if (d) return d; }
      return a.id - b.id;
    }).slice(0, n);
  }
  function values(r) {
    return OBJ.map(o => o.label + ' ' + withUnit(o, r[o.name])).join(', ');
  }

  function setCaps(c, mode) {
    // c: objective -> typed text (or a number). A valid entry sets its cap (empty: none); an entry the page cannot
    // read leaves that objective's previous cap as it was (never a part of what is typed) and is said in
    // #caps-invalid; nothing invalid is saved. Then everything is drawn for the caps in force.
    if (mode) chooseBy = mode;
    const prev = caps, prevText = capText, bad = [];
    caps = {};
    capText = {};
    Object.keys(c || {}).forEach(k => {
      const r = readCap(k, c[k]);
      const el = capInputs[k];
      if (el) el.classList.toggle('invalid', !!r.error);
      if (el) el.setAttribute('aria-invalid', r.error ? 'true' : 'false');
      if (r.error) {
        bad.push(objOf(k).label + ' "' + String(c[k]).trim() + '" (' + r.error + ') — ' + (k in prev ?
          'still ' + objOf(k).label + (objOf(k).maximize ? ' ≥ ' : ' ≤ ') + withUnit(objOf(k), prev[k]) : 'still no cap on ' +
          objOf(k).label));
        if (k in prev) { caps[k] = prev[k]; capText[k] = prevText[k]; }
      } else if (r.value !== null) {
        caps[k] = r.value;
        capText[k] = typeof c[k] === 'number' ? capNumber(c[k]) : String(c[k]).trim();
      }
    });
    const invalid = document.getElementById('caps-invalid');
    if (invalid) {
      invalid.textContent = bad.length ? 'Not read: ' + bad.join('; ') + '. The views show the caps in force. ' +
        'Write a cap as the page writes numbers: 0.05, 1000, 1k, 1.3k, 1,000, 1000 params, or inf for no bound.' : '';
    }
    const note = document.getElementById('knee-note');
    const capped = Object.keys(caps).length > 0;
    const words = capWords();
    const within = FRONT.filter(r => fedevoWithin(r, caps, OBJ));
    // the knee over every objective of the run, as picking.knee (OBJ leaves out an ε no row defines; the
    // number of objectives sets pymoo's neighbourhood)
    const res = fedevoKnee(FRONT, caps, D.knee_bar, D.knee_objectives);
    const low = lowestOf(within, 'error', 2);
    // the marks, as `fedevo front --pick` gives them for these caps: knee:CAPS and CAPS,lowest-error:2
    marksNow = new Map(D.rows.map(r => [r.id, []]));
    low.forEach((r, k) => marksNow.get(r.id).push('lowest-error #' + (k + 1)));
    if (res.row) marksNow.get(res.row.id).push(capped ? 'knee (' + words + ')' : 'knee');
    let chosen = null, why = '', spec = '';
    if (chooseBy === 'knee') {
      chosen = res.row;
      spec = capped ? 'knee:' + capTerms().join(':') : 'knee';
      if (chosen) {
        why = 'the knee' + (capped ? ' within ' + words : '') + ': ' + (res.how === 'pymoo HighTradeoffPoints' ?
          'a high trade-off point of the front (pymoo HighTradeoffPoints), the one closest to the ideal point' :
          'closest to the ideal point (' + res.how.replace(/^closest to the ideal point \(|\)$/g, '') + ')') +
          (res.of === 1 ? '; the only Pareto solution better than chance' :
           '; measured over all ' + res.of + ' Pareto solutions better than chance') +
          (capped ? ' (the caps remove candidates, they do not rescale the space: ' + res.candidates + ' left)' : '');
      }
    } else {
      const way = chooseBy.startsWith('highest-') ? 'highest' : 'lowest';  // lowest-NAME, or highest-NAME
      const key = chooseBy.slice(way.length + 1);
      chosen = lowestOf(within, key, 1, way === 'highest')[0] || null;
      spec = capTerms().concat([chooseBy]).join(',');
      if (chosen) {
        why = 'the ' + way + ' ' + objOf(key).label + ' among the ' + within.length + ' Pareto solution' +
          (within.length === 1 ? '' : 's') + (capped ? ' within ' + words : '') + ' (ties: the other objectives, then id)';
        // as `fedevo front --pick` says it in its reasons (fedevo.picking.pick): picked, and said
        if (D.knee_bar != null && chosen.error != null && chosen.error >= D.knee_bar)
          why += '; not clearly better than chance (error ≥ ' + fedevoNum(D.knee_bar) + ')';
        if (!marksNow.get(chosen.id).some(m => m.startsWith(chooseBy))) marksNow.get(chosen.id).push(chooseBy);
      }
    }
    inCaps = capped ? new Set(D.rows.filter(r => fedevoWithin(r, caps, OBJ)).map(r => r.id)) : null;
    batched(() => {  // one redraw per view
      moveRing('knee', res.row ? [res.row.id] : []);
      moveRing('lowest error ×2', low.map(r => r.id));
      moveRing('chosen', chosen ? [chosen.id] : []);
      colour(colourKey);  // (a view whose colours do not change is not redrawn)
    });
    let text;
    if (chosen) {
      text = 'Chosen: id ' + chosen.id + ' (' + values(chosen) + ') — ' + why + '. The same as ' + retrainCmd(spec) +
        ' (preview: fedevo front ' + shellQuote(D.run) + ' --pick ' + shellQuote(spec) + ').';
      if (chooseBy !== 'knee') {
        text += res.row ? ' The knee within these caps is id ' + res.row.id + ' (' + values(res.row) + ').' :
          ' No knee within these caps.';
      }
    } else if (!within.length) {
      text = capped ? 'No Pareto solution is within ' + words + ': nothing is chosen and no knee is marked.'
                    : 'No Pareto solution yet: no knee is marked.';
    } else {
      text = 'None of the ' + res.within + ' Pareto solution' + (res.within === 1 ? '' : 's') +
        (capped ? ' within ' + words : '') + ' is clearly better than chance (error < ' + fedevoNum(D.knee_bar) +
        '): no knee is marked.';
    }
    if (capped) {
      text += ' ' + inCaps.size + ' of ' + D.rows.length + ' evaluations (' + within.length + ' of ' + FRONT.length +
        ' Pareto solutions) are within the caps; the rest are dimmed.';
    }
    if (note) note.textContent = text;
    markFrontTable();
    renderTable();
    save();
    return Object.assign(res, {chosen: chosen, spec: spec, within_ids: within.map(r => r.id),
                               caps: Object.assign({}, caps), invalid: bad});
  }

  const ringsDrawn = new Map();  // view -> {name: the ids its rings are drawn on} (as written: Python's marks)
  const ringsWanted = {};  // name -> the ids the caps put its rings on
  function ringsOf(gd) {
    const o = {};
    gd.data.forEach(t => {
      if (t.meta === 'mark') o[t.legendgroup] = Array.from(t.customdata).sort((a, b) => a - b).join(',');
    });
    return o;
  }
  ringsDrawn.set(g3, ringsOf(g3));

  function moveRing(name, ids) {
    // the rings (the traces called `name`) onto the points `ids` of each view's evaluations (only when they move:
    // every restyle redraws a whole view); a view not drawn yet gets them when drawn
    ringsWanted[name] = ids.slice();
    const key = ids.slice().sort((a, b) => a - b).join(',');
    const want = new Set(ids);
    for (const gd of [g3, g2]) {
      const drawn = ringsDrawn.get(gd);
      if (!drawn || drawn[name] === key) continue;
      drawn[name] = key;
      gd.data.forEach((t, k) => {
        if (t.meta !== 'mark' || t.legendgroup !== name) return;
        const src = evalTraces(gd).map(i => gd.data[i]).filter(e => (e.xaxis || 'x') === (t.xaxis || 'x'));
        const upd = {x: [], y: [], customdata: [], text: []};
        if (t.type === 'scatter3d') upd.z = [];
        for (const e of src) {
          Array.from(e.customdata).forEach((id, j) => {
            if (!want.has(id)) return;
            upd.x.push(e.x[j]); upd.y.push(e.y[j]); upd.customdata.push(id); upd.text.push(e.text[j]);
            if (upd.z) upd.z.push(e.z[j]);
          });
        }
        Object.keys(upd).forEach(key => { upd[key] = [upd[key]]; });
        restyle(gd, upd, [k]);
      });
    }
  }

  // ------------------------------------------------------------------ colour by
  const scaleShown = new Map();  // trace -> whether the page was written with its colour bar shown
  const noteScales = gd => gd.data.forEach(t => { if (t.marker) scaleShown.set(t, !!t.marker.showscale); });
  noteScales(g3);
  const DIM = '#d2d2d2', DIM_AT = 0.04;  // outside the caps: grey, below the colour scale (its lowest 4 %)

  function colour(key) {
    // every view coloured by `key`; solutions outside the caps get a value below the scale's range, drawn grey
    const c = D.colour[key];
    if (!c) return;
    colourKey = key;
    const fin = c.draw.filter(v => Number.isFinite(v));
    const lo = Math.min(...fin), hi = Math.max(...fin);
    const cmax = hi > lo ? hi : lo + 1;
    const dim = !!inCaps;
    const cmin = dim ? lo - DIM_AT / (1 - DIM_AT) * (cmax - lo) : lo;
    const scale = dim ? [[0, DIM], [DIM_AT / 2, DIM]].concat(D.scale.map(([f, col]) => [DIM_AT + f * (1 - DIM_AT), col]))
                      : D.scale;
    const val = id => (dim && !inCaps.has(id)) ? cmin : c.draw[byId.get(id)];
    const tv = dim ? [cmin].concat(c.tickvals) : c.tickvals;
    const tt = dim ? ['outside caps'].concat(c.ticktext) : c.ticktext;
    const bar = {title: {text: c.label, side: 'right'}, thickness: 14, len: 0.6, tickvals: tv, ticktext: tt};
    const state = key + '|' + (dim ? Array.from(inCaps).sort((a, b) => a - b).join(',') : '');
    for (const gd of [g3, g2]) {
      if (colourDrawn.get(gd) === state || (gd === g2 && !g2Drawn)) continue;  // drawn so already: no redraw
      colourDrawn.set(gd, state);
      const idx = evalTraces(gd);
      const colours = idx.map(i => Array.from(gd.data[i].customdata).map(val));
      const upd = {'marker.color': colours, 'marker.cmin': idx.map(() => cmin), 'marker.cmax': idx.map(() => cmax),
                   'marker.colorscale': idx.map(() => scale),
                   'marker.colorbar.title.text': idx.map(() => c.label), 'marker.colorbar.tickvals': idx.map(() => tv),
                   'marker.colorbar.ticktext': idx.map(() => tt),
                   // a colour bar's keys switch plotly's showscale on: the one trace that shows the bar keeps it
                   'marker.showscale': idx.map(i => !!scaleShown.get(gd.data[i]))};
      restyle(gd, upd, idx);  // one redraw per view (with the rings, when the caps changed)
    }
    if (colourDrawn.get(gp) !== state) {
      colourDrawn.set(gp, state);
      parallelColour = {'line.color': [D.rows.map(r => val(r.id))], 'line.cmin': cmin, 'line.cmax': cmax,
                        'line.colorscale': [scale], 'line.colorbar': bar};
      if (gpDrawn) colourParallelSoon();
    }
    const sel = document.getElementById('colour-by');
    if (sel && sel.value !== key) sel.value = key;
    save();
  }

  // what each view is coloured by, as drawn ("KEY|ids within the caps"): the page is written coloured by the default
  const colourDrawn = new Map([g3, g2, gp].map(gd => [gd, D.colour_default + '|']));
  let parallelColour = null;  // the parallel view's colours to draw (null: as written)
  let parallelSoon = 0;
  function colourParallel() {
    if (parallelSoon) { cancelAnimationFrame(parallelSoon); parallelSoon = 0; }
    if (parallelColour) restyleParallel(parallelColour);
  }
  function colourParallelSoon() {
    // the parallel view (a WebGL redraw of every line: the costliest) recoloured at the next frame, once for
    // several changes in a row (typing a cap)
    if (!parallelSoon) parallelSoon = requestAnimationFrame(() => { parallelSoon = 0; colourParallel(); });
  }

  // ------------------------------------------------------------------ sortable tables
  // a header, or a row of the Pareto set, is reached with Tab and acts on Enter or Space as on a click
  function byKey(el) {
    el.tabIndex = 0;
    el.addEventListener('keydown', ev => {
      if (ev.key !== 'Enter' && ev.key !== ' ') return;
      ev.preventDefault();  // (Space would scroll the page)
      el.click();
    });
  }
  function makeSortable(t) {
    const ths = t.querySelectorAll('thead th');
    ths.forEach((th, n) => {
      byKey(th);
      th.addEventListener('click', () => {
        const asc = !th.classList.contains('asc');
        ths.forEach(h => h.classList.remove('asc', 'desc'));
        th.classList.add(asc ? 'asc' : 'desc');
        const tb = t.tBodies[0];
        const rows = Array.from(tb.rows);
        const key = r => {
          const s = r.cells[n].dataset.v !== undefined ? r.cells[n].dataset.v : r.cells[n].textContent;
          const x = s === 'Infinity' ? Infinity : (s === '' ? NaN : Number(s));
          return Number.isNaN(x) ? s : x;
        };
        rows.sort((a, b) => {
          const x = key(a), y = key(b);
          const nx = typeof x === 'number', ny = typeof y === 'number';
          let c = nx && ny ? x - y : nx ? -1 : ny ? 1 : String(x).localeCompare(String(y));
          if (Number.isNaN(c)) c = 0;
          return asc ? c : -c;
        });
        rows.forEach(r => tb.appendChild(r));
      });
    });
  }

  // ------------------------------------------------------------------ state across live reloads
  function save() {
    try {
      // the caps as their valid texts ("1k", "inf"): never an invalid one, never a number JSON cannot hold (∞)
      sessionStorage.setItem(KEY, JSON.stringify({selected: selected, colour: colourKey, caps: capText,
                                                  choose: chooseBy}));
    } catch (e) {}
  }
  function restore() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch (e) { return null; }
  }

  // ------------------------------------------------------------------ wiring
  window.fedevoParallelDrawn = () => {
    // the parallel view, drawn after the rest: linked, then given the page's state (colour, caps, selection,
    // typed ranges) where it differs from what it was drawn with
    gpDrawn = true;
    gp.on('plotly_restyle', () => { if (!quietParallel) { showRanges(); setSelection(fromParallel(), 'parallel'); } });
    gp.addEventListener('pointerdown', fixBrushGeometry, true);  // before d3's mousedown reads the pointer
    gp.on('plotly_afterplot', () => { fixBrushGeometry(); relabelParallel(); });
    fixBrushGeometry();
    relabelParallel();
    if (parallelColour) colourParallel();
    if (selected.length) showParallel();
    const typed = new Set(typedInputs().filter(el => el.value.trim() !== '').map(el => Number(el.dataset.dim)));
    typed.forEach(i => typedRange(i));
  };
  typedInputs().forEach(el => el.addEventListener('change', () => typedRange(Number(el.dataset.dim))));
  let shift = false;  // a lasso / box drawn with Shift held adds to the selection
  window.fedevoProjectionsDrawn = () => {
    // the projections, drawn after the first screen: linked, then given the page's rings, colours and selection
    g2Drawn = true;
    noteScales(g2);
    ringsDrawn.set(g2, ringsOf(g2));
    batched(() => {
      Object.keys(ringsWanted).forEach(name => moveRing(name, ringsWanted[name]));
      colour(colourKey);
    });
    if (selected.length) show2d();
    g2.addEventListener('pointerdown', ev => { shift = ev.shiftKey; }, true);
    g2.on('plotly_selected', ev => {
      if (quiet2d || !ev || !ev.points) return;
      const ids = ev.points.filter(p => p.data.meta === 'evaluations').map(p => p.customdata);
      const add = shift;
      setTimeout(() => setSelection(add ? selected.concat(ids) : ids, 'lasso'), 0);  // after plotly's own update
    });
    g2.on('plotly_deselect', () => { if (!quiet2d) setSelection([], 'clear'); });
  };

  let pressed = false, tookPress = false;
  window.addEventListener('pointerdown', () => { pressed = true; tookPress = false; }, true);
  window.addEventListener('pointerup', () => { pressed = false; }, true);
  g3.on('plotly_click', ev => {
    const p = ev && ev.points && ev.points.find(q => q.data.meta === 'evaluations' || q.data.meta === 'mark');
    if (!p || (pressed && tookPress)) return;  // gl3d repeats the click on every redraw while the button is down
    tookPress = pressed;
    const id = p.customdata;
    setTimeout(() => toggle(id, 'click'), 0);
  });
  const frontTable = document.getElementById('front-table');
  if (frontTable) {
    frontTable.tBodies[0].addEventListener('click', ev => {
      const tr = ev.target.closest('tr');
      if (tr) toggle(Number(tr.cells[0].dataset.v), 'table');
    });
    Array.from(frontTable.tBodies[0].rows).forEach(byKey);
  }
  document.getElementById('clear-selection').addEventListener('click', () => setSelection([], 'clear'));
  document.getElementById('export-csv').addEventListener('click', () => download('csv'));
  document.getElementById('export-json').addEventListener('click', () => download('json'));
  document.getElementById('copy-cmd').addEventListener('click', () => {
    const text = document.getElementById('retrain-cmd').textContent;
    const done = () => { document.getElementById('copy-cmd').textContent = 'copied'; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => {});
    } else {
      const r = document.createRange();
      r.selectNodeContents(document.getElementById('retrain-cmd'));
      const s = window.getSelection();
      s.removeAllRanges();
      s.addRange(r);
      try { document.execCommand('copy'); done(); } catch (e) {}
    }
  });
  const sel = document.getElementById('colour-by');
  sel.addEventListener('change', () => colour(sel.value));
  const capInputs = Object.fromEntries(Array.from(document.querySelectorAll('#knee-caps input.cap'))
    .map(el => [el.dataset.key, el]));
  const chooser = document.getElementById('choose-by');
  const readCaps = () => Object.fromEntries(Object.entries(capInputs).map(([k, el]) => [k, el.value]));
  // a cap applies on Enter or when its box is left (change), never a part of what is being typed ("1" of "1,000")
  Object.values(capInputs).forEach(el => {
    el.addEventListener('change', () => setCaps(readCaps()));
    el.addEventListener('input', () => el.classList.remove('invalid'));
  });
  chooser.addEventListener('change', () => setCaps(readCaps(), chooser.value));
  document.querySelectorAll('table.sortable').forEach(makeSortable);

  window.fedevoSelect = ids => setSelection(ids, 'api');
  window.fedevoSelection = () => selected.slice();
  window.fedevoColour = colour;
  window.fedevoCaps = (c, mode) => {  // ({eps: 2, comm: 5000}, 'knee' | 'lowest-error' ...); fills the inputs too
    const want = {};
    Object.entries(c || {}).forEach(([k, v]) => { want[k === 'eps' && !(k in capInputs) ? D.eps_key : k] = v; });
    Object.entries(capInputs).forEach(([k, el]) => {
      el.value = want[k] === null || want[k] === undefined ? '' : typeof want[k] === 'number' ?
        capNumber(want[k]) : String(want[k]);
    });
    if (mode) chooser.value = mode;
    return setCaps(readCaps(), chooser.value);
  };
  window.fedevoExport = exportText;

  const st = restore();
  if (st && st.colour && st.colour !== colourKey) colour(st.colour);
  if (st && st.caps && typeof st.caps === 'object') {  // only caps the page reads (a stored null or NaN: none)
    Object.entries(capInputs).forEach(([k, el]) => {
      const v = st.caps[k];
      if ((typeof v === 'string' || typeof v === 'number') && !readCap(k, v).error && readCap(k, v).value !== null) {
        el.value = typeof v === 'number' ? capNumber(v) : v;
      }
    });
  }
  if (st && st.choose && chooser.querySelector('option[value="' + st.choose + '"]')) chooser.value = st.choose;
  setCaps(readCaps(), chooser.value);
  if (st && st.selected && st.selected.length) setSelection(st.selected, 'restore');

  // ------------------------------------------------------------------ live: reload when a newer page exists
  window.fedevoStamp = s => { if (s && s !== D.stamp) { save(); location.reload(); } };
  window.fedevoLive = () => {  // polled once every view is drawn (a reload before would never finish drawing)
    if (D.complete) return;
    setInterval(() => {
      const s = document.createElement('script');
      s.src = D.stamp_file + '?t=' + Date.now();
      s.onload = s.onerror = () => s.remove();
      document.head.appendChild(s);
    }, 2000);
  };
}

// ------------------------------------------------------------------ drawing: the first screen first
// plotly.js is deferred (the page's text shows before it is parsed). Then the 3D view (the first screen, under the
// header) is drawn, the page is wired (fedevoInit), then the projections (a tenth of a second), and once that
// frame is painted the page is interactive: window.fedevoInteractive / fedevoInteractiveAt -- the 3D view and the
// projections shown and answering (hover, click, lasso), caps, colour-by, tables and selection working. Then, a
// view per task with a painted frame between them, the parallel coordinates (linked and given the page's state as
// soon as drawn) and the hypervolume: window.fedevoReady / fedevoReadyAt, every view drawn and linked. Times in ms since the navigation
// began (performance.now()); performance marks fedevo:* (benchmarks/page_load.py --profile).
(function fedevoLoad() {
  const F = window.FEDEVO_FIGS || {};
  const mark = n => { try { performance.mark('fedevo:' + n); } catch (e) {} };
  function draw(id) {
    const el = document.getElementById(id), f = F[id];
    if (!el || !f) return Promise.resolve();
    mark(id + ':start');
    const p = el.querySelector('.pending');
    if (p) p.remove();
    // the 3D view at the screen's own resolution: plotly draws WebGL at twice it by default, four times the pixels,
    // which a browser without a GPU renders in software (a third of the 3D view's drawing). (The parallel view
    // keeps plotly's: its cost is not in its pixels, and its thin lines stay sharp on a plain screen.)
    const config = id !== 'front3d' ? f.config :
      Object.assign({plotGlPixelRatio: Math.min(2, Math.max(1, window.devicePixelRatio || 1))}, f.config);
    // each point's hover text is written once (FEDEVO.hover, by id), not in every trace of every view: filled in
    // here from the trace's ids (front.SHARED_TEXT's traces; the strings themselves are shared, not copied)
    const hover = (window.FEDEVO || {}).hover || {};
    (f.data || []).forEach(t => {
      if ((t.meta === 'evaluations' || t.meta === 'mark') && t.text === undefined && Array.isArray(t.customdata))
        t.text = t.customdata.map(i => hover[i]);
    });
    return Promise.resolve(Plotly.newPlot(el, f.data, f.layout, config)).then(() => {
      mark(id + ':drawn');
      try { performance.measure('fedevo:' + id, 'fedevo:' + id + ':start', 'fedevo:' + id + ':drawn'); } catch (e) {}
    });
  }
  const painted = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));  // after the next frame
  function start() {
    mark('plotly-parsed');
    // interactive is set between tasks, after a painted frame: nothing of the page's own is still running then, and
    // the frame after it is yielded too, so that input already waiting is answered before the parallel view's
    // (long) drawing task begins
    draw('front3d').then(() => { fedevoInit(); mark('wired'); }).then(painted)
      .then(() => draw('projections')).then(() => window.fedevoProjectionsDrawn()).then(painted)
      .then(() => {
        window.fedevoInteractiveAt = performance.now();
        window.fedevoInteractive = true;
        mark('interactive');
      }).then(painted).then(() => draw('parallel')).then(() => window.fedevoParallelDrawn())
      .then(painted).then(() => draw('hypervolume')).then(() => {
        window.fedevoReadyAt = performance.now();
        window.fedevoReady = true;
        mark('ready');
        window.fedevoLive();
      }).catch(e => { console.error('fedevo: drawing the page failed:', e); throw e; });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
"""
