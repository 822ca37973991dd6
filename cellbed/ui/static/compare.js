// Runs overlaid: a `cellctl compare` folder's real run and model twin (with compare.json's metrics),
// or every results folder given to `cellctl ui`, on the same figures.
import { el, fmt, api, table, mark } from "./util.js";
import { figures, cdfChart } from "./run.js";

export class CompareView {
  constructor(root, config, ids, comparison) {
    this.root = root;
    this.start(ids, comparison).catch(e => root.append(el("p", { class: "error", role: "alert", text: e.message })));
  }

  async start(ids, c) {
    const runs = await Promise.all(ids.map(i => api(`/api/runs/${i}/summary`)));
    this.root.append(el("h2", { text: c ? `Compare ${c.name}: the real cell and its model twin` : "Runs overlaid" }),
      el("p", {}, "Runs: ", runs.map((r, i) => [i ? ", " : "", el("a", { href: `#run/${r.id}`, text: r.label })])));
    if (c && c.metrics.length) {
      this.root.append(el("h3", { text: `Metrics (tolerance ${fmt((c.tolerance || 0) * 100, 0)} %)` }),
        table([{ key: "metric", label: "metric" }, { key: "unit", label: "unit" },
               { key: "real", label: "real", num: true, fmt: x => fmt(x, 3) }, { key: "model", label: "model", num: true, fmt: x => fmt(x, 3) },
               { key: "diff", label: "diff", num: true, fmt: x => fmt(x, 3) }, { key: "rel", label: "relative", num: true, fmt: x => fmt(x, 3) },
               { key: "over_tolerance", label: "over tolerance", fmt: x => x ? "yes" : "no" }], c.metrics));
    }
    const figs = el("section", { "aria-label": "Figures" });
    this.root.append(figs);
    figures(figs, runs, null);
    mark("compare-painted");
    const dists = await Promise.all(ids.map(i => api(`/api/runs/${i}/distributions`)));
    cdfChart(figs, "Allocation time (placed tasks)", dists.map((d, i) => [runs[i].label, d.alloc_cdf.total_ms]).filter(([, p]) => p.length));
    cdfChart(figs, "Migration time (succeeded)", dists.map((d, i) => [runs[i].label, d.migration_time_cdf]).filter(([, p]) => p.length));
  }
}
