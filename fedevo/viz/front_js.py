"""The script of front.html: linked selection across the views, colour-by, sortable tables, live reload.

Runs after the plotly divs; reads ``window.FEDEVO`` (written by :func:`fedevo.viz.front.front_html`) and
``fedevoNum`` (:data:`fedevo.viz.numfmt.JS_NUM`). The selection is one sorted list of evaluation ids:

* brushing the parallel coordinates (``plotly_restyle``) selects the ids inside every brushed range;
* lasso / box select in a 2D projection (``plotly_selected``) selects those ids, and the parallel coordinates
  then brush the ``id`` axis to exactly those ids;
* a click on a point of the 3D view adds or removes its id;
* every view then shows the same ids: rings in 3D (trace ``selected``), ``selectedpoints`` in 2D, brushed lines
  in the parallel coordinates; the table lists them with a copyable ``fedevo retrain RUN --pick ...``.

``window.fedevoSelect(ids)`` and ``window.fedevoSelection()`` let tests and users drive it. Colour choice and
selection survive the live reload (sessionStorage).
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

  function showParallel() {
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

  // ------------------------------------------------------------------ the table and the command
  const COLS = [['id', 'id'], ['generation', 'gen'], ['front', 'Pareto'], ['mark', 'mark'], ['error', 'error'],
                ['accuracy_global', 'global acc'], ['comm', 'comm'], ['eps', 'ε'], ['eps_paper', 'ε paper']]
    .concat(D.genes.map(g => [g, g]));

  function cell(v) {
    if (typeof v === 'boolean') return v ? 'yes' : '';
    if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 1000 ? String(v) : fedevoNum(v);
    return v === null || v === undefined ? '–' : String(v);
  }

  function renderTable() {
    const summary = document.getElementById('selection-summary');
    const cmd = document.getElementById('retrain-cmd');
    const copy = document.getElementById('copy-cmd');
    const box = document.getElementById('selection-table');
    if (!summary) return;
    const rows = selected.map(id => D.rows[byId.get(id)]).filter(r => r);
    if (!rows.length) {
      summary.textContent = 'Nothing selected.';
      cmd.textContent = '';
      copy.disabled = true;
      box.innerHTML = '';
      return;
    }
    const nf = rows.filter(r => r.front).length;
    summary.textContent = rows.length + ' selected (' + nf + ' on the Pareto front): ids ' +
      rows.map(r => r.id).join(', ');
    cmd.textContent = 'fedevo retrain ' + shellQuote(D.run) + ' --pick ' + rows.map(r => r.id).join(',');
    copy.disabled = false;
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
        const v = r[k];
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

  function setSelection(ids, source) {
    selected = Array.from(new Set(ids.filter(id => byId.has(id)))).sort((a, b) => a - b);
    show3d();
    show2d();
    if (source !== 'parallel') showParallel();
    renderTable();
    save();
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
    try { sessionStorage.setItem(KEY, JSON.stringify({selected: selected, colour: colourKey})); } catch (e) {}
  }
  function restore() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch (e) { return null; }
  }

  // ------------------------------------------------------------------ wiring
  let quietParallel = false;
  gp.on('plotly_restyle', () => { if (!quietParallel) setSelection(fromParallel(), 'parallel'); });
  g2.on('plotly_selected', ev => {
    if (!ev || !ev.points) return;
    setSelection(ev.points.filter(p => p.data.meta === 'evaluations').map(p => p.customdata), 'lasso');
  });
  g2.on('plotly_deselect', () => setSelection([], 'lasso'));
  g3.on('plotly_click', ev => {
    const p = ev && ev.points && ev.points.find(q => q.data.meta === 'evaluations' || q.data.meta === 'mark');
    if (!p) return;
    const id = p.customdata;
    setSelection(selected.includes(id) ? selected.filter(x => x !== id) : selected.concat([id]), 'click');
  });
  document.getElementById('clear-selection').addEventListener('click', () => setSelection([], 'clear'));
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
  document.querySelectorAll('table.sortable').forEach(makeSortable);

  window.fedevoSelect = ids => setSelection(ids, 'api');
  window.fedevoSelection = () => selected.slice();
  window.fedevoColour = colour;

  const st = restore();
  if (st && st.colour && st.colour !== colourKey) colour(st.colour);
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
