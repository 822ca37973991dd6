// A results folder: aggregates first (ticks.csv, small at any cell size), then on demand its hosts at
// the slider's time (a heat strip and a histogram: never one DOM row per host), one host's detail,
// the migrations around that time, the report's figures as interactive plots, and, where the folder
// has them, per-stage timing (stages.csv), SAN rounds (san.csv) and decision explanations.
import { el, fmt, pct, mib, api, table, chart, mark, num, simTime, loadCharts } from "./util.js";
import { explainButton, DecisionPanel } from "./decisions.js";

const CLASSES = ["idle", "overloaded", "sta", "ta", "pa", "da"];

export function timeAxis(ts) {
  const span = ts.length ? ts[ts.length - 1] - ts[0] : 0;
  return span >= 3 * 3600 ? { div: 3600, name: "simulated time (h)" } : { div: 60, name: "simulated time (min)" };
}

export function figures(parent, runs, onPick) {
  // The report's figures (cellbed/experiment/report_plots.py), one series per run when overlaid.
  const many = runs.length > 1, ax = timeAxis(runs[0].ticks.t_s);
  const xs = r => r.ticks.t_s.map(t => t / ax.div);
  const line = (name, r, ys, extra = {}) => ({ name: many ? `${r.label}: ${name}` : name, type: "line", step: "start",
                                               showSymbol: false, data: xs(r).map((x, i) => [x, ys[i]]), ...extra });
  const cols = (r, keys) => ({ columns: [{ key: "t", label: ax.name, num: true, fmt: x => fmt(x, 2) },
                                          ...keys.map(([k, l, f]) => ({ key: k, label: l, num: true, fmt: f || (x => fmt(x, 3)) }))],
                               rows: r.ticks.t_s.map((t, i) => Object.fromEntries([["t", t / ax.div], ...keys.map(([k, , , g]) => [k, g ? g(r, i) : r.ticks[k][i]])])) });
  const tableOf = keys => () => { const d = runs.map(r => cols(r, keys)); return many
      ? { columns: [{ key: "run", label: "run" }, ...d[0].columns], rows: d.flatMap((x, j) => x.rows.map(row => ({ run: runs[j].label, ...row }))) } : d[0]; };
  const xAxis = { type: "value", name: ax.name, nameLocation: "middle", nameGap: 26, min: "dataMin", max: "dataMax" };
  const share = (r, k) => r.ticks[k].map((v, i) => r.ticks.nodes[i] ? v / r.ticks.nodes[i] * 100 : null);
  const asr = (r, k) => r.ticks[k].map((v, i) => { const d = r.ticks.sta[i] + r.ticks.ta[i] + r.ticks.pa[i] + r.ticks.da[i]; return d ? v / d * 100 : null; });
  const out = [];
  const add = (title, summary, option, keys) => {
    const c = chart(parent, { title, summary, option: { xAxis, ...option }, data: tableOf(keys) });
    if (onPick) c.on("click", e => {
      const p = c.chart.convertFromPixel({ gridIndex: 0 }, [e.offsetX, e.offsetY]);
      if (p) onPick(p[0] * ax.div);
    }, true);
    out.push(c);
  };
  add("Overloaded and idle nodes (% of nodes)", "Share of overloaded and of idle nodes per tick; MASB's threshold is 0.5 %.",
      { yAxis: { type: "value", name: "%" }, series: runs.flatMap(r => [line("overloaded", r, share(r, "overloaded")), line("idle", r, share(r, "idle"))]) },
      [["overloaded", "overloaded", x => fmt(x, 0)], ["idle", "idle", x => fmt(x, 0)], ["nodes", "nodes", x => fmt(x, 0)]]);
  add("Allocation score ratios (% of non-idle, non-overloaded nodes)", "Shares of the STA, TA, PA and DA classes per tick.",
      { yAxis: { type: "value", name: "%", max: 100 }, series: runs.flatMap(r => ["sta", "ta", "pa", "da"].map(k => line(k.toUpperCase(), r, asr(r, k), many ? {} : { stack: "asr", areaStyle: {} }))) },
      ["sta", "ta", "pa", "da"].map(k => [k, k.toUpperCase() + " nodes", x => fmt(x, 0)]));
  add("Migrations per tick", "Attempted, succeeded, refused and failed migrations in each tick.",
      { yAxis: { type: "value", name: "per tick" }, series: runs.flatMap(r => ["migrations_attempted", "migrations_succeeded", "migrations_refused", "migrations_failed"]
          .map(k => line(k.replace("migrations_", ""), r, r.ticks[k]))) },
      ["attempted", "succeeded", "refused", "failed"].map(k => [`migrations_${k}`, k, x => fmt(x, 0)]).concat([["bytes_moved", "bytes moved", mib]]));
  add("Cell utilisation (% of capacity)", "CPU and memory used and requested, as fractions of the cell's capacity.",
      { yAxis: { type: "value", name: "%" }, series: runs.flatMap(r => ["used_cpu", "req_cpu", "used_mem", "req_mem"].map(k => line(k.replace("_", " "), r, r.ticks[k].map(v => v * 100)))) },
      ["used_cpu", "req_cpu", "used_mem", "req_mem"].map(k => [k, k.replace("_", " "), pct]));
  add("Tasks running and pending", "Tasks running and waiting for a placement at each tick.",
      { yAxis: { type: "value", name: "tasks" }, series: runs.flatMap(r => [line("running", r, r.ticks.tasks_running), line("pending", r, r.ticks.tasks_pending)]) },
      [["tasks_running", "running", x => fmt(x, 0)], ["tasks_pending", "pending", x => fmt(x, 0)]]);
  return out;
}

