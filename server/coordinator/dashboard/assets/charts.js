// Line charts over uPlot, shared by the dashboard and `pstrain plot`.
// A chart shows named series, each with its own x values: series are
// joined on a common x axis (uPlot.join) and lines span the gaps.
'use strict';

const PSTRAIN_COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd',
                        '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

class LineChart {
  // el: container element; opts: {title, xLabel, yLabel, points (bool), height}
  constructor(el, opts) {
    this.el = el;
    this.opts = opts;
    this.plot = null;
    this.key = '';
    this.el.dataset.points = '0';
  }

  // series: [{name, t: [...], v: [...]}]; null values are skipped.
  update(series) {
    const kept = series.filter(s => s.t && s.t.length > 0);
    let points = 0;
    const tables = kept.map(s => {
      const xs = [], ys = [];
      for (let i = 0; i < s.t.length; i++) {
        if (s.v[i] === null || s.v[i] === undefined || s.t[i] === null) continue;
        xs.push(s.t[i]);
        ys.push(s.v[i]);
      }
      points += xs.length;
      return [xs, ys];
    });
    this.el.dataset.points = String(points);
    this.el.dataset.series = String(kept.length);
    const key = kept.map(s => s.name).join('|');
    if (kept.length === 0 || points === 0) {
      if (this.plot) { this.plot.destroy(); this.plot = null; }
      this.key = '';
      this.el.classList.add('empty');
      return;
    }
    this.el.classList.remove('empty');
    const data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    if (this.plot && key === this.key) {
      this.plot.setData(data);
      return;
    }
    if (this.plot) this.plot.destroy();
    this.key = key;
    this.plot = new uPlot(this.options(kept), data, this.el);
  }

  options(kept) {
    const width = Math.max(280, this.el.clientWidth || 480);
    return {
      title: this.opts.title,
      width: width,
      height: this.opts.height || 220,
      scales: {x: {time: false}},
      axes: [{label: this.opts.xLabel || ''}, {label: this.opts.yLabel || '', size: 60}],
      legend: {live: true},
      series: [{label: this.opts.xLabel || 'x'}].concat(kept.map((s, i) => ({
        label: s.name,
        stroke: PSTRAIN_COLORS[i % PSTRAIN_COLORS.length],
        width: 1.5,
        spanGaps: true,
        points: {show: !!this.opts.points, size: 5},
      }))),
    };
  }

  resize() {
    if (this.plot) this.plot.setSize({width: Math.max(280, this.el.clientWidth), height: this.opts.height || 220});
  }
}
