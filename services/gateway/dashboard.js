// The live dashboard's page logic, loaded as a file because the page's Content-Security-Policy
// allows no inline script. Run ids, subjects, reasons and error texts come from the bus and
// reach the page through textContent and setAttribute only, never through HTML parsing.
"use strict";
let selected = null, source = null;
const $ = (id) => document.getElementById(id);
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined) e.textContent = text; if (cls) e.className = cls; return e; };
const secs = (s) => s == null ? "–" : s < 90 ? `${s.toFixed(0)} s` : `${(s / 60).toFixed(1)} min`;
const fileUrl = (run, key) => `/v1/releases/${encodeURIComponent(run)}/files/` +
  key.slice(`runs/${run}/`.length).split("/").map(encodeURIComponent).join("/");

function row(cells, attrs) {
  const tr = el("tr");
  for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
  for (const c of cells) { const td = el("td"); if (c instanceof Node) td.append(c); else td.textContent = c; tr.append(td); }
  return tr;
}

async function loadRuns() {
  try {
    const reply = await fetch("/v1/runs");
    if (reply.status === 401) { $("live").textContent = "sign in to read"; window.skyqaSignIn(() => location.reload()); return; }
    const runs = await reply.json();
    const body = $("runs"); body.replaceChildren();
    for (const r of runs) {
      const tr = row([r.run_id, r.scene_id, el("span", r.status, `status ${r.status}`), secs(r.wall_s)], {"data-run": r.run_id});
      if (r.run_id === selected) tr.classList.add("selected");
      tr.onclick = () => select(r.run_id);
      body.append(tr);
    }
    if (!selected && runs.length) select((location.hash.match(/run=([\w-]+)/) || [])[1] || runs[0].run_id);
    const dead = await (await fetch("/v1/dead-letters?limit=20")).json();
    $("all-dead").replaceChildren(...dead.items.map((d) => row([d.run_id || "–", d.subject, d.reason, d.deliveries])));
  } catch (e) { $("live").textContent = "gateway unreachable"; }
}

function showState(v) {
  $("run-id").textContent = v.run_id;
  const st = $("run-status"); st.textContent = v.status; st.className = `status ${v.status}`;
  $("run-wall").textContent = `wall ${secs(v.wall_s)}`;
  const stages = $("stages"); stages.replaceChildren();
  for (const s of v.stages) {
    const line = el("div", undefined, `stage ${s.status}`); line.dataset.stage = s.stage;
    const bar = el("div", undefined, "bar"), fill = el("div", undefined, "fill");
    fill.style.width = `${(100 * s.fraction).toFixed(1)}%`; bar.append(fill);
    line.append(el("span", s.stage), bar, el("span", `${s.done}/${s.total || "?"}`, "count"),
      el("span", s.items_per_s ? `${s.items_per_s.toFixed(2)}/s` : "–", "rate"),
      el("span", s.status === "running" ? secs(s.eta_s) : "–", "eta"), el("span", s.status, `status ${s.status}`));
    if (s.message) line.append(el("div", s.message, "msg"));
    stages.append(line);
  }
  $("errors").replaceChildren(...v.errors.map((e) => el("div", e)));
  const outs = $("outputs"), previews = $("previews"); outs.replaceChildren(); previews.replaceChildren();
  for (const [name, key] of Object.entries(v.outputs).sort()) {
    const a = el("a", name); a.href = fileUrl(v.run_id, key); a.target = "_blank"; a.rel = "noopener";
    const li = el("li"); li.append(a, " ", el("code", key)); outs.append(li);
    if (/\.(png|jpe?g)$/.test(key)) { const img = el("img"); img.src = a.href; img.alt = name; img.title = name; previews.append(img); }
  }
  $("release-link").href = `/v1/releases/${encodeURIComponent(v.run_id)}`;
  $("dead").replaceChildren(...v.dead_letters.map((d) =>
    row([new Date(d.time * 1000).toLocaleTimeString(), d.subject, d.consumer, d.reason, d.error, d.deliveries])));
}

function select(runId) {
  selected = runId; location.hash = `run=${runId}`;
  for (const tr of document.querySelectorAll("tr[data-run]")) tr.classList.toggle("selected", tr.dataset.run === runId);
  if (source) source.close();
  source = new EventSource(`/v1/runs/${encodeURIComponent(runId)}/events`);
  $("live").textContent = "live";
  source.addEventListener("state", (e) => showState(JSON.parse(e.data)));
  source.addEventListener("end", (e) => { $("live").textContent = `run ${JSON.parse(e.data).status}`; source.close(); loadRuns(); });
  source.onerror = () => { $("live").textContent = "reconnecting…"; };
}

(async () => {
  const info = await (await fetch("/v1/info")).json();
  // review_url is configuration, yet a javascript: URL there would still run on click
  let review = null;
  try { review = info.review_url ? new URL(info.review_url, location.href) : null; } catch { review = null; }
  if (review && ["http:", "https:"].includes(review.protocol)) {
    const a = $("review-link"); a.href = review.href; a.hidden = false;
  }
  await loadRuns();
  setInterval(loadRuns, 3000);
})();