export function cdfChart(parent, title, named, unit = "ms", floor = 0.01) {
  // named: [[series name, [[value, fraction], ...]], ...]; a log axis, values below *floor* drawn at it
  return chart(parent, { title, summary: `Cumulative distribution: the fraction of values at or below each value (log axis; values under ${floor} ${unit} drawn at ${floor}).`,
    option: { xAxis: { type: "log", name: `${unit} (log)`, nameLocation: "middle", nameGap: 26 },
              yAxis: { type: "value", name: "fraction", max: 1 },
              series: named.map(([n, pts]) => ({ name: n, type: "line", step: "end", showSymbol: false, data: pts.map(([v, p]) => [Math.max(v, floor), p]) })) },
    data: () => ({ columns: [{ key: "s", label: "series" }, { key: "v", label: unit, num: true, fmt: x => fmt(x, 2) }, { key: "p", label: "fraction", num: true, fmt: x => fmt(x, 3) }],
                   rows: named.flatMap(([n, pts]) => pts.filter((_, i) => i % 10 === 0 || i === pts.length - 1).map(([v, p]) => ({ s: n, v, p }))) }) });
}

const STRIP_COLOURS = ["#eef2f8", "#c6d7ee", "#9dbbe2", "#6f9ad2", "#4677bd", "#2a5597", "#e08a2c", "#c4461f", "#7a1d0e"];

// The strip's colour classes: one per VM count up to 8, else 9 equal ranges up to the busiest host.
export function stripBins(max) {
  if (max <= 8) return [...Array(max + 1).keys()].map(v => ({ hi: v, label: `${v} VM${v === 1 ? "" : "s"}`, color: STRIP_COLOURS[v] }));
  const step = Math.ceil((max + 1) / 9);
  return STRIP_COLOURS.map((color, k) => {
    const lo = k * step, hi = Math.min(max, (k + 1) * step - 1);
    return { hi: k === 8 ? Infinity : hi, label: k === 8 ? `${lo}+ VMs` : `${lo}–${hi} VMs`, color };
  });
}

export class RunView {
  constructor(root, config, id) {
    this.root = root; this.id = id; this.config = config; this.hostsReq = 0; this.names = null;
    this.start().catch(e => root.append(el("p", { class: "error", role: "alert", text: `Cannot open run ${id}: ${e.message}` })));
  }

