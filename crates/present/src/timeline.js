'use strict';
// memprints' interactive memory timeline (see src/present/timeline.rs). No library, no network.
(() => {
  const BLOCK = 256; // events per min/max summary
  const PEAK_WINDOW = 50; // events on each side of the peak for "zoom to peak"
  const COLOR = { alloc: '#4e79a7', res: '#f28e2b', peak: '#222', oom: '#c53030', grid: '#e8e8e8', sel: '#e15759' };
  const ACTION = ['alloc', 'free_requested', 'segment_alloc', 'segment_free', 'oom', 'alloc (replaces a live block)'];
  const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

  function bytes(b) {
    let v = Math.abs(b), i = 0;
    while (v >= 1024 && i < UNITS.length - 1) { v /= 1024; i++; }
    return (b < 0 ? '-' : '') + (i ? v.toFixed(2) : v.toFixed(0)) + ' ' + UNITS[i];
  }
  // Time on the axis: milliseconds from the first event.
  function ms(us) {
    const v = us / 1e3;
    return (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v >= 1 ? v.toFixed(2) : v.toFixed(3)) + ' ms';
  }
  function duration(us) {
    if (us < 1e3) return us.toFixed(0) + ' µs';
    if (us < 1e6) return (us / 1e3).toFixed(2) + ' ms';
    return (us / 1e6).toFixed(3) + ' s';
  }
  // A step of 1, 2 or 5 times a power of ten (of the largest binary unit below max).
  function byteStep(max) {
    let unit = 1;
    while (unit * 1024 <= max) unit *= 1024;
    const raw = max / unit / 5, mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const m = [1, 2, 5, 10].find(k => k * mag >= raw) || 10;
    return m * mag * unit;
  }
  async function unpack(b64) {
    let packed;
    try {
      packed = new Uint8Array(await (await fetch('data:application/octet-stream;base64,' + b64)).arrayBuffer());
    } catch (_) {
      const s = atob(b64);
      packed = new Uint8Array(s.length);
      for (let i = 0; i < s.length; i++) packed[i] = s.charCodeAt(i);
    }
    const out = new Blob([packed]).stream().pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(out).arrayBuffer());
  }

  class Timeline {
    constructor(root) {
      const data = JSON.parse(root.querySelector('.mp-data').textContent);
      this.data = data;
      this.meta = data.meta;
      this.n = this.meta.events;
      this.canvas = root.querySelector('canvas');
      this.detail = root.querySelector('.mp-detail');
      this.status = root.querySelector('.mp-status');
      this.axisSelect = root.querySelector('select');
      this.axis = this.meta.has_times ? 'time' : 'events';
      this.axisSelect.value = this.axis;
      this.view = this.full();
      this.d = null;
      this.hovered = null;
      this.pinned = false;
      this.bind(root);
      this.draw();
      this.firstPaintMs = performance.now();
      this.ready = this.load().catch(e => { this.status.textContent = 'could not unpack the events: ' + e; throw e; });
    }
    full() {
      return this.axis === 'events' ? [0, Math.max(this.n, 1)] : [0, Math.max(this.meta.span_us, 1)];
    }
    async load() {
      const raw = await unpack(this.data.packed);
      this.sym = JSON.parse(new TextDecoder().decode(await unpack(this.data.symbols)));
      this.decode(raw);
      this.status.textContent = this.n.toLocaleString('en') + ' events charted';
      this.readyMs = performance.now();
      this.draw();
    }
    decode(raw) {
      const n = this.n, m = this.meta, sizes = this.sym.sizes;
      const kind = new Uint8Array(n), stack = new Uint32Array(n), size = new Float64Array(n);
      const x = new Float64Array(n), alloc = new Float64Array(n), res = new Float64Array(n);
      // Per event the band it adds to or takes from, and the band a replace ends; per block of
      // events the bands' levels before it, to replay any moment from.
      const K = Math.max(1, m.bands.length), sb = this.sym.stack_bands;
      const band = new Uint8Array(n), band2 = new Uint8Array(n), lv = new Float64Array(K);
      const ck = new Float64Array(Math.ceil(n / BLOCK) * K);
      lv[m.before_band] = m.start_allocated;
      let p = 0;
      const next = () => { let r = 0, s = 1, b; do { b = raw[p++]; r += (b & 127) * s; s *= 128; } while (b >= 128); return r; };
      let a = m.start_allocated, r = m.start_reserved, t = 0;
      for (let i = 0; i < n; i++) {
        const head = next(), k = head % 8, sz = sizes[next()];
        t += next();
        kind[i] = k; stack[i] = (head - k) / 8; size[i] = sz; x[i] = t;
        if (i % BLOCK === 0) ck.set(lv, (i / BLOCK) * K);
        if (k === 0) { a += sz; band[i] = sb[stack[i]]; lv[band[i]] += sz; }
        else if (k === 1) { a -= sz; band[i] = next(); lv[band[i]] -= sz; }
        else if (k === 2) r += sz;
        else if (k === 3) r -= sz;
        else if (k === 5) {
          const old = sizes[next()];
          a += sz - old; band[i] = sb[stack[i]]; band2[i] = next();
          lv[band[i]] += sz; lv[band2[i]] -= old;
        }
        alloc[i] = a; res[i] = r;
      }
      const nb = Math.ceil(n / BLOCK);
      const bmin = new Float64Array(nb), bmax = new Float64Array(nb), brmax = new Float64Array(nb);
      const barg = new Uint32Array(nb);
      for (let b = 0; b < nb; b++) {
        let lo = Infinity, hi = -Infinity, rh = -Infinity, at = b * BLOCK;
        for (let i = b * BLOCK, e = Math.min(n, i + BLOCK); i < e; i++) {
          if (alloc[i] < lo) lo = alloc[i];
          if (alloc[i] > hi) { hi = alloc[i]; at = i; }
          if (res[i] > rh) rh = res[i];
        }
        bmin[b] = lo; bmax[b] = hi; brmax[b] = rh; barg[b] = at;
      }
      const ooms = [];
      for (let i = 0; i < n; i++) if (kind[i] === 4) ooms.push(i);
      this.d = { kind, stack, size, x, alloc, res, bmin, bmax, brmax, barg, ooms, band, band2, ck, K };
    }
    // The event with the most allocated in [ia, ib).
    argmax(ia, ib) {
      const d = this.d;
      let best = ia, i = ia;
      while (i < ib) {
        if (i % BLOCK === 0 && i + BLOCK <= ib) {
          const b = i / BLOCK;
          if (d.bmax[b] > d.alloc[best]) best = d.barg[b];
          i += BLOCK;
        } else {
          if (d.alloc[i] > d.alloc[best]) best = i;
          i++;
        }
      }
      return best;
    }
    // The bands' levels after event i (before the first event when i < 0).
    levelsAt(i, out) {
      const d = this.d, K = d.K;
      if (i < 0) { out.fill(0); out[this.meta.before_band] = this.meta.start_allocated; return out; }
      const b = Math.floor(i / BLOCK);
      for (let k = 0; k < K; k++) out[k] = d.ck[b * K + k];
      for (let j = b * BLOCK; j <= i; j++) {
        const k = d.kind[j];
        if (k === 0) out[d.band[j]] += d.size[j];
        else if (k === 1) out[d.band[j]] -= d.size[j];
        else if (k === 5) { out[d.band[j]] += d.size[j]; out[d.band2[j]] -= d.size[j] - (d.alloc[j] - (j ? d.alloc[j - 1] : this.meta.start_allocated)); }
      }
      return out;
    }
    // The first event at or after axis position v.
    indexAt(v) {
      if (this.axis === 'events') return Math.max(0, Math.min(this.n, Math.ceil(v)));
      const x = this.d.x;
      let lo = 0, hi = this.n;
      while (lo < hi) { const mid = (lo + hi) >> 1; if (x[mid] < v) lo = mid + 1; else hi = mid; }
      return lo;
    }
    xOf(i) { return this.axis === 'events' ? i + 0.5 : (this.d ? this.d.x[i] : this.meta.peak_x_us); }
    pixelOf(v) { return this.plot.L + (v - this.view[0]) / (this.view[1] - this.view[0]) * this.plot.W; }
    before(i) { return i === 0 ? [this.meta.start_allocated, this.meta.start_reserved] : [this.d.alloc[i - 1], this.d.res[i - 1]]; }
    // Lowest and highest allocated, highest reserved over events [ia, ib).
    range(ia, ib) {
      const d = this.d;
      let lo = Infinity, hi = -Infinity, rh = -Infinity, i = ia;
      while (i < ib) {
        if (i % BLOCK === 0 && i + BLOCK <= ib) {
          const b = i / BLOCK;
          lo = Math.min(lo, d.bmin[b]); hi = Math.max(hi, d.bmax[b]); rh = Math.max(rh, d.brmax[b]);
          i += BLOCK;
        } else {
          lo = Math.min(lo, d.alloc[i]); hi = Math.max(hi, d.alloc[i]); rh = Math.max(rh, d.res[i]);
          i++;
        }
      }
      return [lo, hi, rh];
    }
    // Per pixel column [min allocated, max allocated, max reserved, first event, end event].
    columns(W) {
      const [v0, v1] = this.view, cols = new Array(W);
      if (!this.d) {
        const o = this.axis === 'events' ? this.meta.by_event : this.meta.by_time, C = o.allocated_max.length;
        for (let c = 0; c < W; c++) {
          const k = Math.min(C - 1, Math.floor((v0 + (v1 - v0) * c / W) / this.full()[1] * C));
          cols[c] = C ? [o.allocated_min[k], o.allocated_max[k], o.reserved_max[k], 0, 0] : [0, 0, 0, 0, 0];
        }
        return cols;
      }
      let ia = this.indexAt(v0);
      for (let c = 0; c < W; c++) {
        const ib = this.indexAt(v0 + (v1 - v0) * (c + 1) / W);
        const [a, r] = this.before(ia);
        let lo = a, hi = a, rh = r;
        if (ib > ia) { const s = this.range(ia, ib); lo = Math.min(lo, s[0]); hi = Math.max(hi, s[1]); rh = Math.max(rh, s[2]); }
        cols[c] = [lo, hi, rh, ia, ib];
        ia = ib;
      }
      return cols;
    }
    draw() {
      const cv = this.canvas, dpr = window.devicePixelRatio || 1;
      const cssW = cv.clientWidth || 900, cssH = 300;
      if (cv.width !== Math.round(cssW * dpr)) { cv.width = Math.round(cssW * dpr); cv.height = Math.round(cssH * dpr); }
      const g = cv.getContext('2d');
      g.setTransform(dpr, 0, 0, dpr, 0, 0);
      const L = 76, T = 14, W = Math.max(10, Math.floor(cssW - L - 12)), H = cssH - T - 34;
      this.plot = { L, T, W, H };
      const cols = this.columns(W);
      this.cols = cols;
      // One scale for every chart of the page.
      let ymax = Math.max(1, this.meta.y_max || 0);
      for (const c of cols) ymax = Math.max(ymax, c[1], c[2]);
      ymax *= 1.06;
      const Y = v => T + H - v / ymax * H;
      g.fillStyle = '#fff'; g.fillRect(0, 0, cssW, cssH);
      g.font = '11px sans-serif'; g.lineWidth = 1;
      const step = byteStep(ymax);
      for (let v = 0; v <= ymax; v += step) {
        const y = Math.round(Y(v)) + 0.5;
        g.strokeStyle = COLOR.grid; g.beginPath(); g.moveTo(L, y); g.lineTo(L + W, y); g.stroke();
        g.fillStyle = '#555'; g.textAlign = 'right'; g.fillText(bytes(v), L - 5, y + 4);
      }
      if (this.d) {
        // Each column at its highest moment, allocated stacked by owner band.
        const K = this.d.K, lv = new Float64Array(K), colors = this.meta.band_colors;
        for (let c = 0; c < W; c++) {
          const [, , , ia, ib] = cols[c];
          this.levelsAt(ib > ia ? this.argmax(ia, ib) : ia - 1, lv);
          let base = 0;
          for (let k = 0; k < K; k++) {
            if (lv[k] <= 0) continue;
            const y0 = Y(base), y1 = Y(base + lv[k]);
            g.fillStyle = colors[k] || COLOR.alloc;
            g.fillRect(L + c, y1, 1, y0 - y1);
            base += lv[k];
          }
        }
      } else {
        g.fillStyle = COLOR.alloc;
        for (let c = 0; c < W; c++) { const y = Y(cols[c][1]); g.fillRect(L + c, y, 1, T + H - y); }
      }
      g.strokeStyle = COLOR.res; g.lineWidth = 1.5; g.beginPath();
      for (let c = 0; c < W; c++) { const y = Y(cols[c][2]); if (c) g.lineTo(L + c + 0.5, y); else g.moveTo(L + 0.5, y); }
      g.stroke();
      this.axisLabels(g, L, T, W, H);
      const mark = (i, color, label) => {
        const px = this.pixelOf(this.xOf(i));
        if (px < L || px > L + W) return;
        g.strokeStyle = color; g.setLineDash([4, 3]); g.lineWidth = 1;
        g.beginPath(); g.moveTo(Math.round(px) + 0.5, T); g.lineTo(Math.round(px) + 0.5, T + H); g.stroke(); g.setLineDash([]);
        if (label) { g.fillStyle = color; g.textAlign = px > L + W - 160 ? 'right' : 'left'; g.fillText(label, px + (g.textAlign === 'left' ? 4 : -4), T + 10); }
      };
      if (this.d) for (const i of this.d.ooms) mark(i, COLOR.oom, 'OOM');
      if (this.meta.peak_event !== null) mark(this.meta.peak_event, COLOR.peak, 'peak ' + this.meta.peak_label);
      if (this.hovered !== null) mark(this.hovered, COLOR.sel, '');
      g.textAlign = 'left';
      g.fillStyle = COLOR.res; g.fillRect(4, cssH - 12, 12, 2);
      g.fillStyle = '#333'; g.fillText('reserved', 19, cssH - 7);
    }
    axisLabels(g, L, T, W, H) {
      g.fillStyle = '#555'; g.strokeStyle = '#888';
      g.beginPath(); g.moveTo(L, T + H + 0.5); g.lineTo(L + W, T + H + 0.5); g.stroke();
      const [v0, v1] = this.view;
      for (let k = 0; k <= 5; k++) {
        const v = v0 + (v1 - v0) * k / 5, px = L + W * k / 5;
        let label;
        if (this.axis === 'time') label = ms(v);
        else {
          const i = Math.min(this.n - 1, Math.max(0, Math.floor(v)));
          label = '#' + Math.floor(v) + (this.d && this.meta.has_times && this.n ? ' (' + ms(this.d.x[i]) + ')' : '');
        }
        g.textAlign = k === 0 ? 'left' : k === 5 ? 'right' : 'center';
        g.fillText(label, px, T + H + 14);
      }
      g.textAlign = 'center';
      g.fillText(this.axis === 'time' ? 'ms from the first event' : 'events in order (ms from the first event)', L + W / 2, T + H + 27);
    }
    // The event a column stands for: the largest allocation or free in it, else the last before.
    pick(c) {
      const col = this.cols[c];
      if (!this.d || !col) return null;
      const [, , , ia, ib] = col, d = this.d;
      let best = null;
      for (let i = ia; i < ib; i++) {
        if ((d.kind[i] === 0 || d.kind[i] === 1 || d.kind[i] === 5) && (best === null || d.size[i] > d.size[best])) best = i;
      }
      if (best === null) best = ib > ia ? ia : Math.max(0, ia - 1);
      return this.n ? best : null;
    }
    hover(c) {
      const i = this.pick(c);
      if (i === null) return null;
      this.hovered = i;
      this.show(i);
      this.draw();
      return i;
    }
    stackOf(i) {
      const s = this.d.stack[i];
      return { frames: this.sym.stacks[s].map(f => this.sym.frames[f]), key: this.sym.key_frames[s] };
    }
    show(i) {
      const d = this.d, { frames, key } = this.stackOf(i);
      const when = this.meta.has_times ? ' at ' + ms(d.x[i]) + ' from the first event' : '';
      const k = d.kind[i], owner = k === 0 || k === 1 || k === 5 ? 'owner: ' + this.meta.bands[d.band[i]] : null;
      const lines = [
        ACTION[k] + ' ' + bytes(d.size[i]) + ' (' + d.size[i] + ' bytes), charted event #' + i + ' of ' + this.n + when,
        'after it: allocated ' + bytes(d.alloc[i]) + ', reserved ' + bytes(d.res[i]),
        ...(owner ? [owner] : []),
        frames.length ? 'stack, innermost first (▶ the frame it is grouped by):' : 'no stack recorded',
      ];
      frames.forEach((f, k) => lines.push((k === key ? '▶ ' : '  ') + f));
      this.detail.textContent = lines.join('\n');
    }
    zoom(v0, v1) {
      const [f0, f1] = this.full(), min = 4; // events, or microseconds
      if (v1 - v0 < min) { const m = (v0 + v1) / 2; v0 = m - min / 2; v1 = m + min / 2; }
      const w = Math.min(v1 - v0, f1 - f0);
      v0 = Math.max(f0, Math.min(v0, f1 - w));
      this.view = [v0, v0 + w];
      this.draw();
    }
    zoomBy(f, at) {
      const [v0, v1] = this.view, m = at === undefined ? (v0 + v1) / 2 : at;
      this.zoom(m - (m - v0) * f, m + (v1 - m) * f);
    }
    zoomToPeak() {
      const p = this.meta.peak_event;
      if (p === null || !this.d) return;
      const a = Math.max(0, p - PEAK_WINDOW), b = Math.min(this.n - 1, p + PEAK_WINDOW);
      if (this.axis === 'events') this.zoom(a, b + 1);
      else this.zoom(this.d.x[a], this.d.x[b] + 1);
    }
    columnOf(i) { return Math.floor(this.pixelOf(this.xOf(i)) - this.plot.L); }
    bind(root) {
      const cv = this.canvas, col = e => Math.floor(e.clientX - cv.getBoundingClientRect().left - this.plot.L);
      let drag = null;
      cv.addEventListener('mousemove', e => {
        if (drag) {
          const dv = (e.clientX - drag.x) / this.plot.W * (drag.view[1] - drag.view[0]);
          if (Math.abs(e.clientX - drag.x) > 2) drag.moved = true;
          this.zoom(drag.view[0] - dv, drag.view[1] - dv);
        } else if (!this.pinned) this.hover(col(e));
      });
      cv.addEventListener('mousedown', e => { drag = { x: e.clientX, view: this.view.slice(), moved: false }; });
      window.addEventListener('mouseup', e => {
        if (drag && !drag.moved && e.target === cv) { this.pinned = !this.pinned; if (this.pinned) this.hover(col(e)); }
        drag = null;
      });
      cv.addEventListener('wheel', e => {
        e.preventDefault();
        const c = col(e), [v0, v1] = this.view;
        this.zoomBy(e.deltaY < 0 ? 0.8 : 1.25, v0 + (v1 - v0) * c / this.plot.W);
      }, { passive: false });
      cv.addEventListener('dblclick', () => { this.view = this.full(); this.draw(); });
      root.querySelectorAll('button').forEach(b => b.addEventListener('click', () => {
        const act = b.dataset.act;
        if (act === 'peak') this.zoomToPeak();
        else if (act === 'in') this.zoomBy(0.5);
        else if (act === 'out') this.zoomBy(2);
        else { this.view = this.full(); this.draw(); }
      }));
      this.axisSelect.disabled = !this.meta.has_times;
      this.axisSelect.addEventListener('change', () => {
        this.axis = this.axisSelect.value;
        this.view = this.full();
        this.draw();
      });
      window.addEventListener('resize', () => this.draw());
    }
  }

  const charts = [...document.querySelectorAll('.mp-timeline')].map(root => new Timeline(root));
  window.memprintsTimeline = charts;
  if (location.hash === '#selftest' && charts.length) {
    const out = document.createElement('pre');
    out.id = 'mp-selftest';
    document.body.appendChild(out);
    Promise.all(charts.map(c => c.ready)).then(() => {
      const c = charts[0];
      c.axis = 'events'; c.axisSelect.value = 'events'; c.view = c.full();
      c.zoomToPeak();
      const p = c.meta.peak_event, hovered = p === null ? null : c.hover(c.columnOf(p));
      const px = c.canvas.getContext('2d').getImageData(0, 0, c.canvas.width, c.canvas.height).data;
      const rgb = c.meta.band_colors.map(h => parseInt(h.slice(1), 16));
      let painted = 0;
      for (let i = 0; i < px.length; i += 4) if (rgb.includes(px[i] << 16 | px[i + 1] << 8 | px[i + 2])) painted++;
      const stack = hovered === null ? null : c.stackOf(hovered);
      out.textContent = JSON.stringify({
        charts: charts.length, events: c.n, first_paint_ms: c.firstPaintMs, ready_ms: c.readyMs,
        painted_pixels: painted, view: c.view, peak_event: p, hovered,
        hovered_size: hovered === null ? null : c.d.size[hovered], hovered_allocated: hovered === null ? null : c.d.alloc[hovered],
        stack: stack && stack.frames, key_frame: stack && stack.key, detail: c.detail.textContent,
        bands: c.meta.bands, y_max: c.meta.y_max,
        band_levels: hovered === null ? null : Array.from(c.levelsAt(hovered, new Float64Array(c.d.K))),
      });
    }).catch(e => { out.textContent = JSON.stringify({ error: String(e) }); });
  }
})();
