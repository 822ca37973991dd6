// The live cell: hosts (capacity, requested, used, ASR class, VMs), migrations in flight with their
// progress, SAN negotiations step by step, the broker's cache, Megha's GMs, queues and LMs, and the
// event log. Everything arrives pushed, as server-sent events (/api/live/events): no page polling.
import { el, fmt, mib, clock, table, chart, shown, mark, num } from "./util.js";

const KEEP_POINTS = 300;

// replaceChildren without the absent parts (a null child would be written as the text "null")
function fill(parent, ...children) { parent.replaceChildren(...children.filter(c => c !== null && c !== undefined && c !== false)); }

export class LiveView {
  constructor(root, config) {
    this.root = root;
    this.state = null;
    this.conn = document.getElementById("conn");
    this.openNegotiations = new Set();
    this.series = [];           // [unix_s, used_cpu, req_cpu, cap_cpu] of the whole cell
    root.append(el("h2", { text: `Live cell ${config.cell}` }),
      el("ul", { class: "sectionnav", "aria-label": "Sections" },
        ["Hosts", "Migrations", "SAN", "Broker", "Megha", "Activity"].map(s =>
          el("li", {}, el("a", { href: `#live`, "data-target": `live-${s.toLowerCase()}`, text: s,
                                 onclick: e => { e.preventDefault(); const t = document.getElementById(`live-${s.toLowerCase()}`); if (t) { t.scrollIntoView(); t.focus(); } } })))));
    this.sec = {};
    for (const [key, title] of [["hosts", "Hosts"], ["cpu", "Cell CPU"], ["migrations", "Migrations"], ["san", "SAN negotiations"],
                                ["broker", "Broker cache"], ["megha", "Megha"], ["activity", "Activity"]]) {
      const body = el("div", { class: "body" });
      const s = el("section", { id: `live-${key}`, tabindex: "-1", "aria-labelledby": `live-${key}-h` },
        el("h2", { id: `live-${key}-h`, text: title }), body);
      this.sec[key] = { section: s, body };
      root.append(s);
    }
    this.cpuChart = chart(this.sec.cpu.body, {
      title: "Cell CPU: used, requested and capacity (cores)",
      summary: "Sum over the hosts, sampled as their states arrive.",
      option: { xAxis: { type: "time" }, yAxis: { type: "value", name: "cores" },
                series: ["used", "requested", "capacity"].map(n => ({ name: n, type: "line", showSymbol: false, data: [] })) },
      data: () => ({ columns: [{ key: 0, label: "time", fmt: clock }, { key: 1, label: "used", num: true, fmt: v => fmt(v, 3) },
                               { key: 2, label: "requested", num: true, fmt: v => fmt(v, 3) }, { key: 3, label: "capacity", num: true }],
                     rows: this.series.slice().reverse() }) });
    this.connect();
  }

  stop() { if (this.es) this.es.close(); }

  connect() {
    this.es = new EventSource("/api/live/events");
    this.es.onopen = () => { this.conn.textContent = "Live: connected"; };
    this.es.onerror = () => { this.conn.textContent = "Live: reconnecting…"; };
    const on = (kind, fn) => this.es.addEventListener(kind, e => { const d = JSON.parse(e.data); fn(d); shown(d.ev_unix_s); });
    on("snapshot", d => { this.state = d; this.renderAll(); mark("live-painted"); });
    on("host", d => { if (!this.state) return; const { ev_unix_s, host, ...v } = d; this.state.hosts[host] = v; this.renderHost(host); this.sample(); });
    on("migration", d => { if (!this.state) return; const { ev_unix_s, ...m } = d;
      const i = this.state.migrations.findIndex(x => x.id === m.id);
      if (i >= 0) this.state.migrations[i] = m; else this.state.migrations.unshift(m);
      this.renderMigrations(); });
    on("migrations", d => { if (!this.state) return; const byId = new Map(this.state.migrations.map(m => [m.id, m]));
      for (const m of d.migrations) if (!byId.has(m.id) || byId.get(m.id).status === "in flight") byId.set(m.id, m);
      this.state.migrations = [...byId.values()].sort((a, b) => (b.started_unix_s || 0) - (a.started_unix_s || 0));
      this.renderMigrations(); });
    on("san", d => { if (!this.state) return; const { ev_unix_s, ...v } = d; this.state.san = this.state.san || {}; this.state.san[v.host] = v; this.renderSan(); });
    on("san_step", d => { if (!this.state || !this.state.san) return; this.sanStep(d); });
    on("broker", d => { if (!this.state) return; const { ev_unix_s, ...v } = d; this.state.broker = v; this.renderBroker(); });
    on("megha", d => { if (!this.state) return; const { ev_unix_s, ...v } = d; this.state.megha = v; this.renderMegha(); });
    on("activity", d => { if (!this.state) return; if (d.kind === "migration progress") return;
      const { ev_unix_s, ...v } = d; this.state.activity.push(v); this.state.activity = this.state.activity.slice(-100); this.renderActivity(); });
  }

