// report.js — the views of a `gpurt report` page, over the data object the
// page carries (tools/gpurt/report_data.c says its shape). Plain canvas: no
// library, no network. What is drawn is summarized to the pixels; the data
// underneath (and every tooltip) is exact.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("gpurt-data").textContent);
  const N = Math.max(1, D.n_events);
  const A = D.allocs; // [start, requested, end, addr, size, stack]
  const $ = (id) => document.getElementById(id);

  function fmtBytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, v = n;
    while (v >= 1024 && i < u.length - 1) v /= 1024, i++;
    return i ? v.toFixed(2) + " " + u[i] : n + " B";
  }
  const hex = (n) => "0x" + n.toString(16);
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (const c of kids) e.append(c);
    return e;
  }
  function colorOf(stack) { // one colour per allocation site, the same in every view
    if (!stack) return "hsl(210, 8%, 70%)";
    const h = (stack * 137.508) % 360;
    return "hsl(" + h.toFixed(0) + ", 62%, 58%)";
  }
  const framesOf = (stack) => D.stacks[stack] || [];
  const startOf = (a) => (a[0] < 0 ? 0 : a[0]);
  const endOf = (a) => (a[2] < 0 ? N : a[2]);
  function sizeCanvas(c, h) {
    const r = window.devicePixelRatio || 1, w = c.clientWidth || 1000;
    c.width = Math.round(w * r), c.height = Math.round(h * r), c.style.height = h + "px";
    const g = c.getContext("2d");
    g.setTransform(r, 0, 0, r, 0, 0);
    return { g, w, h };
  }

  // ---- the first screen: the doctor's verdict, sites and contract ----
  function renderDoctor() {
    const d = D.doctor, s = $("doctor");
    s.append(el("p", {}, el("span", { class: "verdict " + d.verdict, id: "verdict" }, d.verdict), " ", d.why));
    const t = el("table", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "reserved"), el("th", {}, "allocated"),
      el("th", {}, "largest free"), el("th", {}, "internal frag."), el("th", {}, "cached free"),
      el("th", {}, "releasable")));
    for (const [name, m] of [["at the peak", d.peak], ["at the first OOM", d.oom]]) {
      if (!m) continue;
      t.append(el("tr", {}, el("td", {}, name + " (event " + m.event + ")"), ...[m.reserved, m.allocated, m.largest,
        m.internal, m.external, m.releasable].map((x) => el("td", { class: "num" }, fmtBytes(x)))));
    }
    s.append(t);
    for (const [title, sites] of [["Which code held the memory at the peak", d.peak_sites],
      ["... and at the first OOM", d.oom_sites]]) {
      if (!sites.length) continue;
      s.append(el("h3", {}, title));
      const st = el("table", { class: "sites" });
      for (const [bytes, count, stack] of sites) {
        const fr = framesOf(stack);
        st.append(el("tr", {}, el("td", { class: "num" }, fmtBytes(bytes)), el("td", { class: "num" }, count + "x"),
          el("td", { class: "frames" }, el("span", { class: "swatch", style: "background:" + colorOf(stack) }),
            fr.length ? fr.slice(0, 3).join("\n") : "(no Python frames: allocated off the Python thread)")));
      }
      s.append(st);
    }
    s.append(el("h3", {}, "Runtime contract (docs/RUNTIME_CONTRACT.md)"));
    const ct = el("table", { id: "contract" });
    for (const [rule, outcome, detail] of d.contract)
      ct.append(el("tr", {}, el("td", { class: "outcome " + outcome }, outcome), el("td", {}, rule), el("td", {}, detail)));
    s.append(ct);
    if (d.partial) s.append(el("p", { class: "note" }, "The trace began mid-run: the state when recording began was rebuilt."));
  }

  // ---- the active memory timeline: live allocations stacked in the order they were made ----
  const order = A.map((_, i) => i).sort((x, y) => startOf(A[x]) - startOf(A[y]) || x - y);
  // The x axis: event indices, or the recorded time where every event has one. v0..v1 are in the
  // axis's unit; eventAt maps a position on it to the event in force there.
  const T = D.times, TEND = T ? T[T.length - 1] + 1 : N;
  const view = { v0: 0, v1: N, pinned: -1, hover: -1, time: false };
  function eventAt(v) {
    if (!view.time) return v;
    let lo = 0, hi = T.length; // the last event at or before time v
    while (lo < hi) { const m = (lo + hi) >> 1; if (T[m] <= v) lo = m + 1; else hi = m; }
    return lo - 0.5;
  }
  const axisEnd = () => (view.time ? TEND : N);

  function drawTimeline() {
    const c = $("tl"), { g, w, h } = sizeCanvas(c, 320);
    const cols = Math.max(1, Math.floor(w)), span = view.v1 - view.v0;
    const stacks = new Array(cols);
    let ymax = 1, k = 0;
    const active = [];
    const t0 = eventAt(view.v0 + 0.5 * span / cols);
    for (; k < order.length && startOf(A[order[k]]) <= t0; k++) if (endOf(A[order[k]]) > t0) active.push(order[k]);
    for (let x = 0; x < cols; x++) { // a sweep: each column's live set from the last one's
      const t = eventAt(view.v0 + (x + 0.5) * span / cols);
      for (; k < order.length && startOf(A[order[k]]) <= t; k++) active.push(order[k]);
      let total = 0, j = 0;
      for (const i of active) if (endOf(A[i]) > t) active[j++] = i, total += A[i][4];
      active.length = j;
      stacks[x] = active.slice();
      if (total > ymax) ymax = total;
    }
    view.cols = cols, view.ymax = ymax, view.stacks = stacks, view.h = h;
    g.clearRect(0, 0, w, h);
    const sy = (h - 20) / ymax;
    let drawn = 0;
    for (let x = 0; x < cols; x++) {
      for (const [i, lo, hi] of bands(x)) {
        g.fillStyle = i < 0 ? "#c9d1d9" : i === view.pinned ? "#0969da" : colorOf(A[i][5]);
        g.fillRect(x, h - hi * sy, 1, Math.max((hi - lo) * sy, i < 0 ? 0 : 1));
        drawn++;
      }
    }
    for (const o of D.marks.ooms) mark(g, o, "#cf222e", w, h);
    if (D.marks.peak >= 0) mark(g, D.marks.peak, "#8250df", w, h);
    g.fillStyle = "#57606a", g.font = "11px system-ui";
    g.fillText(fmtBytes(ymax) + " live at most   " + (view.time ? (view.v0 / 1e3).toFixed(1) + "-" +
      (view.v1 / 1e3).toFixed(1) + " ms (recorded time)" : "events " + Math.floor(view.v0) + "-" + Math.ceil(view.v1)), 4, 12);
    c.dataset.drawnBands = drawn;
  }
  function mark(g, e, color, w, h) {
    const v = view.time ? T[Math.min(e, T.length - 1)] : e;
    if (v < view.v0 || v > view.v1) return;
    const x = (v - view.v0) / (view.v1 - view.v0) * w;
    g.fillStyle = color, g.fillRect(x, 16, 1, h - 16);
  }

  // Column x's bands, bottom up: [alloc, low byte, high byte]; a run of allocations under half a pixel
  // each is one band in place, alloc -1 (the tooltip then names the run's largest).
  function bands(x) {
    const sy = (view.h - 20) / view.ymax, list = [];
    let top = 0;
    for (const i of view.stacks[x]) {
      const n = A[i][4], last = list[list.length - 1];
      if (n * sy < 0.5 && last && last[0] < 0) last[2] += n, last[3] = n > A[last[3]][4] ? i : last[3];
      else list.push(n * sy < 0.5 ? [-1, top, top + n, i] : [i, top, top + n]);
      top += n;
    }
    return list;
  }
  // The allocation under canvas point (x, y), or -1.
  function allocAt(x, y) {
    const col = Math.floor(x);
    if (!view.stacks || col < 0 || col >= view.cols) return -1;
    const sy = (view.h - 20) / view.ymax, bytes = (view.h - y) / sy;
    for (const [i, lo, hi, largest] of bands(col)) if (bytes >= lo && bytes < hi) return i < 0 ? largest : i;
    return -1;
  }
  function describe(i) {
    const a = A[i];
    const life = (a[0] < 0 ? "before recording" : "event " + a[0]) + " -> " +
      (a[2] < 0 ? "still live at the end" : "freed at event " + a[2]) +
      (a[1] >= 0 && a[1] !== a[2] - 1 ? " (free requested at " + a[1] + ")" : "");
    const fr = framesOf(a[5]);
    return fmtBytes(a[4]) + " (" + a[4] + " bytes) at " + hex(a[3]) + "\n" + life + "\n" +
      (fr.length ? fr.join("\n") : "(no frames recorded)");
  }
  function showTip(i, ev) {
    const tip = $("tip");
    if (i < 0) { if (view.pinned < 0) tip.style.display = "none"; return; }
    tip.textContent = describe(i);
    tip.style.display = "block";
    tip.style.left = Math.min(ev.clientX + 14, window.innerWidth - 400) + "px";
    tip.style.top = ev.clientY + 14 + "px";
  }
  function timelineEvents() {
    const c = $("tl");
    let drag = null;
    const local = (ev) => { const r = c.getBoundingClientRect(); return [ev.clientX - r.left, ev.clientY - r.top, r.width]; };
    c.addEventListener("mousemove", (ev) => {
      const [x, y, w] = local(ev);
      if (drag) {
        const d = (drag.x - x) / w * (drag.v1 - drag.v0);
        const s = Math.max(0, Math.min(axisEnd() - (drag.v1 - drag.v0), drag.v0 + d));
        view.v0 = s, view.v1 = s + (drag.v1 - drag.v0);
        drawTimeline();
        return;
      }
      if (view.pinned >= 0) return;
      view.hover = allocAt(x, y);
      c.dataset.hover = view.hover;
      showTip(view.hover, ev);
    });
    c.addEventListener("mouseleave", () => { if (view.pinned < 0) $("tip").style.display = "none"; });
    c.addEventListener("mousedown", (ev) => { const [x] = local(ev); drag = { x, v0: view.v0, v1: view.v1, moved: false }; });
    window.addEventListener("mouseup", (ev) => {
      if (!drag) return;
      const [x, y] = local(ev), click = Math.abs(x - drag.x) < 3;
      drag = null;
      if (!click) return;
      const i = allocAt(x, y); // click pins (or unpins) the band under the pointer
      view.pinned = i === view.pinned ? -1 : i;
      $("tip").classList.toggle("pinned", view.pinned >= 0);
      showTip(view.pinned >= 0 ? view.pinned : i, ev);
      drawTimeline();
    });
    c.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const [x, , w] = local(ev), at = view.v0 + x / w * (view.v1 - view.v0);
      const f = ev.deltaY < 0 ? 0.8 : 1.25, span = Math.min(axisEnd(), Math.max(8, (view.v1 - view.v0) * f));
      view.v0 = Math.max(0, Math.min(axisEnd() - span, at - (at - view.v0) * span / (view.v1 - view.v0)));
      view.v1 = view.v0 + span;
      drawTimeline();
    }, { passive: false });
    c.addEventListener("dblclick", () => { view.v0 = 0, view.v1 = axisEnd(); drawTimeline(); });
    const axis = $("axis");
    if (!T) { axis.disabled = true; axis.title = "the snapshot records no times"; }
    axis.addEventListener("change", () => {
      view.time = axis.value === "time" && !!T;
      view.v0 = 0, view.v1 = axisEnd();
      drawTimeline();
    });
  }

  // ---- the allocator state at any event, as recorded ----
  // Segments at the start: the final ones with every segment event undone, last first.
  function rangesSub(rs, a, n) {
    const out = [];
    for (const [s, e] of rs) {
      if (e <= a || s >= a + n) { out.push([s, e]); continue; }
      if (s < a) out.push([s, a]);
      if (e > a + n) out.push([a + n, e]);
    }
    return out;
  }
  const startRanges = (() => {
    let rs = D.segs.final.map(([a, n]) => [a, a + n]);
    for (let i = D.segs.ev.length - 1; i >= 0; i--) {
      const [, kind, a, n] = D.segs.ev[i];
      rs = kind === 0 || kind === 2 ? rangesSub(rs, a, n) : rs.concat([[a, a + n]]);
    }
    return rs;
  })();
  const mapsPages = D.segs.ev.some((s) => s[1] >= 2); // an expandable trace: mapped pages, not segments
  function segmentsAt(e) {
    let rs = startRanges.slice();
    for (const [i, kind, a, n] of D.segs.ev) {
      if (i > e) break;
      rs = kind === 0 || kind === 2 ? rs.concat([[a, a + n]]) : rangesSub(rs, a, n);
    }
    rs.sort((x, y) => x[0] - y[0]);
    const merged = []; // pages mapped next to each other are one expandable segment
    for (const r of rs) {
      const last = merged[merged.length - 1];
      if (last && last[1] === r[0] && mapsPages) last[1] = r[1];
      else merged.push(r.slice());
    }
    return merged;
  }
  // Without recorded segments, the live blocks grouped where they lie within 2 MiB of each other.
  function clusters(blocks) {
    const out = [];
    for (const [a, n] of blocks) {
      const last = out[out.length - 1];
      if (last && a - last[1] < 2 << 20) last[1] = Math.max(last[1], a + n);
      else out.push([a, a + n]);
    }
    return out;
  }
  const noSegments = !D.segs.final.length && !D.segs.ev.length;
  function drawState() {
    const e = +$("ev").value;
    const blocks = [];
    for (const a of A) {
      if (startOf(a) > e || endOf(a) <= e) continue;
      blocks.push([a[3], a[4], a[1] >= 0 && a[1] <= e ? "pending" : "allocated", a[5]]);
    }
    blocks.sort((x, y) => x[0] - y[0]);
    const segs = noSegments ? clusters(blocks) : segmentsAt(e);
    const rows = segs.slice().sort((x, y) => (y[1] - y[0]) - (x[1] - x[0])).slice(0, 200)
      .sort((x, y) => x[0] - y[0]);
    const big = rows.reduce((m, r) => Math.max(m, r[1] - r[0]), 1);
    const rowH = 14, c = $("segs"), { g, w } = sizeCanvas(c, Math.max(40, rows.length * rowH + 8));
    g.clearRect(0, 0, w, c.height);
    let bi = 0, drawn = 0, largest = null, reserved = 0, used = 0;
    rows.forEach(([s, end], r) => {
      const y = 4 + r * rowH, sx = (w - 8) / big;
      reserved += end - s;
      g.fillStyle = "#eaeef2", g.fillRect(4, y, (end - s) * sx, rowH - 3); // cached free
      while (bi < blocks.length && blocks[bi][0] < s) bi++;
      let cursor = s;
      for (let j = bi; j < blocks.length && blocks[j][0] < end; j++) {
        const [a, n, st, stack] = blocks[j];
        if (a - cursor > (largest ? largest[2] : 0)) largest = [r, cursor, a - cursor, s];
        g.fillStyle = st === "pending" ? "#d4a72c" : colorOf(stack);
        g.fillRect(4 + (a - s) * sx, y, Math.max(1, n * sx), rowH - 3);
        cursor = Math.max(cursor, a + n), used += n, drawn++;
      }
      if (end - cursor > (largest ? largest[2] : 0)) largest = [r, cursor, end - cursor, s];
    });
    if (largest) {
      const [r, a, n, s] = largest, sx = (w - 8) / big;
      g.strokeStyle = "#cf222e", g.lineWidth = 2, g.strokeRect(4 + (a - s) * sx, 4 + r * rowH, Math.max(2, n * sx), rowH - 3);
    }
    c.dataset.drawnBlocks = drawn, c.dataset.segments = segs.length, c.dataset.event = e;
    $("state-figures").textContent = "event " + e + ": " + segs.length +
      (noSegments ? " address ranges of live blocks (the snapshot records no segments) (" : " segments (") + fmtBytes(reserved) +
      (segs.length > rows.length ? ", the " + rows.length + " largest drawn" : "") + "), " + drawn +
      " live blocks (" + fmtBytes(used) + " requested), largest free block " + fmtBytes(largest ? largest[2] : 0) +
      " (outlined)";
    drawFigures();
  }
  function stateControls() {
    const ev = $("ev");
    ev.max = N - 1, ev.value = D.marks.peak >= 0 ? D.marks.peak : N - 1;
    ev.addEventListener("input", drawState);
    const go = (e) => { ev.value = Math.max(0, Math.min(N - 1, e)); drawState(); };
    const ctl = $("jumps");
    const button = (label, id, f) => { const b = el("button", { id }, label); b.addEventListener("click", f); ctl.append(b); };
    button("-1", "step-back", () => go(+ev.value - 1));
    button("+1", "step-fwd", () => go(+ev.value + 1));
    if (D.marks.peak >= 0) button("peak", "jump-peak", () => go(D.marks.peak));
    D.marks.ooms.slice(0, 8).forEach((o, k) => button("OOM " + (k + 1), "jump-oom-" + k, () => go(o)));
    const next = (dir) => { // the next device malloc after (or before) the shown event
      const e = +ev.value, m = D.marks.mallocs;
      const f = dir > 0 ? m.find((x) => x > e) : [...m].reverse().find((x) => x < e);
      if (f !== undefined) go(f);
    };
    if (D.marks.mallocs.length) button("< device malloc", "malloc-prev", () => next(-1)), button("device malloc >", "malloc-next", () => next(1));
  }

  // ---- the figures over time ----
  const recordedReserved = (() => { // from the segment events: exact, per event that changed it
    let r = startRanges.reduce((s, [a, e]) => s + e - a, 0);
    const pts = [[0, r]];
    for (const [i, kind, , n] of D.segs.ev) r += kind === 0 || kind === 2 ? n : -n, pts.push([i, r]);
    return pts;
  })();
  const seriesDefs = [
    { key: "reserved", label: "reserved (model)", color: "#0969da" },
    { key: "allocated", label: "allocated (model)", color: "#1a7f37" },
    { key: "largest", label: "largest free block (model)", color: "#bc4c00" },
    { key: "recorded", label: "reserved (recorded run)", color: "#8250df", dash: [5, 4] },
  ];
  const hidden = {};
  function drawFigures() {
    const c = $("fig"), { g, w, h } = sizeCanvas(c, 220), S = D.series;
    let ymax = 1;
    for (const d of seriesDefs) {
      if (hidden[d.key]) continue;
      const vals = d.key === "recorded" ? recordedReserved.map((p) => p[1]) : S[d.key];
      for (const v of vals) if (v > ymax) ymax = v;
    }
    g.clearRect(0, 0, w, h);
    const X = (e) => e / N * w, Y = (v) => h - 4 - v / ymax * (h - 20);
    for (const d of seriesDefs) {
      if (hidden[d.key]) continue;
      g.strokeStyle = d.color, g.lineWidth = 1.5, g.setLineDash(d.dash || []);
      g.beginPath();
      if (d.key === "recorded") {
        recordedReserved.forEach(([e, v], k) => { if (k) g.lineTo(X(e), Y(recordedReserved[k - 1][1])); g.lineTo(X(e), Y(v)); });
        g.lineTo(w, Y(recordedReserved[recordedReserved.length - 1][1]));
      } else {
        S[d.key].forEach((v, k) => (k ? g.lineTo : g.moveTo).call(g, X(k * S.step), Y(v)));
      }
      g.stroke();
    }
    g.setLineDash([]);
    g.fillStyle = "#cf222e"; // the recorded run's device mallocs, as ticks along the bottom
    for (const m of D.marks.mallocs) g.fillRect(X(m), h - 4, 1, 4);
    const e = +$("ev").value;
    g.fillStyle = "#57606a", g.fillRect(X(e), 0, 1, h);
    g.font = "11px system-ui", g.fillText(fmtBytes(ymax), 4, 12);
    const mallocs = S.mallocs[S.mallocs.length - 1] || 0;
    $("fig-note").textContent = "device mallocs in the model: " + mallocs + "; in the recorded run: " +
      D.marks.mallocs.length + " (red ticks); the grey line is the state view's event";
  }
  function legend() {
    const l = $("legend");
    for (const d of seriesDefs) {
      const cb = el("input", { type: "checkbox", id: "show-" + d.key });
      cb.checked = true;
      cb.addEventListener("change", () => { hidden[d.key] = !cb.checked; drawFigures(); });
      l.append(el("label", {}, cb, el("span", { class: "swatch", style: "background:" + d.color }), d.label));
    }
  }

  // For tests and scripts: a point inside the largest band at the peak.
  window.gpurtReport = {
    data: D,
    probe() {
      const c = $("tl"), r = c.getBoundingClientRect();
      const e = D.marks.peak >= 0 ? D.marks.peak : Math.floor(N / 2);
      const v = view.time ? T[e] : e;
      const x = Math.min(view.cols - 1, Math.floor((v - view.v0) / (view.v1 - view.v0) * view.cols));
      const sy = (view.h - 20) / view.ymax;
      let best = null;
      for (const [i, lo, hi] of bands(x))
        if (i >= 0 && (!best || A[i][4] > A[best.i][4])) best = { i, y: view.h - (lo + hi) / 2 * sy };
      return best ? { x: r.left + x + 0.5, y: r.top + best.y, alloc: best.i, frames: framesOf(A[best.i][5]) } : null;
    },
  };

  renderDoctor();
  timelineEvents();
  stateControls();
  legend();
  drawTimeline();
  drawState();
  window.addEventListener("resize", () => { drawTimeline(); drawState(); });
  document.body.dataset.ready = "1";
})();
