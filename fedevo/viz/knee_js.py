"""The knee in JavaScript: front.html re-picks it within the caps a researcher types without Python.

The same rule as :func:`fedevo.picking.knee` and ``--pick knee:eps<=X:comm<=Y`` (:func:`fedevo.picking._capped_knee`),
step by step, so the page and the command line agree:

* the candidates are the Pareto solutions with a finite error below the knee bar (``picking.knee_bar``: chance
  minus the test-set margin);
* the objectives are sanitised like ``ObjectiveSet.sanitized`` (∞ / NaN → the objective's worst value, finite
  values clipped to it; a maximised objective negated), a positive objective spanning two decades or more on the
  candidates is replaced by its log10, each is normalised to [0, 1] over the candidates (``picking.knee_index``);
* the caps (a missing or NaN value counts as ∞, as ``picking._num``) remove candidates but do NOT rescale that
  space: the high trade-off points and the distances to the ideal point are those of every candidate, and the
  knee is the allowed high trade-off point closest to the ideal point, else the allowed candidate closest to it;
  so a cap the uncapped knee meets leaves it in place;
* pymoo's ``HighTradeoffPoints`` (pymoo 0.6: neighbours within 0.125, at least min(2·m, n − 1) of them, the least
  improvement per unit of deterioration, upper-tail outliers ≥ 2σ or else the largest if over 1σ) with its means
  and deviations summed as numpy does (pairwise), so a borderline outlier falls on the same side. Ties go to the
  first solution in the front's order (front.csv's), as in Python.

``fedevoKnee(rows, caps, bar, objectives)``: ``rows`` the Pareto set in the front's order, ``caps`` {key: value}
(``value`` a bound: ≤ for a minimised objective, ≥ for a maximised one), ``objectives`` [{name, worst, maximize}]
in the knee's order; returns ``{row, how, within, candidates}`` or ``{row: null, reason, within, candidates}``.
"""

