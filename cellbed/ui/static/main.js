// The page: a view per route (#live, #run/N, #compare/N, #overlay), chosen from the navigation.
import { api, el, disposeCharts } from "./util.js";
import { LiveView } from "./live.js";
import { RunView } from "./run.js";
import { CompareView } from "./compare.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let config = null, current = null;

function routes() {
  const out = [];
  if (config.live) out.push({ hash: "#live", label: `Live cell ${config.cell}` });
  for (const r of config.runs) out.push({ hash: `#run/${r.id}`, label: `Run ${r.label}` });
  for (const c of config.comparisons) out.push({ hash: `#compare/${c.id}`, label: `Compare ${c.name}` });
  if (config.runs.length > 1 && config.comparisons.length === 0) out.push({ hash: "#overlay", label: "Runs overlaid" });
  return out;
}

function show() {
  const rs = routes();
  const hash = rs.some(r => r.hash === location.hash) ? location.hash : (rs[0] || {}).hash;
  for (const a of nav.querySelectorAll("a")) a.toggleAttribute("aria-current", false);
  const link = nav.querySelector(`a[href="${hash}"]`);
  if (link) link.setAttribute("aria-current", "page");
  if (current && current.stop) current.stop();
  disposeCharts();
  main.replaceChildren();
  const [kind, id] = (hash || "").slice(1).split("/");
  if (kind === "live") current = new LiveView(main, config);
  else if (kind === "run") current = new RunView(main, config, Number(id));
  else if (kind === "compare") current = new CompareView(main, config, config.comparisons[Number(id)].runs, config.comparisons[Number(id)]);
  else if (kind === "overlay") current = new CompareView(main, config, config.runs.map(r => r.id), null);
  else main.append(el("p", { text: "Nothing to show." }));
  document.title = `Cellbed — ${link ? link.textContent : ""}`;
}

async function start() {
  try {
    config = await api("/api/config");
  } catch (e) {
    main.replaceChildren(el("p", { class: "error", text: `Cannot read the configuration: ${e.message}` }));
    return;
  }
  for (const r of routes()) nav.append(el("li", {}, el("a", { href: r.hash, text: r.label })));
  if (config.assets_missing.length)
    main.before(el("p", { class: "error", role: "alert", text: `The chart library is missing (${config.assets_missing.join(", ")}): run ./cellbed.sh setup. Tables still work.` }));
  window.addEventListener("hashchange", () => { show(); main.focus(); });
  show();
}
start();