  async start() {
    const s = this.s = await api(`/api/runs/${this.id}/summary`);
    const t = s.ticks, last = t.t_s.length - 1, sc = s.scenario || {}, done = s.completed || {};
    this.tick = t.t_s.length > 1 ? t.t_s[1] - t.t_s[0] : num((sc.run || {}).tick_s) || 60;
    const sections = [["replay", "Replay"], ["figures", "Figures"], ["distributions", "Distributions"]];
    if (s.files.stages) sections.push(["stages", "Stage timing"]);
    if (s.files.san) sections.push(["san", "SAN rounds"]);
    if (s.files.decisions) sections.push(["decisions", "Decisions"]);
    sections.push(["pipeline", "Pipeline"]);
    this.root.append(
      el("h2", { text: `Run ${s.label}` }),
      el("ul", { class: "facts" },
        el("li", {}, el("b", { text: "folder " }), s.path), el("li", {}, el("b", { text: "driver " }), done.driver || "?"),
        el("li", {}, el("b", { text: "frontend " }), (sc.policy || {}).frontend || "?"),
        el("li", {}, el("b", { text: "nodes " }), fmt(Math.max(...t.nodes, 0), 0)),
        el("li", {}, el("b", { text: "simulated " }), simTime(done.simulated_s || t.t_s[last] || 0)),
        el("li", {}, el("b", { text: "wall " }), `${fmt(done.wall_s, 1)} s`), el("li", {}, el("b", { text: "seed " }), String(s.seed))),
      el("ul", { class: "sectionnav", "aria-label": "Sections" }, sections.map(([k, l]) => el("li", {}, el("a", { href: `#run/${this.id}`, text: l,
        onclick: e => { e.preventDefault(); const x = document.getElementById(`run-${k}`); x.scrollIntoView(); x.focus(); } })))));
    this.sec = {};
    for (const [k, l] of sections) {
      const body = el("div");
      this.root.append(el("section", { id: `run-${k}`, tabindex: "-1", "aria-labelledby": `run-${k}-h` }, el("h2", { id: `run-${k}-h`, text: l }), body));
      this.sec[k] = body;
    }
    this.decisions = s.files.decisions ? new DecisionPanel(this.sec.decisions, this.id) : null;
    this.buildReplay(t);
    this.figs = [];
    // the hosts first (heat strip and histogram: the aggregate that opens the run), then the figures
    // and the distributions
    this.afterHosts = () => {
      this.figs = figures(this.sec.figures, [s], tt => this.seek(tt));
      this.markTime();
      this.more();
    };
    // once the text is painted, the chart library is evaluated while the hosts are being fetched
    mark("run-painted").then(() => loadCharts().catch(() => null));
    this.setTime(last);
  }

  // --- replay ----------------------------------------------------------------------------------
  buildReplay(t) {
    const last = t.t_s.length - 1;
    this.slider = el("input", { type: "range", id: "run-slider", min: "0", max: String(last), step: "1", value: String(last),
                                "aria-label": "Simulated time (tick)", "aria-describedby": "run-time" });
    this.timeOut = el("output", { id: "run-time", for: "run-slider" });
    let pending = null;
    this.slider.addEventListener("input", () => { clearTimeout(pending); pending = setTimeout(() => this.setTime(Number(this.slider.value)), 80); });
    this.facts = el("ul", { class: "facts", "aria-live": "polite" });
    this.stripBox = el("div", { class: "grow" });
    this.histBox = el("div", { class: "grow" });
    this.hostNote = el("p", { class: "muted" });
    const input = el("input", { type: "text", id: "host-name", "aria-label": "Host name", placeholder: "host name, e.g. n42", size: "14" });
    const form = el("form", { class: "slider", onsubmit: e => { e.preventDefault(); if (input.value.trim()) this.showHost(input.value.trim()); } },
                    el("label", { for: "host-name", text: "Host detail:" }), input, el("button", { type: "submit", text: "Show" }));
    this.hostPanel = el("div", { id: "host-detail", tabindex: "-1" });
    this.migBox = el("div");
    this.sec.replay.append(el("div", { class: "slider" }, el("label", { for: "run-slider", text: "Time" }), this.slider, this.timeOut),
      this.facts, el("div", { class: "row" }, this.stripBox, this.histBox), this.hostNote, form, this.hostPanel,
      el("h3", { text: "Migrations around this time" }), this.migBox);
  }

