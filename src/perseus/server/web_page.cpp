#include "perseus/server/web_page.hpp"

namespace perseus::server {
namespace {

// Strings come from clients (job metadata): the page only ever sets them as text, never as
// markup, and the embedded JSON escapes '<', '>' and '&' so it cannot close its script tag.
constexpr const char* kPage = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>perseus server</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
  header { display: flex; align-items: baseline; gap: 1em; padding: 12px 20px; background: #1d2330; color: #fff; }
  header h1 { font-size: 18px; margin: 0; }
  #status { font-size: 12px; opacity: .8; }
  main { padding: 12px 20px; display: grid; gap: 14px; }
  .job { background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: 12px 14px; }
  .job h2 { font-size: 15px; margin: 0 0 6px; word-break: break-all; }
  .facts { display: flex; flex-wrap: wrap; gap: 4px 16px; font-size: 12px; color: #4a5365; margin-bottom: 8px; }
  .phase { font-weight: 600; color: #0b5cad; }
  .error { color: #b00020; font-size: 12px; }
  .plots { display: flex; flex-wrap: wrap; gap: 12px; }
  .plots figure { margin: 0; }
  figcaption { font-size: 12px; color: #4a5365; }
  svg text { font: 10px system-ui, sans-serif; fill: #4a5365; }
  table { border-collapse: collapse; font-size: 12px; }
  td, th { padding: 2px 8px; border-bottom: 1px solid #eceef2; text-align: left; }
  .empty { color: #4a5365; }
</style>
</head>
<body>
<header><h1>perseus</h1><span>energy schedules for pipeline-parallel training</span><span id="status"></span></header>
<main id="jobs"></main>
<script id="initial-data" type="application/json">__INITIAL_DATA__</script>
<script>
"use strict";
const SVGNS = "http://www.w3.org/2000/svg";
const KIND_COLOURS = { f: "#3b7dd8", b: "#2e9e5b", r: "#e08a1e", l: "#8a8f99", c: "#a05fc0" };

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function num(x, digits) { return (typeof x === "number" && isFinite(x)) ? x.toFixed(digits) : "-"; }

function frontierPlot(f) {
  const W = 420, H = 260, L = 58, R = 12, T = 12, B = 36;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "frontier" });
  const pts = f.points;
  const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
  let x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (x1 <= x0) { x0 -= 0.5; x1 += 0.5; }
  if (y1 <= y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = t => L + (t - x0) / (x1 - x0) * (W - L - R);
  const sy = e => H - B - (e - y0) / (y1 - y0) * (H - T - B);
  root.appendChild(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fbfcfd", stroke: "#d8dce3" }));
  for (let i = 0; i <= 4; ++i) {
    const t = x0 + (x1 - x0) * i / 4, e = y0 + (y1 - y0) * i / 4;
    root.appendChild(svg("text", { x: sx(t), y: H - B + 14, "text-anchor": "middle" }, num(t, 3)));
    root.appendChild(svg("text", { x: L - 4, y: sy(e) + 3, "text-anchor": "end" }, num(e, 0)));
  }
  root.appendChild(svg("text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "iteration time (s)"));
  root.appendChild(svg("text", { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`,
                                 "text-anchor": "middle" }, "energy (J)"));
  root.appendChild(svg("polyline", { points: pts.map(p => `${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join(" "),
                                     fill: "none", stroke: "#3b7dd8", "stroke-width": 1.5, class: "frontier-line" }));
  for (const p of pts) root.appendChild(svg("circle", { cx: sx(p[0]), cy: sy(p[1]), r: 1.6, fill: "#3b7dd8" }));
  const c = f.current;
  const mark = svg("circle", { cx: sx(c[0]), cy: sy(c[1]), r: 5, fill: "#d8383b", stroke: "#fff", "stroke-width": 1.5,
                               class: "current-point" });
  mark.appendChild(svg("title", {}, `current plan: ${num(c[0], 4)} s, ${num(c[1], 1)} J`));
  root.appendChild(mark);
  return root;
}

function timelinePlot(plan) {
  const W = 620, rowH = 16, L = 54, R = 10, T = 8, B = 26;
  const stages = plan.stages;
  const H = T + B + rowH * stages.length;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "timeline" });
  const span = plan.time_s > 0 ? plan.time_s : 1;
  let fmax = 1;
  for (const s of stages) for (const e of s) fmax = Math.max(fmax, e[4]);
  const sx = t => L + t / span * (W - L - R);
  stages.forEach((entries, s) => {
    const y = T + s * rowH;
    root.appendChild(svg("text", { x: L - 6, y: y + rowH - 5, "text-anchor": "end" }, `stage ${s}`));
    for (const e of entries) {
      const colour = KIND_COLOURS[(e[0] || "?").toLowerCase()] || "#777";
      const r = svg("rect", { x: sx(e[2]).toFixed(2), y: y + 1, width: Math.max(0.6, sx(e[3]) - sx(e[2])).toFixed(2),
                              height: rowH - 3, fill: colour, "fill-opacity": (0.35 + 0.65 * e[4] / fmax).toFixed(3) });
      r.appendChild(svg("title", {}, `${e[0]}${e[1]} ${e[4]} MHz ${num(e[2], 4)}-${num(e[3], 4)} s`));
      root.appendChild(r);
    }
  });
  root.appendChild(svg("text", { x: L, y: H - 6 }, "0 s"));
  root.appendChild(svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, `${num(span, 4)} s`));
  return root;
}

function stragglerTable(job) {
  const table = el("table");
  const head = el("tr");
  for (const h of ["rank", "pipeline", "degree", "takes effect", "in force"]) head.appendChild(el("th", {}, h));
  table.appendChild(head);
  for (const s of job.stragglers) {
    const row = el("tr");
    row.appendChild(el("td", {}, String(s.id)));
    row.appendChild(el("td", {}, String(s.pipeline)));
    row.appendChild(el("td", {}, s.degree === 1 ? "1 (recovered)" : num(s.degree, 2)));
    row.appendChild(el("td", {}, new Date(s.effective_at * 1000).toLocaleTimeString()));
    row.appendChild(el("td", {}, s.in_force ? "yes" : "pending"));
    table.appendChild(row);
  }
  return table;
}

function jobCard(job) {
  const card = el("section", { class: "job" });
  card.appendChild(el("h2", {}, job.job_id));
  const facts = el("div", { class: "facts" });
  facts.appendChild(el("span", { class: "phase" }, job.phase));
  facts.appendChild(el("span", {}, `dp ${job.dp_degree} × pp ${job.pp_degree} × tp ${job.tp_degree}`));
  facts.appendChild(el("span", {}, `ranks ${job.ranks_registered}/${job.world_size}`));
  facts.appendChild(el("span", {}, `rounds ${job.rounds}`));
  if (job.deployment) facts.appendChild(el("span", {}, `plan: ${job.deployment}`));
  if (job.profiling) facts.appendChild(el("span", {}, `profiling ${job.profiling.done}/${job.profiling.total} clocks`));
  if (job.frontier) {
    facts.appendChild(el("span", {}, `T_min ${num(job.frontier.t_min_s, 4)} s`));
    facts.appendChild(el("span", {}, `T* ${num(job.frontier.t_star_s, 4)} s`));
    facts.appendChild(el("span", {}, `T_opt ${num(job.t_opt_s, 4)} s`));
    facts.appendChild(el("span", {}, `${job.frontier.size} plans, computed in ${num(job.frontier.computation_s, 2)} s`));
  }
  card.appendChild(facts);
  if (job.error) card.appendChild(el("div", { class: "error" }, job.error));
  if (job.frontier) {
    const plots = el("div", { class: "plots" });
    const f1 = el("figure");
    f1.appendChild(frontierPlot(job.frontier));
    f1.appendChild(el("figcaption", {}, "time-energy frontier; red: the plan in force"));
    plots.appendChild(f1);
    if (job.plan) {
      const f2 = el("figure");
      f2.appendChild(timelinePlot(job.plan));
      f2.appendChild(el("figcaption", {}, `plan in force: ${num(job.plan.time_s, 4)} s, ${num(job.plan.energy_j, 1)} J ` +
                                       "(darker: higher clock)"));
      plots.appendChild(f2);
    }
    card.appendChild(plots);
    if (job.stragglers && job.stragglers.length) card.appendChild(stragglerTable(job));
    else card.appendChild(el("div", { class: "empty" }, "no stragglers"));
  }
  return card;
}

function render(data) {
  const main = document.getElementById("jobs");
  const cards = data.jobs.map(jobCard);
  if (!cards.length) cards.push(el("p", { class: "empty" }, "No jobs registered."));
  main.replaceChildren(...cards);
  document.getElementById("status").textContent =
    `${data.jobs.length} job(s), updated ${new Date().toLocaleTimeString()}`;
}

render(JSON.parse(document.getElementById("initial-data").textContent));
async function poll() {
  try {
    const response = await fetch("/api/jobs", { cache: "no-store" });
    if (response.ok) render(await response.json());
  } catch (e) {
    document.getElementById("status").textContent = "server unreachable; retrying";
  }
  setTimeout(poll, 2000);
}
setTimeout(poll, 2000);
</script>
</body>
</html>
)html";

}  // namespace

std::string web_page_html(const nlohmann::json& initial) {
  std::string data;
  for (char c : initial.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
    switch (c) {
      case '<': data += "\\u003c"; break;
      case '>': data += "\\u003e"; break;
      case '&': data += "\\u0026"; break;
      default: data += c;
    }
  }
  std::string page = kPage;
  const std::string marker = "__INITIAL_DATA__";
  page.replace(page.find(marker), marker.size(), data);
  return page;
}

}  // namespace perseus::server