  renderAll() {
    this.sec.hosts.body.replaceChildren(el("div", { class: "hosts", id: "host-cards" }));
    for (const h of Object.keys(this.state.hosts).sort()) this.renderHost(h);
    this.sample();
    this.renderMigrations(); this.renderSan(); this.renderBroker(); this.renderMegha(); this.renderActivity();
  }

  // --- hosts -----------------------------------------------------------------------------------
  renderHost(name) {
    const v = this.state.hosts[name], grid = document.getElementById("host-cards");
    if (!grid) return;
    const s = v.state;
    const card = el("article", { class: "card", id: `host-${name}`, "data-host": name, "aria-labelledby": `host-${name}-h` },
      el("h3", { id: `host-${name}-h` }, name, s ? el("span", { class: `badge ${s.asr}`, title: "ASR class", text: s.asr }) : null,
         s ? el("span", { class: "muted", text: `${s.address} · ${s.accel}` }) : null),
      v.error ? el("p", { class: "error", text: v.error }) : null,
      s ? this.resources(s) : el("p", { class: "muted waiting", text: "waiting for the host's state…" }),
      s && (s.migrations_in || s.migrations_out) ? el("p", { text: `migrations in flight: ${s.migrations_out} out, ${s.migrations_in} in` }) : null,
      v.vms && v.vms.length ? el("div", { class: "tablewrap" }, table([
        { key: "name", label: "VM" }, { key: "state", label: "state" },
        { key: "mem_mib", label: "mem MiB", num: true }, { key: "req_cpu", label: "req CPU", num: true, fmt: x => fmt(x, 2) },
        { key: "cpu_used", label: "CPU used", num: true, fmt: x => fmt(x, 3) }, { key: "cpu_load", label: "load", num: true, fmt: x => fmt(x, 2) },
        { key: "dirty_mib_s", label: "dirty MiB/s", num: true, fmt: x => x < 0 ? "max" : fmt(x, 1) }],
        v.vms, { caption: `${v.vms.length} VM(s) on ${name}`, rowAttrs: r => ({ "data-vm": r.name }) }))
        : el("p", { class: "muted", text: "no VMs" }));
    const old = document.getElementById(`host-${name}`);
    if (old) old.replaceWith(card); else grid.append(card);
  }

  resources(s) {
    const row = (label, used, req, cap, unit, d) => {
      const w = x => `${Math.max(0, Math.min(100, cap > 0 ? x / cap * 100 : 0))}%`;
      return [el("span", { text: label }),
        el("div", { class: "bar", role: "img", "aria-label": `${label}: used ${fmt(used, d)}, requested ${fmt(req, d)} of ${fmt(cap, d)} ${unit}` },
          el("span", { class: "req", style: `width:${w(req)}` }), el("span", { class: "used", style: `width:${w(used)}` })),
        el("span", { text: `${fmt(used, d)} used · ${fmt(req, d)} req · ${fmt(cap, d)} ${unit}` })];
    };
    return el("div", { class: "res" }, row("CPU", s.used_cpu, s.req_cpu, s.cap_cpu, "cores", 2),
                                         row("Mem", s.used_mem, s.req_mem, s.cap_mem, "MiB", 0));
  }

  sample() {
    const hs = Object.values(this.state.hosts).filter(h => h.state);
    if (!hs.length) return;
    const sum = k => hs.reduce((a, h) => a + num(h.state[k]), 0);
    this.series.push([Date.now(), sum("used_cpu"), sum("req_cpu"), sum("cap_cpu")]);
    if (this.series.length > KEEP_POINTS) this.series.shift();
    this.cpuChart.set({ series: [1, 2, 3].map(i => ({ data: this.series.map(p => [p[0], p[i]]) })) });
  }

