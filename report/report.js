// Anvil report: draws the charts and tables from the JSON data island
// (#anvil-data, format in report/REPORT.md) with the embedded plotly.js.
// Sets document.body.dataset.charts to the number of charts drawn.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('anvil-data').textContent);
  const config = { displaylogo: false, responsive: true };
  const palette = ['#2f6fdb', '#e8710a', '#137333', '#b3261e', '#7b1fa2', '#00838f', '#6d4c41', '#c2185b'];
  let charts = 0;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmt(x, digits) { return (x === undefined || x === null || !isFinite(x)) ? '' : Number(x).toFixed(digits); }
  function fmtUs(us) { return us >= 1000 ? fmt(us / 1000, 3) + ' ms' : fmt(us, 2) + ' µs'; }
  function fmtS(s) { return s >= 3600 ? fmt(s / 3600, 1) + ' h' : s >= 60 ? fmt(s / 60, 1) + ' min' : fmt(s, 1) + ' s'; }
  function table(id, head, rows) {
    const t = document.getElementById(id);
    const tr = el('tr');
    head.forEach(h => tr.appendChild(el('th', h[0], h[1] || '')));
    const thead = el('thead'); thead.appendChild(tr); t.appendChild(thead);
    const body = el('tbody');
    rows.forEach(r => {
      const row = el('tr');
      r.forEach(c => row.appendChild(typeof c === 'object' && c !== null ? el('td', c.text, c.cls) : el('td', c)));
      body.appendChild(row);
    });
    t.appendChild(body);
  }
  function plot(id, traces, layout) {
    layout.margin = layout.margin || { l: 60, r: 20, t: 30, b: 60 };
    layout.font = { family: 'system-ui, sans-serif', size: 12 };
    layout.legend = layout.legend || { orientation: 'h', y: -0.28 };
    if (!layout.margin.b || layout.margin.b < 90) layout.margin.b = 90;
    Plotly.newPlot(id, traces, layout, config);
    charts += 1;
  }
  function empty(id, text) {
    const d = document.getElementById(id);
    d.classList.remove('chart', 'tall');
    d.classList.add('empty');
    d.textContent = text;
  }
  function colorOf(keys, key) { return palette[keys.indexOf(key) % palette.length]; }

  function header() {
    const s = data.scope;
    const parts = [];
    if (s.kind === 'job') {
      document.getElementById('title').textContent = 'Anvil report: job ' + s.job.id;
      parts.push('state ' + s.job.state, 'proposer ' + s.job.proposer);
    } else {
      document.getElementById('title').textContent = 'Anvil report' + (s.gpu ? ': ' + s.gpu : '');
      parts.push((s.jobs || []).length + ' jobs');
    }
    parts.push('GPU ' + ((s.gpus || []).join(', ') || 'none'), data.problems.length + ' problems',
               'ranking regime ' + data.figure, 'regimes ' + (data.regimes.join(', ') || 'none'),
               'generated ' + new Date(data.generated_unix_ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC');
    document.getElementById('scope').textContent = parts.join(' · ');
  }

  function speedOf(p) { const r = p.regimes[data.figure]; return r ? r.speedup : 0; }

  function speedups() {
    const problems = data.problems.slice().sort((a, b) => speedOf(b) - speedOf(a));
    if (!problems.length) { empty('chart-speedups', 'No measurements in this scope.'); return; }
    const names = problems.map(p => p.name + (data.scope.gpus.length > 1 ? ' · ' + p.gpu : ''));
    const traces = data.regimes.map((r, i) => {
      const v = problems.map(p => p.regimes[r] ? p.regimes[r].speedup : null);
      return {
        type: 'bar', name: r, x: names, y: v, marker: { color: palette[i % palette.length] },
        error_y: { type: 'data', symmetric: false,
                   array: problems.map(p => p.regimes[r] ? p.regimes[r].speedup_hi - p.regimes[r].speedup : null),
                   arrayminus: problems.map(p => p.regimes[r] ? p.regimes[r].speedup - p.regimes[r].speedup_lo : null) },
        hovertext: problems.map(p => p.regimes[r] ? p.regimes[r].candidate + ' vs ' + p.regimes[r].baseline : ''),
      };
    });
    plot('chart-speedups', traces, {
      barmode: 'group', yaxis: { title: { text: 'speedup (×)' }, rangemode: 'tozero' },
      xaxis: { automargin: true, tickangle: -35 },
      shapes: [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { dash: 'dash', color: '#444', width: 1.5 } }],
      margin: { l: 60, r: 20, t: 20, b: 130 },
    });
    problemTable(problems);
  }

  function problemTable(problems) {
    const head = [['problem', 'l'], ['GPU', 'l']];
    data.regimes.forEach(r => head.push(['speedup ' + r]));
    head.push(['time (' + data.figure + ')'], ['best baseline'], ['efficiency'], ['candidates'], ['measurements'],
              ['wall'], ['GPU time'], ['winner', 'l'], ['proposer', 'l'], ['knobs', 'l']);
    const rows = problems.map(p => {
      const row = [{ text: p.name, cls: 'l' }, { text: p.gpu, cls: 'l' }];
      data.regimes.forEach(r => {
        const x = p.regimes[r];
        row.push(x ? { text: fmt(x.speedup, 3) + '× ±' + fmt((x.speedup_hi - x.speedup_lo) / 2, 3),
                       cls: x.speedup >= 1 ? 'good' : 'bad' } : '');
      });
      const w = p.regimes[data.figure];
      row.push(w ? fmtUs(w.us) : '', w ? fmtUs(w.baseline_us) + ' ' + w.baseline : '',
               p.efficiency ? fmt(100 * p.efficiency, 1) + '%' : '', p.curve.tried, p.measurements,
               fmtS(p.wall_s), fmtS(p.eval_s));
      const k = p.winner;
      row.push({ text: k ? k.name + (k.verified ? '' : ' (unverified)') : 'none', cls: 'name' },
               { text: k ? k.proposer : '', cls: 'l' },
               { text: k ? Object.entries(k.params).map(e => e[0] + '=' + e[1]).join(' ') : '', cls: 'knobs' });
      return row;
    });
    table('table-problems', head, rows);
  }

  function curves() {
    const problems = data.problems.filter(p => p.curve.steps.length);
    if (!problems.length) {
      empty('chart-curve-tried', 'No correct measurement yet.');
      empty('chart-curve-time', 'No correct measurement yet.');
      return;
    }
    const proposers = [...new Set(problems.flatMap(p => p.curve.steps.map(s => s.proposer)))];
    // A job's curve runs on its wall clock; across jobs (days apart) on the GPU time spent.
    const timeAxis = data.scope.kind === 'job' ? 't_s' : 'gpu_s';
    for (const axis of ['tried', timeAxis]) {
      const traces = problems.map(p => {
        const steps = p.curve.steps;
        const x = steps.map(s => s[axis]).concat([p.curve[axis]]);
        const y = steps.map(s => s.speedup).concat([steps[steps.length - 1].speedup]);
        return {
          type: 'scatter', mode: 'lines+markers', name: p.name, x: x, y: y, line: { shape: 'hv' },
          marker: { size: 7, color: steps.map(s => colorOf(proposers, s.proposer)).concat(['rgba(0,0,0,0)']) },
          text: steps.map(s => s.name + ' (' + s.proposer + (s.family ? ', ' + s.family : '') + ')').concat(['end']),
          hovertemplate: '%{y:.3f}× %{text}<extra>' + p.name + '</extra>',
        };
      });
      proposers.forEach(pr => traces.push({ type: 'scatter', mode: 'markers', x: [null], y: [null],
        name: 'proposer: ' + pr, marker: { size: 9, color: colorOf(proposers, pr) } }));
      plot(axis === 'tried' ? 'chart-curve-tried' : 'chart-curve-time', traces, {
        xaxis: { title: { text: axis === 'tried' ? 'candidates tried'
                              : axis === 't_s' ? 'seconds since the job started' : 'GPU seconds spent on the problem' } },
        yaxis: { title: { text: 'best speedup (' + data.figure + ')' } },
        shapes: [{ type: 'line', xref: 'paper', x0: 0, x1: 1, y0: 1, y1: 1, line: { dash: 'dash', color: '#444', width: 1 } }],
      });
    }
  }

  function roofline() {
    const gpus = Object.keys(data.ceilings);
    const winners = data.problems.filter(p => p.regimes[data.figure]);
    if (!gpus.length || !winners.length) { empty('chart-roofline', 'No speed-of-light data in this scope.'); return; }
    const notes = [];
    const traces = [];
    let lo = Infinity, hi = 0;
    winners.forEach(p => { const ai = p.flops / p.bytes; lo = Math.min(lo, ai); hi = Math.max(hi, ai); });
    lo = lo / 4; hi = hi * 4;
    gpus.forEach((g, i) => {
      const c = data.ceilings[g];
      const xs = [], ys = [];
      for (let k = 0; k <= 60; k++) {
        const ai = lo * Math.pow(hi / lo, k / 60);
        xs.push(ai); ys.push(Math.min(c.flops_per_s, ai * c.bytes_per_s) / 1e12);
      }
      traces.push({ type: 'scatter', mode: 'lines', name: g + ' ceiling', x: xs, y: ys,
                    line: { color: '#555', dash: i ? 'dot' : 'solid' } });
      notes.push(g + ': ' + fmt(c.flops_per_s / 1e12, 0) + ' TFLOP/s' + (c.flops_exact ? '' : ' (at least)') +
                 ', ' + fmt(c.bytes_per_s / 1e9, 0) + ' GB/s' + (c.bytes_exact ? '' : ' (at least: no stored problem was bound by bandwidth)'));
    });
    const point = (p, us) => p.flops / (us * 1e-6) / 1e12;
    traces.push({ type: 'scatter', mode: 'markers', name: 'winner', x: winners.map(p => p.flops / p.bytes),
                  y: winners.map(p => point(p, p.regimes[data.figure].us)), text: winners.map(p => p.name + ' ' + (p.winner ? p.winner.name : '')),
                  marker: { size: 10, color: palette[0] }, hovertemplate: '%{text}<br>%{y:.1f} TFLOP/s<extra></extra>' });
    traces.push({ type: 'scatter', mode: 'markers', name: 'best baseline', x: winners.map(p => p.flops / p.bytes),
                  y: winners.map(p => point(p, p.regimes[data.figure].baseline_us)),
                  text: winners.map(p => p.name + ' ' + p.regimes[data.figure].baseline),
                  marker: { size: 10, symbol: 'x', color: palette[1] }, hovertemplate: '%{text}<br>%{y:.1f} TFLOP/s<extra></extra>' });
    document.getElementById('roofline-note').textContent = 'Achieved TFLOP/s (' + data.figure +
      ') at each problem\'s arithmetic intensity (2MNK / bytes of A, B and C), under the ceilings the runner measured, ' +
      'recovered from the stored speed-of-light times: ' + notes.join('; ') + '.';
    plot('chart-roofline', traces, {
      xaxis: { type: 'log', title: { text: 'arithmetic intensity (FLOP/byte)' } },
      yaxis: { type: 'log', title: { text: 'TFLOP/s' } },
    });
  }

  function failures() {
    const f = data.failures;
    if (!f.verdicts.length) { empty('chart-failures', 'Nothing measured or built in this scope.'); return; }
    const v = f.verdicts.slice().sort((a, b) => b.seconds - a.seconds);
    plot('chart-failures', [{
      type: 'bar', orientation: 'h', y: v.map(x => x.verdict), x: v.map(x => 100 * x.share),
      text: v.map(x => x.count + ' × · ' + fmtS(x.seconds)), textposition: 'auto',
      marker: { color: v.map(x => x.verdict === 'passed' ? palette[2] : palette[3]) },
      hovertemplate: '%{y}: %{x:.1f}% of the time<extra></extra>',
    }], { xaxis: { title: { text: '% of evaluation and compile time (total ' + fmtS(f.total_s) + ')' } },
          margin: { l: 110, r: 20, t: 20, b: 50 }, showlegend: false });
    table('table-failures', [['verdict', 'l'], ['reason', 'l'], ['count'], ['time'], ['example', 'l']],
          f.reasons.map(r => [{ text: r.verdict, cls: 'l' }, { text: r.reason, cls: 'l' }, r.count, fmtS(r.seconds),
                              { text: r.example, cls: 'knobs' }]));
  }

  function rewards() {
    const rows = data.rewards;
    if (!rows.length) return;
    document.getElementById('section-rewards').hidden = false;
    const t0 = rows[0].unix_ms;
    const groups = {};
    rows.forEach(r => { const k = r.proposer + ' · ' + r.recipe; (groups[k] = groups[k] || []).push(r); });
    const keys = Object.keys(groups);
    const traces = [];
    keys.forEach((k, i) => {
      const g = groups[k];
      const x = g.map(r => (r.unix_ms - t0) / 1000);
      traces.push({ type: 'scatter', mode: 'markers', name: k, legendgroup: k, x: x, y: g.map(r => r.value),
                    text: g.map(r => r.kind + ' ' + r.problem), marker: { size: 6, opacity: 0.5, color: palette[i % palette.length] } });
      let sum = 0;
      traces.push({ type: 'scatter', mode: 'lines', name: k + ' (mean)', legendgroup: k, showlegend: false, x: x,
                    y: g.map((r, j) => (sum += r.value) / (j + 1)), line: { color: palette[i % palette.length], width: 2.5 } });
    });
    plot('chart-rewards', traces, { xaxis: { title: { text: 'seconds since the first reward' } },
                                    yaxis: { title: { text: 'reward' } } });
    table('table-rewards', [['proposer · recipe', 'l'], ['rewards'], ['mean'], ['best'], ['failures']],
          keys.map(k => {
            const g = groups[k];
            return [{ text: k, cls: 'l' }, g.length, fmt(g.reduce((a, r) => a + r.value, 0) / g.length, 3),
                    fmt(Math.max(...g.map(r => r.value)), 3), g.filter(r => r.kind !== 'speedup').length];
          }));
  }

  header();
  speedups();
  curves();
  roofline();
  failures();
  rewards();
  document.body.dataset.charts = String(charts);
})();
