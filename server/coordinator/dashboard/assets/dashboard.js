// The coordinator's dashboard: polls /api/state every second and redraws
// the node table, the charts and the checkpoint list. `pstrain dashboard
// --job_dir` serves the same page for a job that has ended: its state then
// has a source (the metrics file), a summary and curves over steps
// (x_label), and no nodes.
'use strict';

const POLL_MS = 1000;
const charts = {
  loss: new LineChart(document.getElementById('chart-loss'), {title: 'Training loss', xLabel: 'seconds', yLabel: 'loss'}),
  auc: new LineChart(document.getElementById('chart-auc'), {title: 'Eval AUC', xLabel: 'seconds', yLabel: 'AUC', points: true}),
  sps: new LineChart(document.getElementById('chart-sps'), {title: 'Worker throughput', xLabel: 'seconds', yLabel: 'samples/s'}),
  rps: new LineChart(document.getElementById('chart-rps'), {title: 'Server requests', xLabel: 'seconds', yLabel: 'requests/s'}),
  rss: new LineChart(document.getElementById('chart-rss'), {title: 'Resident memory', xLabel: 'seconds', yLabel: 'MiB'}),
  logloss: new LineChart(document.getElementById('chart-logloss'), {title: 'Eval logloss', xLabel: 'seconds', yLabel: 'logloss', points: true}),
  ne: new LineChart(document.getElementById('chart-ne'), {title: 'Eval normalized entropy', xLabel: 'seconds', yLabel: 'NE', points: true}),
  calibration: new LineChart(document.getElementById('chart-calibration'), {title: 'Eval calibration', xLabel: 'seconds', yLabel: 'mean prediction / positive rate', points: true}),
};
for (const c of Object.values(charts)) c.el.dataset.title = c.opts.title;

// For tests and the curious: the latest state and how many updates ran.
window.pstrainDashboard = {updates: 0, errors: 0, state: null};

function fmtNum(v, digits) {
  if (v === null || v === undefined) return '';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(2) + 'M';
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + 'k';
  return Number(v).toFixed(digits === undefined ? 0 : digits);
}
function fmtBytes(v) {
  if (v === null || v === undefined) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return v.toFixed(i === 0 ? 0 : 1) + ' ' + units[i];
}
function fmtSeconds(s) {
  if (s === null || s === undefined) return '';
  if (s < 60) return s.toFixed(1) + ' s';
  const m = Math.floor(s / 60);
  return m + ':' + String(Math.floor(s % 60)).padStart(2, '0');
}
function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function renderNodes(state) {
  const tbody = document.querySelector('#nodes tbody');
  tbody.textContent = '';
  const timeout = state.job.heartbeat_timeout;
  for (const n of state.nodes) {
    const tr = document.createElement('tr');
    tr.dataset.role = n.role;
    tr.dataset.rank = n.rank;
    tr.dataset.state = n.state;
    cell(tr, n.role);
    cell(tr, n.rank, 'num');
    const st = cell(tr, '');
    const badge = document.createElement('span');
    badge.className = 'badge state-' + n.state;
    badge.textContent = n.state;
    st.appendChild(badge);
    const age = cell(tr, n.heartbeat_age === null || n.heartbeat_age === undefined ? '' : n.heartbeat_age.toFixed(1) + ' s', 'num');
    if (n.state === 'alive' && n.heartbeat_age > timeout / 2) age.classList.add('stale');
    cell(tr, n.host || '');
    cell(tr, n.pid || '', 'num');
    cell(tr, n.endpoint || '');
    cell(tr, n.step === undefined ? '' : n.step, 'num');
    let throughput = '';
    if (n.role === 'worker' && n.samples_per_sec !== undefined) throughput = fmtNum(n.samples_per_sec) + ' samples/s';
    if (n.role === 'server' && n.requests_per_sec !== undefined) throughput = fmtNum(n.requests_per_sec) + ' req/s';
    cell(tr, throughput, 'num');
    cell(tr, n.loss === undefined || n.loss === null ? '' : n.loss.toFixed(4), 'num');
    cell(tr, n.cpu_percent === undefined ? '' : n.cpu_percent.toFixed(0) + ' %', 'num');
    cell(tr, fmtBytes(n.rss_bytes), 'num');
    cell(tr, n.table_rows === undefined ? '' : fmtNum(n.table_rows), 'num');
    cell(tr, fmtBytes(n.table_bytes), 'num');
    tbody.appendChild(tr);
  }
}