  // --- migrations ------------------------------------------------------------------------------
  renderMigrations() {
    const ms = this.state.migrations;
    for (const m of ms) {
      const seen = window.cellbed.seen[m.id] = window.cellbed.seen[m.id] || [];
      if (seen[seen.length - 1] !== m.status) seen.push(m.status);
    }
    const flying = ms.filter(m => m.status === "in flight");
    const cols = [
      { key: "vm", label: "VM" }, { key: "src", label: "from" }, { key: "dst", label: "to" },
      { key: "status", label: "status", fmt: (x, m) => el("span", { class: x === "succeeded" ? "ok" : x === "in flight" ? "warn" : "bad", text: x }) },
      { key: "phase", label: "phase" }, { key: "iteration", label: "iteration", num: true },
      { key: "sent", label: "sent", num: true, fmt: mib }, { key: "remaining", label: "remaining", num: true, fmt: mib },
      { key: "progress", label: "progress", fmt: (x, m) => {
          const total = num(m.sent) + num(m.remaining);
          return m.status === "in flight" && total > 0
            ? el("progress", { max: String(total), value: String(num(m.sent)), "aria-label": `${m.vm}: ${fmt(num(m.sent) / total * 100, 0)} % sent` })
            : "–"; } },
      { key: "bps", label: "rate", num: true, fmt: x => fmt(num(x) / 1048576, 1) + " MiB/s" },
      { key: "elapsed_ms", label: "elapsed ms", num: true, fmt: x => fmt(x, 0) },
      { key: "downtime_ms", label: "downtime ms", num: true, fmt: x => fmt(x, 0) },
      { key: "started_unix_s", label: "started", fmt: clock }];
    fill(this.sec.migrations.body,
      el("p", { text: `${flying.length} in flight, ${ms.length - flying.length} finished recently.` }),
      ms.length ? el("div", { class: "tablewrap" }, table(cols, ms, { caption: "Migrations, newest first",
        rowAttrs: m => ({ "data-migration": m.id, "data-vm": m.vm, "data-status": m.status }) }))
        : el("p", { class: "muted", text: "No migration yet." }));
  }

  // --- SAN -------------------------------------------------------------------------------------
  sanStep(d) {
    (window.cellbed.sanSteps = window.cellbed.sanSteps || []).push({ san_id: d.san_id, kind: d.kind });
    const h = this.state.san[d.host] = this.state.san[d.host] || { host: d.host, negotiations: [], counters: {} };
    let n = h.negotiations.find(x => x.san_id === d.san_id);
    if (!n) { n = { san_id: d.san_id, vm: d.vm, src_host: d.host, state: "active", steps: [], target: "" }; h.negotiations.unshift(n); }
    if (!n.steps.some(s => s.kind === d.kind && s.host === d.peer && num(s.unix_s) === num(d.unix_s)))
      n.steps.push({ unix_s: d.unix_s, kind: d.kind, host: d.peer, detail: d.detail });
    this.openNegotiations.add(d.san_id);
    this.renderSan();
  }

  renderSan() {
    const body = this.sec.san.body, san = this.state.san;
    if (!san) { body.replaceChildren(el("p", { class: "muted", text: "This cell runs no SAN (cellctl cell up --san)." })); return; }
    for (const d of body.querySelectorAll("details[data-san]")) if (d.open) this.openNegotiations.add(d.dataset.san); else this.openNegotiations.delete(d.dataset.san);
    const parts = [];
    for (const host of Object.keys(san).sort()) {
      const h = san[host];
      const counters = Object.entries(h.counters || {}).map(([k, v]) => `${k}=${v}`).join(", ");
      parts.push(el("h3", { text: `${host}` }), counters ? el("p", { class: "muted", text: counters }) : null,
                 h.error ? el("p", { class: "error", text: h.error }) : null);
      if (!h.negotiations.length) parts.push(el("p", { class: "muted", text: "no negotiation yet" }));
      for (const n of h.negotiations) {
        const t0 = num(n.started_unix_s) || num((n.steps[0] || {}).unix_s);
        parts.push(el("details", { "data-san": n.san_id, "data-vm": n.vm, "data-state": n.state, open: this.openNegotiations.has(n.san_id) },
          el("summary", { text: `${n.san_id}: ${n.vm} from ${n.src_host || host}, ${n.state}${n.target ? " → " + n.target : ""}${n.forced ? " (forced)" : ""} · ${n.steps.length} step(s)` }),
          el("ol", { class: "steps", "aria-label": `steps of ${n.san_id}` }, n.steps.map(s =>
            el("li", { "data-kind": s.kind }, el("b", { text: s.kind }), ` +${fmt((num(s.unix_s) - t0) * 1000, 0)} ms`,
               s.host ? ` ${s.host}` : "", s.forced ? " (forced)" : "", s.detail ? el("span", { class: "muted", text: ` — ${s.detail}` }) : null)))));
      }
    }
    body.replaceChildren(...parts.filter(Boolean));
  }