KNEE_JS = r"""
const FEDEVO_LOG_DECADES = 2.0;        // fedevo.picking.LOG_DECADES

function fedevoNumOrInf(v) {  // picking._num: None / NaN -> ∞
  if (v === null || v === undefined) return Infinity;
  const x = Number(v);
  return Number.isNaN(x) ? Infinity : x;
}

function fedevoPairwiseSum(a) {  // numpy's pairwise summation of a contiguous float64 array (add.reduce)
  const n = a.length;
  if (n < 8) { let s = 0; for (let i = 0; i < n; i++) s += a[i]; return s; }
  if (n <= 128) {
    const r = a.slice(0, 8);
    let i;
    for (i = 8; i < n - (n % 8); i += 8) for (let k = 0; k < 8; k++) r[k] += a[i + k];
    let s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) s += a[i];
    return s;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return fedevoPairwiseSum(a.slice(0, n2)) + fedevoPairwiseSum(a.slice(n2));
}

function fedevoHighTradeoff(N) {  // pymoo.mcdm.high_tradeoff.HighTradeoffPoints()._do; null when none
  const n = N.length, m = N[0].length;
  const nMin = Math.min(2 * m, n - 1);
  const d2 = (a, b) => { let s = 0; for (let k = 0; k < m; k++) s += (a[k] - b[k]) * (a[k] - b[k]); return s; };
  const mu = new Array(n).fill(-Infinity);
  for (let i = 0; i < n; i++) {
    let nb = [];
    for (let j = 0; j < n; j++) if (d2(N[i], N[j]) <= 0.125 * 0.125) nb.push(j);
    if (nb.length < nMin) {
      nb = N.map((p, j) => [d2(N[i], p), j]).sort((x, y) => x[0] - y[0] || x[1] - y[1])
        .slice(0, nMin + 1).map(x => x[1]);
    }
    let best = NaN;
    for (const j of nb) {
      let sac = 0, gain = 0;
      for (let k = 0; k < m; k++) { const d = N[j][k] - N[i][k]; sac += Math.max(0, d); gain += Math.max(0, -d); }
      const t = sac / gain;  // 0/0 = NaN (itself), x/0 = ∞, as numpy
      if (!Number.isNaN(t) && (Number.isNaN(best) || t < best)) best = t;
    }
    mu[i] = best;  // np.nanmin: NaN when every trade-off is NaN
  }
  // find_outliers_upper_tail
  const I = [];
  mu.forEach((v, i) => { if (Number.isFinite(v)) I.push(i); });
  if (!I.length) return null;  // numpy raises on the empty max: knee_index falls back
  const vals = I.map(i => mu[i]);
  const mean = fedevoPairwiseSum(vals) / vals.length;
  const sigma = Math.sqrt(fedevoPairwiseSum(vals.map(v => (v - mean) * (v - mean))) / vals.length);
  const dev = vals.map(v => (v - mean) / sigma);
  let S = I.filter((i, k) => dev[k] >= 2);
  if (!S.length) {
    const top = dev.some(Number.isNaN) ? NaN : Math.max(...dev);  // np.max propagates NaN
    if (top > 1) {
      let a = 0;
      vals.forEach((v, k) => { if (v > vals[a]) a = k; });
      S = [I[a]];
    }
  }
  return S.length ? S : null;
}

function fedevoKneeIndex(F, allowed) {  // fedevo.picking.knee_index
  const n = F.length;
  const ok = allowed || F.map(() => true);
  if (n === 1) return [0, 'the only solution'];
  F = F.map(r => r.slice());
  for (let j = 0; j < F[0].length; j++) {
    const col = F.map(r => r[j]);
    if (col.every(v => v > 0) && Math.max(...col) / Math.min(...col) >= Math.pow(10, FEDEVO_LOG_DECADES)) {
      F.forEach(r => { r[j] = Math.log10(r[j]); });
    }
  }
  const m = F[0].length;
  const lo = [], span = [];
  for (let j = 0; j < m; j++) {
    const col = F.map(r => r[j]);
    lo.push(Math.min(...col));
    const s = Math.max(...col) - lo[j];
    span.push(s <= 0 ? 1.0 : s);
  }
  const N = F.map(r => r.map((v, j) => (v - lo[j]) / span[j]));
  const dist = N.map(r => Math.sqrt(r.reduce((s, v) => s + v * v, 0)));
  const argmin = idx => idx.reduce((a, i) => dist[i] < dist[a] ? i : a, idx[0]);
  let idx = null;
  if (n >= 3) {
    try { idx = fedevoHighTradeoff(N); } catch (e) { idx = null; }
  }
  idx = (idx || []).filter(i => ok[i]);
  if (!idx.length) {
    return [argmin(N.map((r, i) => i).filter(i => ok[i])), 'closest to the ideal point (fallback: no high ' +
            'trade-off point' + (allowed ? ' within the caps' : '') + ')'];
  }
  return [argmin(idx), 'pymoo HighTradeoffPoints'];
}

function fedevoWithin(r, caps, objectives) {  // picking.apply_filters with the caps' bounds (≤; ≥ when maximised)
  const max = new Set(objectives.filter(o => o.maximize).map(o => o.name));
  return Object.keys(caps).every(k => {
    const v = fedevoNumOrInf(r[k]);
    return max.has(k) ? (v !== Infinity && v >= caps[k]) : v <= caps[k];
  });
}

function fedevoKnee(rows, caps, bar, objectives) {  // fedevo.picking._capped_knee + knee
  const cand = rows.filter(r => {
    const e = fedevoNumOrInf(r.error);
    return Number.isFinite(e) && (bar === null || bar === undefined || e < bar);
  });
  const within = rows.filter(r => fedevoWithin(r, caps, objectives));
  const inside = cand.map(r => fedevoWithin(r, caps, objectives));
  const nIn = inside.filter(x => x).length;
  const out = {within: within.length, candidates: nIn, of: cand.length};
  if (!within.length) return Object.assign(out, {row: null, reason: 'none'});
  if (!nIn) return Object.assign(out, {row: null, reason: 'chance'});
  const F = cand.map(r => objectives.map(o => {
    const v = r[o.name];
    const x = v === null || v === undefined ? NaN : Number(v);
    const s = !Number.isFinite(x) ? o.worst : (o.maximize ? Math.max(x, o.worst) : Math.min(x, o.worst));
    return o.maximize ? -s : s;
  }));
  const [i, how] = fedevoKneeIndex(F, Object.keys(caps).length ? inside : null);
  return Object.assign(out, {row: cand[i], how: how});
}
"""