  seek(t_s) {
    const ts = this.s.ticks.t_s;
    let i = ts.findIndex(x => x >= t_s);
    if (i < 0) i = ts.length - 1;
    this.slider.value = String(i);
    this.setTime(i);
  }

  setTime(i) {
    const t = this.s.ticks, T = t.t_s[i];
    this.t = T;
    this.timeOut.textContent = `t = ${simTime(T)} (tick ${i + 1} of ${t.t_s.length})`;
    this.slider.setAttribute("aria-valuetext", `simulated time ${simTime(T)}`);
    this.facts.replaceChildren(...CLASSES.map(k => el("li", {}, el("b", { text: `${k} ` }), fmt(t[k][i], 0))),
      el("li", {}, el("b", { text: "tasks running " }), fmt(t.tasks_running[i], 0)), el("li", {}, el("b", { text: "pending " }), fmt(t.tasks_pending[i], 0)),
      el("li", {}, el("b", { text: "CPU used " }), pct(t.used_cpu[i])), el("li", {}, el("b", { text: "mem used " }), pct(t.used_mem[i])),
      el("li", {}, el("b", { text: "migrations this tick " }), fmt(t.migrations_succeeded[i], 0)));
    this.markTime();
    window.cellbed.runTime = T;
    this.loadHosts(T);
    this.loadMigrations(T);
    if (this.hostShown) this.showHost(this.hostShown, false);
  }

  markTime() {
    const ax = timeAxis(this.s.ticks.t_s);
    for (const f of this.figs) f.set({ series: [{ markLine: { silent: true, symbol: "none", animation: false,
      data: [{ xAxis: this.t / ax.div }], lineStyle: { color: "#f0a000" }, label: { show: false } } }] });
  }

  async loadHosts(T) {
    const req = ++this.hostsReq;
    const d = await api(`/api/runs/${this.id}/hosts?t=${T}${this.names ? "" : "&names=1"}`);
    if (req !== this.hostsReq) return;
    if (d.hosts) this.names = d.hosts;
    this.hostNote.textContent = `${fmt(d.n, 0)} hosts. ${d.note}.`;
    this.drawStrip(d);
    this.drawHist(d);
    await Promise.all([this.strip.ready, this.hist.ready]);
    window.cellbed.hostsTime = T;
    await mark("hosts-painted");
    if (this.afterHosts) { const f = this.afterHosts; this.afterHosts = null; f(); }
  }

  // The heat strip: one cell per host, coloured by its VMs in at most 9 classes, each class one
  // large-mode scatter series (ECharts draws 12,500 of them in one frame; its heatmap takes seconds).
  drawStrip(d) {
    const n = d.n, cols = Math.max(1, Math.ceil(Math.sqrt(n * 4))), rows = Math.ceil(n / cols);
    this.stripCols = cols;
    const bins = stripBins(d.max), bin = d.counts.map(v => bins.findIndex(b => v <= b.hi));
    const sizes = bins.map((_, k) => bin.reduce((a, x) => a + (x === k), 0));
    const xy = sizes.map(m => new Float32Array(2 * m)), fill = bins.map(() => 0);
    bin.forEach((k, i) => { xy[k][fill[k]++] = i % cols + 0.5; xy[k][fill[k]++] = Math.floor(i / cols) + 0.5; });
    const series = bins.map((b, k) => ({ name: b.label, type: "scatter", symbol: "rect", large: true, largeThreshold: 500,
      itemStyle: { color: b.color }, dimensions: ["x", "y"], data: xy[k] }));
    const grid = { left: 8, right: 8, top: 28, bottom: 8 };
    const w = Math.max(1, (this.stripBox.clientWidth || 600) - 30 - grid.left - grid.right), h = 200;
    for (const sr of series) sr.symbolSize = [Math.max(1, w / cols), Math.max(1, h / rows)];
    const option = { tooltip: { show: false }, grid, legend: { top: 0, type: "scroll" },
      xAxis: { type: "value", show: false, min: 0, max: cols }, yAxis: { type: "value", show: false, min: 0, max: rows, inverse: true },
      series };
    if (!this.strip) {
      this.strip = chart(this.stripBox, { title: "Hosts at this time (one cell per host, coloured by its VMs; click one for its detail)",
        option, lazy: false, summary: "Heat strip of the VMs on each host.",
        data: () => ({ columns: [{ key: "h", label: "host" }, { key: "v", label: "VMs", num: true }],
                       rows: this.names.map((h, i) => ({ h, v: this.lastCounts[i] })).sort((a, b) => b.v - a.v).slice(0, 200) }) });
      this.strip.on("click", e => {
        const p = this.strip.chart.convertFromPixel({ gridIndex: 0 }, [e.offsetX, e.offsetY]);
        if (!p) return;
        const i = Math.floor(p[1]) * this.stripCols + Math.floor(p[0]);
        if (p[0] >= 0 && p[1] >= 0 && i < this.names.length) this.showHost(this.names[i]);
      }, true);
      this.strip.details.querySelector("summary").textContent += " (the 200 busiest hosts)";
    } else this.strip.set({ ...option, series }, true);
    this.lastCounts = d.counts;
    this.strip.refreshTable();
  }