function renderCheckpoints(state) {
  const tbody = document.querySelector('#checkpoints tbody');
  tbody.textContent = '';
  document.getElementById('no-checkpoints').style.display = state.checkpoints.length ? 'none' : '';
  for (const c of state.checkpoints.slice().reverse()) {
    const tr = document.createElement('tr');
    cell(tr, c.step, 'num');
    cell(tr, new Date(c.time_unix * 1000).toLocaleTimeString());
    cell(tr, fmtSeconds(c.duration_seconds), 'num');
    cell(tr, fmtBytes(c.bytes), 'num');
    cell(tr, c.path);
    cell(tr, c.ok ? 'ok' : 'failed: ' + c.message, c.ok ? '' : 'stale');
    tbody.appendChild(tr);
  }
}

// A job that has ended, from its files: what it was and where it came from.
function renderFinishedJob(state) {
  const s = state.summary || {};
  const parts = [state.source];
  if (s.model) parts.push(s.model);
  if (s.workers) parts.push(s.workers + ' workers');
  if (s.steps !== undefined) parts.push(s.steps + ' steps');
  if (s.samples_per_sec) parts.push(fmtNum(s.samples_per_sec) + ' samples/s');
  if (state.now !== null && state.now !== undefined) parts.push(fmtSeconds(state.now));
  if (state.job.message) parts.push(state.job.message);
  document.getElementById('job-info').textContent = parts.join(' · ');
  document.getElementById('no-nodes').hidden = state.nodes.length > 0;
  document.getElementById('nodes').hidden = state.nodes.length === 0;
  const section = document.getElementById('summary-section');
  section.hidden = !state.summary;
  const tbody = document.querySelector('#summary tbody');
  tbody.textContent = '';
  for (const [k, v] of Object.entries(s)) {
    if (k === 'event' || v === null || v === undefined) continue;
    const tr = document.createElement('tr');
    cell(tr, k);
    cell(tr, typeof v === 'number' && !Number.isInteger(v) ? v.toPrecision(5) : String(v), 'num');
    tbody.appendChild(tr);
  }
}

// The x axis of every chart: seconds (live) or what the state says.
function setXLabel(label) {
  for (const c of Object.values(charts)) {
    if (c.opts.xLabel === label) continue;
    c.opts.xLabel = label;
    c.key = '';  // drawn anew with the label
  }
}

function renderJob(state) {
  const job = state.job;
  const badge = document.getElementById('job-state');
  badge.textContent = job.state;
  badge.className = 'badge state-' + job.state;
  if (state.source) {
    renderFinishedJob(state);
    return;
  }
  const elapsed = job.ended === null ? state.now : job.ended;
  document.getElementById('job-info').textContent =
      `${job.servers} servers, ${job.workers} workers, ${job.consistency.toUpperCase()}` +
      (job.consistency === 'ssp' ? ` (staleness ${job.staleness})` : '') +
      ` · ${fmtSeconds(elapsed)}` + (job.message ? ` · ${job.message}` : '');
}

async function poll() {
  try {
    const res = await fetch('api/state', {cache: 'no-store'});
    if (!res.ok) throw new Error('HTTP ' + res.status);
    const state = await res.json();
    window.pstrainDashboard.state = state;
    setXLabel(state.x_label || 'seconds');
    renderJob(state);
    renderNodes(state);
    charts.loss.update(state.series.loss);
    charts.auc.update(state.series.eval_auc);
    charts.sps.update(state.series.samples_per_sec);
    charts.rps.update(state.series.requests_per_sec);
    charts.rss.update(state.series.rss_mib);
    // A job that has ended has no live processes to measure.
    charts.rps.el.hidden = charts.rss.el.hidden = !!state.source;
    charts.logloss.update(state.series.eval_logloss);
    for (const name of ['ne', 'calibration']) {  // newer metrics: shown when there are some
      const series = state.series['eval_' + name];
      charts[name].el.hidden = !series;
      if (series) charts[name].update(series);
    }
    renderCheckpoints(state);
    window.pstrainDashboard.updates++;
    const u = document.getElementById('updated');
    u.textContent = 'updated ' + new Date().toLocaleTimeString();
    u.classList.remove('disconnected');
  } catch (e) {
    window.pstrainDashboard.errors++;
    const u = document.getElementById('updated');
    u.textContent = 'coordinator unreachable (' + e.message + ')';
    u.classList.add('disconnected');
  }
  setTimeout(poll, POLL_MS);
}

window.addEventListener('resize', () => Object.values(charts).forEach(c => c.resize()));
poll();
