// Charts drawn as inline SVG (no chart library). Colours come from CSS
// classes c0..c8, so no inline styles are needed under the CSP.

const NS = 'http://www.w3.org/2000/svg';

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function short(n) {
  if (n >= 1e9) return `${+(n / 1e9).toFixed(1)}G`;
  if (n >= 1e6) return `${+(n / 1e6).toFixed(1)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toFixed(1)}k`;
  return `${+n.toFixed(2)}`;
}

// stacked draws bars over time, one stack per bucket, one colour per series.
// series: [{label, values: []}], labels: bucket labels.
export function stacked({ title, labels, series, width = 520, height = 220 }) {
  const pad = { l: 44, r: 8, t: 8, b: 26 };
  const w = width - pad.l - pad.r;
  const hgt = height - pad.t - pad.b;
  const totals = labels.map((_, i) => series.reduce((a, x) => a + (x.values[i] || 0), 0));
  const max = niceMax(Math.max(0, ...totals));
  const sum = totals.reduce((a, b) => a + b, 0);
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img', 'aria-label': `${title}: ${short(sum)} in total over ${labels.length} periods` });
  svg.append(s('title', {}, title));
  for (let g = 0; g <= 4; g++) {
    const y = pad.t + hgt - (hgt * g) / 4;
    svg.append(s('line', { x1: pad.l, x2: pad.l + w, y1: y, y2: y, class: 'axis' }));
    svg.append(s('text', { x: pad.l - 4, y: y + 4, 'text-anchor': 'end' }, short((max * g) / 4)));
  }
  const bw = w / Math.max(1, labels.length);
  labels.forEach((lab, i) => {
    let y = pad.t + hgt;
    series.forEach((x, k) => {
      const v = x.values[i] || 0;
      if (!v) return;
      const bh = (v / max) * hgt;
      y -= bh;
      const r = s('rect', { x: pad.l + i * bw + bw * 0.12, y, width: Math.max(1, bw * 0.76), height: bh, class: `c${Math.min(k, 8)}` });
      r.append(s('title', {}, `${x.label}, ${lab}: ${v.toLocaleString()}`));
      svg.append(r);
    });
    const every = Math.ceil(labels.length / 8);
    if (i % every === 0) svg.append(s('text', { x: pad.l + i * bw + bw / 2, y: height - 8, 'text-anchor': 'middle' }, lab));
  });
  return svg;
}

// bars draws one horizontal bar per row: [{label, value}].
export function bars({ title, rows, width = 520 }) {
  const rowH = 22;
  const pad = { l: 150, r: 60, t: 4 };
  const height = pad.t * 2 + Math.max(1, rows.length) * rowH;
  const max = niceMax(Math.max(0, ...rows.map((r) => r.value)));
  const w = width - pad.l - pad.r;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width: '100%', role: 'img', 'aria-label': `${title}: ${rows.map((r) => `${r.label} ${r.value}`).join(', ') || 'no data'}` });
  svg.append(s('title', {}, title));
  rows.forEach((r, i) => {
    const y = pad.t + i * rowH;
    const label = r.label.length > 22 ? `${r.label.slice(0, 21)}…` : r.label;
    svg.append(s('text', { x: pad.l - 6, y: y + 15, 'text-anchor': 'end' }, label));
    const bw = (r.value / max) * w;
    const rect = s('rect', { x: pad.l, y: y + 4, width: Math.max(r.value ? 2 : 0, bw), height: rowH - 8, class: `c${Math.min(i, 8)}` });
    rect.append(s('title', {}, `${r.label}: ${r.value.toLocaleString()}`));
    svg.append(rect, s('text', { x: pad.l + bw + 4, y: y + 15 }, short(r.value)));
  });
  if (!rows.length) svg.append(s('text', { x: pad.l, y: 16 }, 'No data yet'));
  return svg;
}