  drawHist(d) {
    const counts = new Map();
    for (const v of d.counts) counts.set(v, (counts.get(v) || 0) + 1);
    const xs = [...counts.keys()].sort((a, b) => a - b), rows = xs.map(x => ({ vms: x, hosts: counts.get(x) }));
    this.histRows = rows;
    const option = { xAxis: { type: "category", name: "VMs on the host", nameLocation: "middle", nameGap: 26, data: xs.map(String) },
                     yAxis: { type: "value", name: "hosts" }, series: [{ type: "bar", name: "hosts", data: rows.map(r => r.hosts) }] };
    if (!this.hist) this.hist = chart(this.histBox, { title: "Hosts by number of VMs", option, lazy: false, summary: "Histogram of VMs per host.",
      data: () => ({ columns: [{ key: "vms", label: "VMs on the host", num: true }, { key: "hosts", label: "hosts", num: true }], rows: this.histRows }) });
    else this.hist.set(option);
    this.hist.refreshTable();
  }

  async showHost(name, focus = true) {
    this.hostShown = name;
    let d;
    try { d = await api(`/api/runs/${this.id}/host?name=${encodeURIComponent(name)}&t=${this.t}`); }
    catch (e) { this.hostPanel.replaceChildren(el("p", { class: "error", role: "alert", text: e.message })); return; }
    this.hostPanel.replaceChildren(el("div", { class: "panel", "data-host": name },
      el("h3", { text: `Host ${name} at ${simTime(d.t)}: ${d.vm_count} VM(s)${d.exact ? "" : " placed or moved here so far"}` }),
      el("p", {}, d.vms.length ? d.vms.join(", ") : "none"),
      el("p", { text: `${d.migration_count} migration(s) from or to ${name} in the whole run${d.migration_count > d.migrations.length ? `, the first ${d.migrations.length} shown` : ""}:` }),
      d.migrations.length ? el("div", { class: "tablewrap" }, this.migTable(d.migrations)) : null,
      el("button", { type: "button", text: "Close", onclick: () => { this.hostShown = null; this.hostPanel.replaceChildren(); this.slider.focus(); } })));
    if (focus) this.hostPanel.focus();
  }

  migTable(rows) {
    return table([{ key: "t_s", label: "t", fmt: simTime }, { key: "vm", label: "VM" }, { key: "src", label: "from" }, { key: "dst", label: "to" },
      { key: "outcome", label: "outcome" }, { key: "forced", label: "forced", fmt: x => x ? "yes" : "" }, { key: "san_id", label: "SAN" },
      { key: "time_ms", label: "time ms", num: true, fmt: x => fmt(x, 0) }, { key: "downtime_ms", label: "downtime ms", num: true, fmt: x => fmt(x, 0) },
      { key: "bytes", label: "moved", num: true, fmt: mib },
      { key: "why", label: "why", fmt: (_, r) => this.decisions ? explainButton(this.decisions, r) : "–" }], rows,
      { rowAttrs: r => ({ "data-vm": r.vm }) });
  }

