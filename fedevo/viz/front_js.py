"""The script of front.html: linked selection across the views, colour-by, sortable tables, live reload.

Runs after the plotly divs; reads ``window.FEDEVO`` (written by :func:`fedevo.viz.front.front_html`) and
``fedevoNum`` (:data:`fedevo.viz.numfmt.JS_NUM`). The selection is one sorted list of evaluation ids:

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

The knee within caps: the "ε ≤" and "comm ≤" inputs re-pick the knee (``fedevoKnee`` of
:mod:`fedevo.viz.knee_js`, the rule of ``--pick knee:eps<=X:comm<=Y``) and move its rings and note.

``window.fedevoSelect(ids)``, ``window.fedevoSelection()``, ``window.fedevoCaps({eps, comm})`` and
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
  let caps = {};
  let knee = {id: D.knee, label: 'knee'};
  let quietParallel = false, quiet2d = false;

  function evalTraces(gd) {
    const out = [];
    gd.data.forEach((t, i) => { if (t.meta === 'evaluations') out.push(i); });
    return out;
  }

  function shellQuote(s) { return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }

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
    const idx = evalTraces(g2);
    const want = new Set(selected);
    const sp = idx.map(i => selected.length ? Array.from(g2.data[i].customdata)
      .map((id, j) => want.has(id) ? j : -1).filter(j => j >= 0) : null);
    Plotly.restyle(g2, {selectedpoints: sp}, idx);
  }

  function dropShapes() {
    // the projections' lasso / box outlines: plotly keeps one per panel and merges an old one back into the next
    // selection (the panels then disagree), so none is kept; the selected points show the selection
    if (!(g2.layout.selections || []).length) return Promise.resolve();
    quiet2d = true;
    return Promise.resolve(Plotly.relayout(g2, {selections: []})).then(() => { quiet2d = false; },
                                                                       () => { quiet2d = false; });
  }

  function showParallel() {
    // the selection as one brush range per id on the id axis: plotly highlights exactly those lines
    const dims = gp.data[0].dimensions;
    const upd = {};
    dims.forEach((d, k) => { upd['dimensions[' + k + '].constraintrange'] = [null]; });
    const k = dims.findIndex(d => d.label === 'id');
    if (selected.length && k >= 0) {
      upd['dimensions[' + k + '].constraintrange'] = [selected.map(id => [id - 0.4, id + 0.4])];
    }
    quietParallel = true;
    Plotly.restyle(gp, upd, [0]);
    quietParallel = false;
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

  // ------------------------------------------------------------------ the table, the command and the export
  const COLS = [['id', 'id'], ['generation', 'gen'], ['on_front', 'Pareto'], ['mark', 'mark'], ['error', 'error'],
                ['accuracy_global', 'global acc'], ['comm', 'comm'], ['eps', 'ε'], ['eps_paper', 'ε paper']]
    .filter(([k]) => !(D.undefined || []).includes(k))  // an ε with no finite value anywhere says nothing
    .concat(D.genes.map(g => [g, g]));

  function markOf(r) {
    return r.marks.filter(m => m !== 'knee').concat(r.id === knee.id ? [knee.label] : []).join(', ');
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
    cmd.textContent = 'fedevo retrain ' + shellQuote(D.run) + ' --pick ' + rows.map(r => r.id).join(',');
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

  function markFrontTable() {  // the selected rows of the Pareto-set table shaded
    const want = new Set(selected);
    document.querySelectorAll('#front-table tbody tr').forEach(tr => {
      tr.style.background = want.has(Number(tr.cells[0].dataset.v)) ? '#ffe3c4' : '';
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

  // ------------------------------------------------------------------ the knee within caps
  const FRONT = D.front_ids.map(id => D.rows[byId.get(id)]).filter(r => r);

  function capsText() {
    return Object.keys(caps).map(k => k + '<=' + caps[k]).join(':');
  }

  function setCaps(c) {
    caps = {};
    Object.keys(c || {}).forEach(k => {
      const v = c[k];
      if (v !== null && v !== undefined && String(v).trim() !== '') caps[k] = Number(v);
    });
    const note = document.getElementById('knee-note');
    const bad = Object.keys(caps).filter(k => Number.isNaN(caps[k]));
    if (bad.length) {
      if (note) note.textContent = 'Not a number: ' + bad.map(k => k === 'comm' ? 'comm ≤' : 'ε ≤').join(', ') +
        ' (the knee is unchanged).';
      return null;
    }
    const res = fedevoKnee(FRONT, caps, D.knee_bar, D.eps_key);
    const capped = Object.keys(caps).length > 0;
    const words = Object.keys(caps).map(k => (k === 'comm' ? 'comm' : 'ε') + ' ≤ ' + fedevoNum(caps[k])).join(', ');
    knee = {id: res.row ? res.row.id : null, label: capped ? 'knee (' + words + ')' : 'knee'};
    moveKnee(knee.id);
    let text;
    if (res.row) {
      const r = res.row;
      text = (capped ? 'The knee within ' + words + ': ' : 'The knee (no caps): ') + 'id ' + r.id + ' (error ' +
        fedevoNum(r.error) + ', comm ' + fedevoNum(r.comm) + ', ε ' + fedevoNum(r[D.eps_key]) + '; ' + res.how +
        ', among ' + res.candidates + ' candidate' + (res.candidates === 1 ? '' : 's') + ') — as fedevo retrain ' +
        shellQuote(D.run) + ' --pick ' + (capped ? 'knee:' + capsText() : 'knee') + '.';
    } else if (res.reason === 'none') {
      text = capped ? 'No Pareto solution is within ' + words + ': no knee is marked.'
                    : 'No Pareto solution yet: no knee is marked.';
    } else {
      text = 'None of the ' + res.within + ' Pareto solution' + (res.within === 1 ? '' : 's') +
        (capped ? ' within ' + words : '') + ' is clearly better than chance (error < ' + fedevoNum(D.knee_bar) +
        '): no knee is marked.';
    }
    if (note) note.textContent = text;
    renderTable();
    save();
    return res;
  }

  function moveKnee(id) {
    // the knee's rings (traces named 'knee') onto the point `id` of each view's evaluations, or empty
    for (const gd of [g3, g2]) {
      gd.data.forEach((t, k) => {
        if (t.name !== 'knee') return;
        const src = evalTraces(gd).map(i => gd.data[i]).filter(e => (e.xaxis || 'x') === (t.xaxis || 'x'));
        const upd = {x: [[]], y: [[]], customdata: [[]], text: [[]]};
        if (t.type === 'scatter3d') upd.z = [[]];
        for (const e of src) {
          const j = id === null ? -1 : Array.from(e.customdata).indexOf(id);
          if (j < 0) continue;
          upd.x = [[e.x[j]]]; upd.y = [[e.y[j]]]; upd.customdata = [[id]]; upd.text = [[e.text[j]]];
          if (upd.z) upd.z = [[e.z[j]]];
        }
        Plotly.restyle(gd, upd, [k]);
      });
    }
  }

  // ------------------------------------------------------------------ colour by
  function colour(key) {
    const c = D.colour[key];
    if (!c) return;
    colourKey = key;
    const fin = c.draw.filter(v => Number.isFinite(v));
    const lo = Math.min(...fin), hi = Math.max(...fin);
    const cmax = hi > lo ? hi : lo + 1;
    const bar = {title: {text: c.label, side: 'right'}, thickness: 14, len: 0.6, tickvals: c.tickvals,
                 ticktext: c.ticktext};
    for (const gd of [g3, g2]) {
      const idx = evalTraces(gd);
      const colours = idx.map(i => Array.from(gd.data[i].customdata).map(id => c.draw[byId.get(id)]));
      const upd = {'marker.color': colours, 'marker.cmin': idx.map(() => lo), 'marker.cmax': idx.map(() => cmax)};
      idx.forEach((i, n) => {
        if (gd.data[i].marker.showscale) {
          Plotly.restyle(gd, {'marker.colorbar.title.text': c.label, 'marker.colorbar.tickvals': [c.tickvals],
                              'marker.colorbar.ticktext': [c.ticktext]}, [i]);
        }
      });
      Plotly.restyle(gd, upd, idx);
    }
    quietParallel = true;
    Plotly.restyle(gp, {'line.color': [c.draw], 'line.cmin': lo, 'line.cmax': cmax,
                        'line.colorbar': bar}, [0]);
    quietParallel = false;
    const sel = document.getElementById('colour-by');
    if (sel && sel.value !== key) sel.value = key;
    save();
  }

  // ------------------------------------------------------------------ sortable tables
  function makeSortable(t) {
    const ths = t.querySelectorAll('thead th');
    ths.forEach((th, n) => {
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
      sessionStorage.setItem(KEY, JSON.stringify({selected: selected, colour: colourKey, caps: caps}));
    } catch (e) {}
  }
  function restore() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch (e) { return null; }
  }

  // ------------------------------------------------------------------ wiring
  gp.on('plotly_restyle', () => { if (!quietParallel) setSelection(fromParallel(), 'parallel'); });
  let shift = false;  // a lasso / box drawn with Shift held adds to the selection
  g2.addEventListener('pointerdown', ev => { shift = ev.shiftKey; }, true);
  g2.on('plotly_selected', ev => {
    if (quiet2d || !ev || !ev.points) return;
    const ids = ev.points.filter(p => p.data.meta === 'evaluations').map(p => p.customdata);
    const add = shift;
    setTimeout(() => setSelection(add ? selected.concat(ids) : ids, 'lasso'), 0);  // after plotly's own update
  });
  g2.on('plotly_deselect', () => { if (!quiet2d) setSelection([], 'clear'); });

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
  const capInputs = {[D.eps_key]: document.getElementById('cap-eps'), comm: document.getElementById('cap-comm')};
  const readCaps = () => Object.fromEntries(Object.entries(capInputs).map(([k, el]) => [k, el.value]));
  Object.values(capInputs).forEach(el => el.addEventListener('input', () => setCaps(readCaps())));
  document.querySelectorAll('table.sortable').forEach(makeSortable);

  window.fedevoSelect = ids => setSelection(ids, 'api');
  window.fedevoSelection = () => selected.slice();
  window.fedevoColour = colour;
  window.fedevoCaps = c => {  // {eps: 2, comm: 5000} (ε: the run's ε objective); fills the inputs too
    const want = {};
    Object.entries(c || {}).forEach(([k, v]) => { want[k === 'eps' ? D.eps_key : k] = v; });
    Object.entries(capInputs).forEach(([k, el]) => {
      el.value = want[k] === null || want[k] === undefined ? '' : String(want[k]);
    });
    return setCaps(readCaps());
  };
  window.fedevoExport = exportText;

  const st = restore();
  if (st && st.colour && st.colour !== colourKey) colour(st.colour);
  if (st && st.caps && Object.keys(st.caps).length) {
    Object.entries(capInputs).forEach(([k, el]) => { if (k in st.caps) el.value = String(st.caps[k]); });
  }
  setCaps(readCaps());
  if (st && st.selected && st.selected.length) setSelection(st.selected, 'restore');

  // ------------------------------------------------------------------ live: reload when a newer page exists
  window.fedevoStamp = s => { if (s && s !== D.stamp) { save(); location.reload(); } };
  if (!D.complete) {
    setInterval(() => {
      const s = document.createElement('script');
      s.src = D.stamp_file + '?t=' + Date.now();
      s.onload = s.onerror = () => s.remove();
      document.head.appendChild(s);
    }, 2000);
  }
  window.fedevoReady = true;
}
(function waitForPlots() {
  const ready = ['front3d', 'projections', 'parallel'].every(id => {
    const g = document.getElementById(id);
    return g && g._fullLayout && g.data && typeof g.on === 'function';
  });
  if (ready) fedevoInit(); else setTimeout(waitForPlots, 50);
})();
"""
