// Shared by the views: building elements (text only, never HTML from data), numbers, the JSON API,
// and charts with their numbers as a table on demand (the charts' text alternative).

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function num(x) { const n = Number(x); return Number.isFinite(n) ? n : NaN; }
export function fmt(x, digits = 2) {
  const n = num(x);
  if (!Number.isFinite(n)) return "–";
  return n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}
export function mib(bytes) { return fmt(num(bytes) / 1048576, 1) + " MiB"; }
export function pct(x, digits = 1) { return Number.isFinite(num(x)) ? fmt(num(x) * 100, digits) + " %" : "–"; }
export function clock(unix_s) {
  return Number.isFinite(num(unix_s)) && num(unix_s) > 0 ? new Date(num(unix_s) * 1000).toLocaleTimeString("en-GB") : "–";
}
export function simTime(t_s) {
  const t = num(t_s), h = Math.floor(t / 3600), m = Math.floor((t % 3600) / 60), s = Math.round(t % 60);
  return `${h}:${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}`;
}

export async function api(path) {
  const r = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(body.error || `${path}: HTTP ${r.status}`);
  return body;
}

// A table from column specs [{key, label, num, fmt}] and row objects.
export function table(columns, rows, { caption, rowAttrs } = {}) {
  const head = el("tr", {}, columns.map(c => el("th", { scope: "col", class: c.num ? "num" : null, text: c.label })));
  const body = rows.map(r => el("tr", rowAttrs ? rowAttrs(r) : {}, columns.map(c => {
    const v = c.fmt ? c.fmt(r[c.key], r) : r[c.key];
    return el("td", { class: c.num ? "num" : null }, v instanceof Node ? v : (v ?? "–"));
  })));
  return el("table", {}, caption ? el("caption", { text: caption }) : null, el("thead", {}, head), el("tbody", {}, body));
}

// A chart: the ECharts plot, and its numbers as a table, built when the reader opens it.
// data(): {columns, rows} of the numbers drawn (called again each time the table is opened).
// The plot is made when it comes near the viewport, so a page with many figures paints its first
// screen without waiting for the others; set() and on() before that are kept and applied then.
export function chart(parent, { title, option, data, tall = false, summary = "", lazy = true }) {
  const plot = el("div", { class: "plot" + (tall ? " tall" : ""), role: "img", "aria-label": `${title}. ${summary}`.trim() });
  const wrap = el("div", { class: "tablewrap" });
  const details = el("details", {}, el("summary", { text: `${title}: the numbers as a table` }), wrap);
  details.addEventListener("toggle", () => {
    if (!details.open) return;
    const d = data();
    wrap.replaceChildren(table(d.columns, d.rows, { caption: title }));
  });
  const fig = el("figure", { class: "chart" }, el("figcaption", { text: title }), plot, details);
  parent.append(fig);
  let pending = {};            // updates before the plot exists: the last one of each top-level key
  const handlers = [];
  let drawn;
  const obj = {
    fig, details, chart: null, ready: new Promise(r => { drawn = r; }),
    set(opt, replace = false) {
      if (obj.chart) obj.chart.setOption(opt, replace ? { replaceMerge: ["series"] } : undefined);
      else pending = { ...pending, ...opt };
    },
    on(event, fn, zr = false) { handlers.push([event, fn, zr]); if (obj.chart) bind(event, fn, zr); },
    refreshTable() { if (details.open) details.dispatchEvent(new Event("toggle")); },
  };
  const bind = (event, fn, zr) => (zr ? obj.chart.getZr() : obj.chart).on(event, fn);
  const init = () => {
    if (obj.chart) return;
    if (!window.echarts) { loadCharts().then(init, () => plot.replaceChildren(missingLibrary())); return; }
    obj.chart = window.echarts.init(plot, null, { renderer: "canvas" });
    obj.chart.setOption({ animation: false, aria: { enabled: true }, tooltip: { trigger: "axis" },
                          grid: { left: 56, right: 56, top: 44, bottom: 40 }, legend: { top: 0, type: "scroll" }, ...option });
    if (Object.keys(pending).length) obj.chart.setOption(pending);
    pending = {};
    for (const [e, f, z] of handlers) bind(e, f, z);
    charts.add(obj.chart);
    drawn(obj.chart);
  };
  if (lazy && "IntersectionObserver" in window) {
    const io = new IntersectionObserver(es => { if (es.some(e => e.isIntersecting)) { io.disconnect(); observers.delete(io); init(); } },
                                        { rootMargin: "200px" });
    io.observe(plot);
    observers.add(io);
  } else init();
  return obj;
}

const observers = new Set();
let library = null;

// The chart library, run when the first chart is made (preloaded by index.html): the page's text
// paints first, without waiting for the library's megabyte of script to be evaluated.
export function loadCharts() {
  if (!library) library = new Promise((resolve, reject) => {
    const s = el("script", { src: "/assets/echarts.js" });
    s.addEventListener("load", () => window.echarts ? resolve(window.echarts) : reject(new Error("no echarts")));
    s.addEventListener("error", reject);
    document.head.append(s);
  });
  return library;
}

function missingLibrary() {
  return el("p", { class: "error", text: "The chart library is not installed (run ./cellbed.sh setup); the numbers are in the table below." });
}
const charts = new Set();
window.addEventListener("resize", () => { for (const c of charts) if (!c.isDisposed()) c.resize(); });
export function disposeCharts() {
  for (const o of observers) o.disconnect();
  observers.clear();
  for (const c of charts) if (!c.isDisposed()) c.dispose();
  charts.clear();
}

// What the tests and the benchmark read: how long pushed changes took to show, and the states shown.
window.cellbed = window.cellbed || { latencies: [], seen: {}, marks: {} };
export function shown(ev_unix_s) {
  if (num(ev_unix_s) > 0) window.cellbed.latencies.push(Date.now() / 1000 - num(ev_unix_s));
}
// A mark once the browser has painted what the script just drew: after the next frame.
// Resolves then, so that work for later can wait until this has been painted.
export function mark(name) {
  return new Promise(resolve => requestAnimationFrame(() => setTimeout(() => {
    if (!(name in window.cellbed.marks)) {
      performance.mark("cellbed:" + name);
      window.cellbed.marks[name] = performance.now();
    }
    resolve();
  }, 0)));
}