  async loadMigrations(T) {
    const d = await api(`/api/runs/${this.id}/migrations?t0=${T - this.tick}&t1=${T}&limit=50`);
    if (this.t !== T) return;
    this.migBox.replaceChildren(...[el("p", { text: `${d.count} migration(s) started or running between ${simTime(d.t0)} and ${simTime(d.t1)}${d.count > d.rows.length ? `, the first ${d.rows.length} shown` : ""}.` }),
      d.rows.length ? el("div", { class: "tablewrap" }, this.migTable(d.rows)) : null].filter(Boolean));
  }

  // --- on demand -------------------------------------------------------------------------------
  async more() {
    const s = this.s;
    const pipe = Object.entries(s.stages || {});
    this.sec.pipeline.append(pipe.length ? el("dl", { class: "kv" }, pipe.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]))
                                        : el("p", { class: "muted", text: "The manifest describes no stages." }));
    if (s.files.stages) this.stages(await api(`/api/runs/${this.id}/stages`));
    if (s.files.san) this.san(await api(`/api/runs/${this.id}/san`));
    if (this.decisions) this.decisions.list();
    this.sec.distributions.append(el("p", { class: "muted", text: "Reading the allocations and migrations…" }));
    const d = await api(`/api/runs/${this.id}/distributions`);
    const sm = d.summary;
    this.sec.distributions.replaceChildren(el("ul", { class: "facts" },
      [["tasks placed", fmt(sm.tasks_placed, 0)], ["pending", fmt(sm.tasks_pending, 0)], ["allocation p50", `${fmt(sm.alloc_p50_ms, 1)} ms`],
       ["p99", `${fmt(sm.alloc_p99_ms, 1)} ms`], ["migrations", `${fmt(sm.migrations, 0)} of ${fmt(sm.migration_attempts, 0)}`],
       ["refused", pct(sm.refusal_rate)], ["moved", mib(sm.migration_bytes)], ["overloaded (mean)", pct(sm.overloaded_mean, 2)]]
        .map(([k, v]) => el("li", {}, el("b", { text: k + " " }), v))));
    const box = el("div", { class: "row" }, el("div", { class: "grow", id: "alloc-cdf" }), el("div", { class: "grow", id: "mig-cdf" }));
    this.sec.distributions.append(box);
    cdfChart(box.children[0], "Allocation time (placed tasks) and its four parts",
             Object.entries(d.alloc_cdf).filter(([, p]) => p.length).map(([k, p]) => [k.replace("_ms", "").replaceAll("_", " "), p]));
    cdfChart(box.children[1], "Migration time and downtime (succeeded)",
             [["migration time", d.migration_time_cdf], ["downtime", d.downtime_cdf]].filter(([, p]) => p.length));
    mark("distributions-painted");
  }

  stages(rows) {
    const box = this.sec.stages;
    box.append(el("p", { text: "Time spent in each policy stage (stages.csv)." }));
    const keys = ["p50_us", "p95_us", "p99_us"];
    chart(box, { title: "Per-stage time (µs)", summary: "p50, p95 and p99 of each stage's calls.",
      option: { tooltip: { trigger: "axis" }, legend: {}, xAxis: { type: "category", data: rows.map(r => `${r.stage} ${r.policy || ""}`.trim()) },
                yAxis: { type: "log", name: "µs" }, series: keys.map(k => ({ name: k.replace("_us", ""), type: "bar", data: rows.map(r => Math.max(num(r[k]), 0.001)) })) },
      data: () => ({ columns: Object.keys(rows[0] || {}).map(k => ({ key: k, label: k, num: typeof rows[0][k] === "number" })), rows }) });
    box.append(el("div", { class: "tablewrap" }, table(Object.keys(rows[0] || {}).map(k => ({ key: k, label: k, num: typeof rows[0][k] === "number" })), rows)));
  }

  san(rows) {
    this.sec.san.append(el("p", { text: `${rows.length} SAN round(s) of the real cell, with the time of each step after the overload.` }),
      el("div", { class: "tablewrap" }, table(Object.keys(rows[0] || {}).map(k => ({ key: k, label: k, num: typeof rows[0][k] === "number",
        fmt: typeof rows[0][k] === "number" ? x => fmt(x, 3) : undefined })), rows)));
  }
}
