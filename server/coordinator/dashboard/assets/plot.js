// `pstrain plot`: curves of one or several runs from their --metrics_out
// files (PSTRAIN_RUNS, inlined by the command).
'use strict';

(function () {
  const runs = PSTRAIN_RUNS;
  const opts = (title, y, points) => ({title: title, xLabel: 'step', yLabel: y, points: points, height: 260});
  const defs = [
    ['chart-loss', opts('Training loss', 'loss'), r => ({t: r.progress.step, v: r.progress.loss})],
    ['chart-sps', opts('Throughput (worker 0 view of the job)', 'samples/s'), r => ({t: r.progress.step, v: r.progress.samples_per_sec})],
    ['chart-auc', opts('Eval AUC', 'AUC', true), r => ({t: r.eval.step, v: r.eval.auc})],
    ['chart-logloss', opts('Eval logloss', 'logloss', true), r => ({t: r.eval.step, v: r.eval.logloss})],
  ];
  // Newer eval metrics: a chart when some file has them.
  const has = key => runs.some(r => (r.eval[key] || []).some(v => v !== null));
  if (has('ne')) {
    defs.push(['chart-ne', opts('Eval normalized entropy (below 1 beats the base rate)', 'NE', true), r => ({t: r.eval.step, v: r.eval.ne})]);
  }
  if (has('calibration')) {
    defs.push(['chart-calibration', opts('Eval calibration (mean prediction / positive rate)', 'calibration', true), r => ({t: r.eval.step, v: r.eval.calibration})]);
  }
  for (const [id, o, pick] of defs) {
    const el = document.getElementById(id);
    el.hidden = false;
    el.dataset.title = o.title;
    const chart = new LineChart(el, o);
    chart.update(runs.map(r => Object.assign({name: r.name}, pick(r))));
  }
  document.getElementById('sub').textContent =
      runs.map(r => r.name + ' (' + r.file + ')').join(' · ');
  // The summary lines side by side.
  const keys = [];
  for (const r of runs) for (const k of Object.keys(r.summary || {})) if (k !== 'event' && !keys.includes(k)) keys.push(k);
  if (keys.length === 0) return;
  const head = document.querySelector('#summary thead');
  const tr = document.createElement('tr');
  for (const h of ['summary'].concat(runs.map(r => r.name))) {
    const th = document.createElement('th');
    th.textContent = h;
    tr.appendChild(th);
  }
  head.appendChild(tr);
  const body = document.querySelector('#summary tbody');
  for (const k of keys) {
    const row = document.createElement('tr');
    const name = document.createElement('td');
    name.textContent = k;
    row.appendChild(name);
    for (const r of runs) {
      const td = document.createElement('td');
      const v = r.summary ? r.summary[k] : undefined;
      td.textContent = v === undefined || v === null ? '' :
          (typeof v === 'number' && !Number.isInteger(v) ? v.toPrecision(5) : String(v));
      row.appendChild(td);
    }
    body.appendChild(row);
  }
})();
