// The decisions of a run (decisions.jsonl: one JSON object per sampled decision, with an "id"; the
// explanations of cellbed/runtime/explain.py). A migration is linked to the decision whose id (or
// san_id) equals the migration's SAN id. A decision is rendered from its own structure: its numbers
// as a list, each list of objects (the candidates and their scores, each target's answer) as a table.
import { el, api, table, fmt } from "./util.js";

const LINK_FIELDS = ["id", "san_id", "migration"];

export class DecisionPanel {
  constructor(parent, runId) {
    this.parent = parent; this.runId = runId; this.keys = new Map();
    this.listBox = el("div"); this.detail = el("div", { id: "decision-detail", tabindex: "-1", "aria-live": "polite" });
    parent.append(this.detail, this.listBox);
  }

  async list() {
    const d = await api(`/api/runs/${this.runId}/decisions`);
    for (const x of d.decisions) for (const f of LINK_FIELDS) if (x[f]) this.keys.set(String(x[f]), x.id);
    this.listBox.replaceChildren(el("p", { text: `${d.count} sampled decision(s)${d.count > d.decisions.length ? `, the first ${d.decisions.length} listed` : ""}.` }),
      el("div", { class: "tablewrap" }, table([{ key: "id", label: "decision" }, { key: "kind", label: "kind" }, { key: "vm", label: "VM" },
        { key: "open", label: "", fmt: (_, r) => el("button", { type: "button", text: "Explain", "data-decision": r.id, onclick: () => this.open(r.id) }) }],
        d.decisions)));
  }

  idFor(row) { return this.keys.get(String(row.san_id)) || this.keys.get(String(row.id || "")); }

  async open(id) {
    const d = await api(`/api/runs/${this.runId}/decisions?id=${encodeURIComponent(id)}`);
    this.detail.replaceChildren(el("div", { class: "panel", "data-decision": id }, el("h3", { text: `Why: decision ${id}` }), render(d),
      el("button", { type: "button", text: "Close", onclick: () => this.detail.replaceChildren() })));
    this.detail.scrollIntoView(); this.detail.focus();
  }
}

export function explainButton(panel, row) {
  const id = panel.idFor(row);
  return id ? el("button", { type: "button", text: "Why?", "data-decision": id, "aria-label": `Why was ${row.vm} moved? Decision ${id}`,
                             onclick: () => panel.open(id) }) : "–";
}

function render(v) {
  if (Array.isArray(v)) {
    if (v.length && v.every(x => x && typeof x === "object" && !Array.isArray(x))) {
      const keys = [...new Set(v.flatMap(Object.keys))];
      return el("div", { class: "tablewrap" }, table(keys.map(k => ({ key: k, label: k, num: typeof v[0][k] === "number",
        fmt: x => typeof x === "number" ? fmt(x, 4) : x && typeof x === "object" ? JSON.stringify(x) : x })), v));
    }
    return el("span", { text: v.map(x => typeof x === "object" ? JSON.stringify(x) : String(x)).join(", ") });
  }
  if (v && typeof v === "object")
    return el("dl", { class: "kv" }, Object.entries(v).flatMap(([k, x]) => [el("dt", { text: k }), el("dd", {}, render(x))]));
  return el("span", { text: typeof v === "number" ? fmt(v, 4) : String(v) });
}