  // --- broker and Megha ------------------------------------------------------------------------
  renderBroker() {
    const b = this.state.broker, body = this.sec.broker.body;
    if (!b) { body.replaceChildren(el("p", { class: "muted", text: "This cell runs no broker." })); return; }
    fill(body, el("p", { text: `Broker ${b.broker}: ${b.entries.length} node(s), entries expire after ${fmt(b.expiry_s)} s.` }),
      b.error ? el("p", { class: "error", text: b.error }) : null,
      table([{ key: "host", label: "node" }, { key: "age_s", label: "age s", num: true, fmt: x => fmt(x, 1) }, { key: "asr", label: "class" },
             { key: "cap_cpu", label: "CPU cap", num: true }, { key: "used_cpu", label: "CPU used", num: true, fmt: x => fmt(x, 3) },
             { key: "req_cpu", label: "CPU req", num: true }, { key: "cap_mem", label: "mem cap", num: true },
             { key: "used_mem", label: "mem used", num: true, fmt: x => fmt(x, 0) }, { key: "tasks", label: "tasks", num: true }],
            b.entries, { caption: "What the broker believes" }),
      el("p", { class: "muted", text: Object.entries(b.counters).map(([k, v]) => `${k}=${v}`).join(", ") }));
  }

  renderMegha() {
    const m = this.state.megha, body = this.sec.megha.body;
    if (!m) { body.replaceChildren(el("p", { class: "muted", text: "This cell runs no Megha (cellctl cell up --megha)." })); return; }
    const res = r => r ? `${fmt(r.cpu_cores, 2)} cores, ${fmt(r.mem_mib, 0)} MiB` : "–";
    const views = m.gms.flatMap(v => v.lms.flatMap(lm => lm.partitions.map(p => ({ gm: v.gm, lm: lm.lm, instance: lm.instance, epoch: lm.epoch,
      staleness: num(lm.staleness_s) >= 0 ? fmt(lm.staleness_s, 2) + " s" : "never", partition: p.gm + (p.internal ? " (own)" : ""),
      nodes: p.nodes, logical: p.logical_nodes, free: res(p.free), capacity: res(p.capacity) }))));
    const parts = m.lms.flatMap(r => r.partitions.flatMap(p => p.slices.map(s => ({ lm: r.lm, instance: r.instance, role: r.role,
      partition: p.gm, host: s.host, node: s.logical ? `N' (${s.task})` : "N", capacity: res(s.capacity), used: res(s.used), tasks: s.tasks }))));
    fill(body,
      m.errors.length ? el("p", { class: "error", text: m.errors.join("; ") }) : null,
      el("h3", { text: "GM views (each GM's view of every LM, with its staleness)" }),
      el("div", { class: "tablewrap" }, table(["gm", "lm", "instance", "epoch", "staleness", "partition", "nodes", "logical", "free", "capacity"]
        .map(k => ({ key: k, label: k })), views)),
      el("h3", { text: "Queues" }),
      table([["user", "user"], ["share", "share"], ["gm", "GM"], ["length", "queued"], ["running", "running"], ["usage_share", "usage"],
             ["placed", "placed"], ["preempted", "preempted"], ["repartitions", "repartitions"]].map(([k, l]) => ({ key: k, label: l,
             fmt: k.endsWith("share") ? x => fmt(num(x) * 100, 1) + " %" : undefined })), m.queues),
      el("h3", { text: "LM partitions (nodes N and logical nodes N')" }),
      el("div", { class: "tablewrap" }, table(["lm", "instance", "role", "partition", "host", "node", "capacity", "used", "tasks"]
        .map(k => ({ key: k, label: k })), parts)));
  }

  renderActivity() {
    const items = this.state.activity.filter(a => a.kind !== "migration progress").slice(-30).reverse();
    this.sec.activity.body.replaceChildren(items.length
      ? el("ol", { reversed: true, class: "activity" }, items.map(a => el("li", {}, `${clock(a.unix_s)} ${a.host}: ${a.kind}`,
          a.vm ? ` ${a.vm}` : "", a.detail ? el("span", { class: "muted", text: ` — ${a.detail}` }) : null)))
      : el("p", { class: "muted", text: "No event since the page opened." }));
  }
}
