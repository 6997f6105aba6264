// The workbench's page logic. The page's Content-Security-Policy allows no inline script, so it
// is a file. Everything shown comes from a release (prompts, labels, model output): it reaches
// the page through textContent and setAttribute only, never through HTML parsing.
"use strict";
const $ = (id) => document.getElementById(id);
const el = (tag, text, cls) => { const e = document.createElement(tag); if (text !== undefined && text !== null) e.textContent = String(text); if (cls) e.className = cls; return e; };
const enc = encodeURIComponent;
const fmt = (v, d = 3) => v === null || v === undefined ? "–" : typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(d)) : String(v);
const ci = (v) => Array.isArray(v) ? `[${fmt(v[0])}, ${fmt(v[1])}]` : "";
const state = { run: null, view: "rows", rowOffset: 0, replyOffset: 0, limit: 50, evalLimit: 20, evalInfo: null };

function fileUrl(path) { return `/v1/releases/${enc(state.run)}/files/` + path.split("/").map(enc).join("/"); }
function api(path) { return `/v1/workbench/runs/${enc(state.run)}${path}`; }
async function getJson(url) {
  const r = await fetch(url);
  if (r.status === 401) { window.skyqaSignIn(() => location.reload()); throw new Error("sign in to read this gateway"); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(typeof body.detail === "string" ? body.detail : `${r.status} ${r.statusText}`);
  return body;
}
function say(text, cls) { const s = $("status"); s.textContent = text || ""; s.className = cls || ""; }
function row(cells, attrs) {
  const tr = el("tr");
  for (const [k, v] of Object.entries(attrs || {})) tr.setAttribute(k, v);
  for (const c of cells) { const td = el("td"); if (c instanceof Node) td.append(c); else td.textContent = fmt(c); tr.append(td); }
  return tr;
}
function head(table, names) { const tr = el("tr"); for (const n of names) tr.append(el("th", n)); const th = el("thead"); th.append(tr); table.replaceChildren(th); const tb = el("tbody"); table.append(tb); return tb; }
function options(select, values, blank) {
  const keep = select.value;
  select.replaceChildren(...(blank ? [el("option", blank)] : []), ...values.map((v) => { const o = el("option", v); o.value = v; return o; }));
  if (blank) select.firstChild.value = "";
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}
function link(text, hash) { const a = el("a", text); a.href = hash; return a; }
function hashFor(view, extra) { const p = new URLSearchParams({ run: state.run, view, ...(extra || {}) }); return "#" + p.toString(); }

// -- routing ----------------------------------------------------------------------------------
function route() {
  const p = new URLSearchParams(location.hash.slice(1));
  if (p.get("run") && p.get("run") !== state.run) { state.run = p.get("run"); $("run").value = state.run; state.evalInfo = null; }
  state.view = p.get("view") || "rows";
  for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${state.view}`;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.view === state.view);
  if (!state.run) return;
  say("");
  const show = { rows: showRows, missions: showMissions, eval: showEval, funnel: showFunnel, audit: showAudit }[state.view];
  if (show) show(p).catch((e) => say(e.message, "err"));
}
function go(view, extra) { location.hash = hashFor(view, extra); }

// -- row browser ------------------------------------------------------------------------------
async function showRows(p) {
  const form = $("row-filters");
  for (const s of form.querySelectorAll("select")) s.dataset.want = p.get(s.name) || "";
  await loadRows();
  if (p.get("row")) await showRow(p.get("row")); else $("row-detail").hidden = true;
}
async function loadRows() {
  const form = $("row-filters"), q = new URLSearchParams();
  for (const s of form.querySelectorAll("select")) { const v = s.dataset.want ?? s.value; if (v) q.set(s.name, v); }
  if (form.q.value) q.set("q", form.q.value);
  q.set("offset", state.rowOffset); q.set("limit", state.limit);
  const page = await getJson(api(`/rows?${q}`));
  for (const s of form.querySelectorAll("select")) {
    options(s, Object.keys(page.facets[s.name] || {}), `any ${s.name}`);
    if (s.dataset.want !== undefined) { s.value = s.dataset.want; delete s.dataset.want; }
  }
  const end = Math.min(page.total, page.offset + page.rows.length);
  $("rows-range").textContent = page.total ? `rows ${page.offset + 1}–${end} of ${page.total}` : "no rows match";
  $("rows").replaceChildren(...page.rows.map((r) => {
    const gold = r.kind === "count" ? r.gold.join(",") : r.options.filter(([id]) => r.gold.includes(id)).map(([id, l]) => `${id}. ${l}`).join("; ");
    const id = el("span"); id.append(el("code", r.sample_id), el("br"), el("small", `${r.family} · unit ${r.unit}`, "muted"));
    const tr = row([id, `${r.task} · ${r.difficulty}`, r.status === "dropped" ? `dropped: ${r.reason}` : r.status, r.blind, gold], { "data-sample": r.sample_id, "data-status": r.status });
    tr.onclick = () => go("rows", { ...currentFilters(), row: r.sample_id });
    return tr;
  }));
  state.rowTotal = page.total;
}
function currentFilters() { const out = {}; for (const s of $("row-filters").querySelectorAll("select")) if (s.value) out[s.name] = s.value; return out; }

function mediaBlock(m) {
  const fig = el("figure", undefined, "medium");
  fig.dataset.path = m.path;
  fig.append(el("figcaption", `${m.label} — ${m.path}`));
  if (m.video) {
    const v = el("video"); v.controls = true; v.muted = true; v.preload = "metadata"; v.src = fileUrl(m.path); fig.append(v);
  } else {
    // the frame scrolls when zoomed; the canvas is always the image's size, so the boxes drawn
    // on it in percent stay on the image at any zoom
    const frame = el("div", undefined, "frame"), canvas = el("div", undefined, "canvas");
    const img = el("img"); img.src = fileUrl(m.path); img.alt = m.label; img.title = "click: full resolution";
    canvas.append(img); frame.append(canvas);
    for (const k of m.marks) {
      const [x1, y1, x2, y2] = k.box, box = el("div", undefined, `mark ${k.role === "answer" ? "answer" : k.role === "reference" ? "reference" : "step"}`);
      box.style.left = `${100 * x1}%`; box.style.top = `${100 * y1}%`; box.style.width = `${100 * (x2 - x1)}%`; box.style.height = `${100 * (y2 - y1)}%`;
      box.dataset.role = k.role; box.dataset.box = k.box.join(",");
      box.append(el("span", k.role)); canvas.append(box);
    }
    frame.onclick = () => frame.classList.toggle("zoom");
    fig.append(frame);
  }
  if (m.origin) {
    const d = el("details"); d.append(el("summary", `render request (${m.origin.source})`), el("pre", JSON.stringify(m.origin.request, null, 1)));
    fig.append(d);
  } else fig.append(el("p", "no render request names this file", "muted"));
  return fig;
}
async function showRow(sampleId) {
  const d = await getJson(api(`/rows/${enc(sampleId)}`));
  const e = d.entry;
  $("row-detail").hidden = false;
  $("row-title").textContent = e.sample_id;
  $("row-meta").textContent = `${e.family} · ${e.task} · ${e.difficulty} · unit ${e.unit} · ${e.status}${e.reason ? ` (${e.reason})` : ""} · blind solvers: ${e.blind}${e.blind_right.length ? ` (${e.blind_right.join(", ")})` : ""}`;
  $("row-system").textContent = d.system_prompt; $("row-system").hidden = !d.system_prompt;
  $("row-user").textContent = d.user_prompt;
  $("row-options").replaceChildren(...d.options.map((o) => { const li = el("li", `${o.id}. ${o.label}`, o.gold ? "option gold" : "option"); li.dataset.option = o.id; return li; }));
  $("row-gold").textContent = d.kind === "count" ? `gold count: ${d.gold.join(", ")}` : `gold: ${d.gold.join(", ")}`;
  $("row-media").replaceChildren(...d.media.map(mediaBlock));
  $("row-media").classList.toggle("nomarks", !$("show-marks").checked);
  $("row-steps").replaceChildren(...d.steps.map((s) => { const li = el("li"); li.append(el("b", s.operation), " ", el("span", s.question), " → ", el("code", s.answer)); return li; }));
  if (!d.steps.length) $("row-steps").append(el("li", "this row has no reasoning steps", "muted"));
  $("row-related").replaceChildren(...d.related.map((r) => { const li = el("li"); li.append(link(r.sample_id, hashFor("rows", { row: r.sample_id })), ` ${r.task} (${r.status})`); return li; }));
  $("row-raw").textContent = JSON.stringify(d.row, null, 1);
  for (const tr of document.querySelectorAll("#rows tr")) tr.classList.toggle("selected", tr.dataset.sample === sampleId);
}

// -- mission player ---------------------------------------------------------------------------
let mission = null;
async function showMissions(p) {
  const list = await getJson(api("/missions"));
  $("missions").replaceChildren(...list.map((m) => {
    const tr = row([m.traj_id, m.kind, m.set_name, m.landmark, fmt(m.duration_sec, 1)], { "data-mission": m.traj_id });
    tr.onclick = () => go("missions", { mission: m.traj_id });
    return tr;
  }));
  const want = p.get("mission") || (list[0] && list[0].traj_id);
  if (want) await showMission(want);
}
function span(cls, [start, end], duration, label) {
  const s = el("div", undefined, `span ${cls}`);
  s.style.left = `${(100 * start) / duration}%`; s.style.width = `${Math.max(0.3, (100 * (end - start)) / duration)}%`;
  s.dataset.start = start; s.dataset.end = end; s.title = `${label}: ${start.toFixed(2)}–${end.toFixed(2)} s`;
  s.append(el("span", label));
  s.onclick = () => { $("mission-video").currentTime = start + 1e-3; };
  return s;
}
async function showMission(trajId) {
  const m = await getJson(api(`/missions/${enc(trajId)}`));
  mission = m;
  for (const tr of document.querySelectorAll("#missions tr")) tr.classList.toggle("selected", tr.dataset.mission === trajId);
  $("mission-detail").hidden = false;
  $("mission-title").textContent = m.traj_id;
  $("mission-description").textContent = m.description;
  const video = $("mission-video");
  if (video.dataset.src !== m.video) { video.src = fileUrl(m.video); video.dataset.src = m.video; }
  $("mission-map").src = fileUrl(m.path.preview);
  const svg = $("mission-path"), ns = "http://www.w3.org/2000/svg";
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", m.path.points.map(([x, y]) => `${x},${y}`).join(" "));
  line.setAttribute("class", "flown");
  const dot = document.createElementNS(ns, "circle"); dot.setAttribute("r", "0.012"); dot.setAttribute("class", "here"); dot.id = "mission-here";
  svg.replaceChildren(line, dot);
  const duration = m.duration_sec || 1, tl = $("timeline");
  const track = (name, spans) => { const t = el("div", undefined, "track"); t.append(el("div", name, "name")); const lane = el("div", undefined, "lane"); lane.append(...spans); t.append(lane); return t; };
  const tracks = [track("behaviors", m.behaviors.map((b) => span("behavior", b.span, duration, b.label)))];
  for (const v of m.visibility) tracks.push(track(`visible: ${v.target}`, v.spans.map((s) => span("visibility", s, duration, v.target))));
  const head = el("div", undefined, "playhead"); head.id = "playhead";
  tl.replaceChildren(...tracks, head);
  const kv = $("constraints"), c = m.constraints;
  const rows = c ? [
    ["accepted", c.accepted], ["collision free", c.checks?.collision?.collision_free], ["min obstacle distance (m)", c.checks?.collision?.min_distance],
    ["kinematics within limits", c.checks?.kinematics?.within_limits], ["limits exceeded", (c.checks?.kinematics?.exceeded || []).join(", ") || "none"],
    ["max speed (m/s)", c.checks?.kinematics?.max_speed_mps], ["repaired segments", c.checks?.repair?.repaired_segments], ["limits", JSON.stringify(c.limits)],
  ] : [["constraint report", "none for this mission"]];
  kv.replaceChildren(...rows.map(([k, v]) => row([k, v === undefined ? "–" : typeof v === "boolean" ? (v ? "yes" : "no") : v])));
  $("constraints-raw").textContent = c ? JSON.stringify(c, null, 1) : "";
  tick();
}
function tick() {
  if (!mission) return;
  const video = $("mission-video"), t = video.currentTime || 0, fps = mission.fps || 10;
  const frame = Math.min(mission.frame_count - 1, Math.floor(t * fps + 1e-6));
  $("mission-time").textContent = `${t.toFixed(2)} s · frame ${frame}`;
  $("playhead").style.left = `calc(150px + (100% - 150px) * ${Math.min(1, t / (mission.duration_sec || 1))})`;
  const pts = mission.path.points, p = pts[Math.min(pts.length - 1, Math.floor(frame / mission.path.frame_step))];
  const dot = $("mission-here"); if (dot && p) { dot.setAttribute("cx", p[0]); dot.setAttribute("cy", p[1]); }
  // the first target's box (a mission flies around one landmark; its others are context)
  const [target, first] = Object.entries(mission.boxes)[0] || ["", {}], boxEl = $("mission-box"), b = first[String(frame)];
  boxEl.title = target;
  boxEl.hidden = !(b && $("show-boxes").checked);
  if (b) { boxEl.style.left = `${100 * b[0]}%`; boxEl.style.top = `${100 * b[1]}%`; boxEl.style.width = `${100 * (b[2] - b[0])}%`; boxEl.style.height = `${100 * (b[3] - b[1])}%`; boxEl.dataset.frame = frame; }
}

// -- evaluation explorer ----------------------------------------------------------------------
async function showEval() {
  let info;
  try { info = await getJson(api("/eval")); } catch (e) { $("leaderboard").replaceChildren(el("caption", e.message)); throw e; }
  state.evalInfo = info;
  const board = info.leaderboard;
  $("ranked-by").textContent = (board.ranked_by ? `ranked by ${board.ranked_by}` : "") + (info.skipped_lines ? ` · ${info.skipped_lines} lines of eval/items.jsonl are not scored replies and were skipped` : "");
  const cols = [["image", "joint_correct"], ["image", "option_correct"], ["image", "bbox_acc@50iou"], ["video_behavior", "set_exact"], ["video_visibility", "count_exact"], ["circular", "circular"]];
  const lb = head($("leaderboard"), ["model", "items", ...cols.map(([g, k]) => `${g} ${k} [95% CI]`), "visual gap over text prior"]);
  for (const m of board.models) {
    const cells = cols.map(([g, k]) => { const s = (m[g] || {}); return s[k] === undefined ? "–" : `${fmt(s[k])} ${ci(s[`${k}_ci95`])}`; });
    const gap = m.visual_gap_over_text_prior; const gapText = gap && typeof gap === "object" ? Object.entries(gap).filter(([, v]) => typeof v === "number").map(([k, v]) => `${k} ${fmt(v)}`).join("; ") : fmt(gap);
    lb.append(row([m.model, m.items, ...cells, gapText || "–"], { "data-model": m.model }));
  }
  const pb = head($("paired"), ["A", "B", "rows", "accuracy A", "accuracy B", "difference [95% CI]", "only A right", "only B right", "McNemar p"]);
  for (const p of board.paired || []) pb.append(row([p.a, p.b, p.rows, p.accuracy_a, p.accuracy_b, `${fmt(p.difference)} ${ci(p.difference_ci95)}`, p.only_a_right, p.only_b_right, p.mcnemar_p]));
  options($("by-task-condition"), info.conditions); options($("by-condition-task"), info.tasks);
  for (const s of [$("by-task-condition"), $("compare-form").condition, $("confusion-form").condition]) preferFull(s, info.conditions);
  pivots();
  for (const f of ["reply-filters", "compare-form", "confusion-form"]) {
    const form = $(f);
    if (form.model) options(form.model, info.models, f === "reply-filters" ? "any model" : undefined);
    if (form.condition) options(form.condition, info.conditions, f === "reply-filters" ? "any condition" : undefined);
    if (form.task) options(form.task, info.tasks, f === "reply-filters" ? "any task" : undefined);
  }
  for (const s of [$("compare-form").condition, $("confusion-form").condition]) preferFull(s, info.conditions);
  const cf = $("compare-form"); options(cf.a, info.models); options(cf.b, info.models);
  if (cf.a.value === cf.b.value && info.models.length > 1) cf.b.value = info.models.find((m) => m !== cf.a.value);
  await Promise.all([loadReplies(), loadCompare(), loadConfusion()]);
}
// the headline condition, unless the reader picked another
function preferFull(select, conditions) { if (!select.dataset.touched && conditions.includes("full")) select.value = "full"; select.onfocus = () => { select.dataset.touched = "1"; }; }
function pivots() {
  const info = state.evalInfo; if (!info) return;
  const cond = $("by-task-condition").value, task = $("by-condition-task").value;
  const cell = (m, c, t) => { const x = info.by_condition.find((r) => r.model === m && r.condition === c && r.task === t); return x ? `${fmt(x.score)} ${ci(x.ci95)} n=${x.n}` : "–"; };
  const bt = head($("by-task"), ["task (metric)", ...info.models]);
  for (const t of info.tasks) { const metric = (info.by_condition.find((r) => r.task === t) || {}).metric; bt.append(row([`${t} (${metric})`, ...info.models.map((m) => cell(m, cond, t))], { "data-task": t })); }
  const bc = head($("by-condition"), ["condition", ...info.models]);
  for (const c of info.conditions) bc.append(row([c, ...info.models.map((m) => cell(m, c, task))], { "data-condition": c }));
}
function prediction(r) {
  if (r.pred_label) return `${r.pred_option || ""}. ${r.pred_label}`;
  if (r.pred_count !== null && r.pred_count !== undefined) return `count ${r.pred_count}`;
  if (r.pred_option) return r.pred_option;
  return "–";
}
async function loadReplies() {
  const form = $("reply-filters"), q = new URLSearchParams();
  for (const name of ["model", "condition", "task", "outcome", "sample"]) if (form[name].value) q.set(name, form[name].value);
  q.set("offset", state.replyOffset); q.set("limit", state.evalLimit);
  const page = await getJson(api(`/eval/replies?${q}`));
  const end = Math.min(page.total, page.offset + page.rows.length);
  $("replies-range").textContent = page.total ? `replies ${page.offset + 1}–${end} of ${page.total}` : "no replies match";
  state.replyTotal = page.total;
  $("replies").tBodies[0].replaceChildren(...page.rows.map((r) => {
    const raw = el("details"); raw.append(el("summary", (r.raw_text || "").slice(0, 60) || "(empty)"), el("pre", r.raw_text || ""));
    const id = link(r.sample_id, hashFor("rows", { row: r.base_sample_id || r.sample_id }));
    return row([id, r.model, r.condition, `${r.parse_stage || "–"} (${r.parse_kind || r.status})`, prediction(r), r.score === null ? "–" : `${r.metric} ${fmt(r.score)}`, raw], { "data-sample": r.sample_id });
  }));
}
async function loadCompare() {
  const f = $("compare-form");
  if (!f.a.value || !f.b.value || f.a.value === f.b.value) { $("compare-tally").textContent = "pick two models"; return; }
  const q = new URLSearchParams({ a: f.a.value, b: f.b.value, condition: f.condition.value || "full", disagree: f.disagree.checked, limit: state.evalLimit });
  try {
    const c = await getJson(api(`/eval/compare?${q}`));
    const t = c.tally;
    const shown = c.total > c.pairs.length ? ` (the first ${c.pairs.length} of ${c.total} listed)` : "";
    $("compare-tally").textContent = `${c.rows} shared rows: both right ${t.both}, only ${c.a} ${t.only_a}, only ${c.b} ${t.only_b}, neither ${t.neither}${shown}`;
    $("compare").tBodies[0].replaceChildren(...c.pairs.map((p) => row([link(p.sample_id, hashFor("rows", { row: p.a.base_sample_id || p.sample_id })), p.task, prediction(p.a), fmt(p.a.score), prediction(p.b), fmt(p.b.score)])));
  } catch (e) { $("compare-tally").textContent = e.message; $("compare").tBodies[0].replaceChildren(); }
}
async function loadConfusion() {
  const f = $("confusion-form");
  if (!f.model.value || !f.task.value) return;
  const q = new URLSearchParams({ model: f.model.value, task: f.task.value, condition: f.condition.value || "full" });
  const table = $("confusion");
  try {
    const m = await getJson(api(`/eval/confusion?${q}`));
    const hr = el("tr"); hr.append(el("th", "gold \\ predicted")); for (const p of m.predicted) hr.append(el("th", p));
    const th = el("thead"); th.append(hr);
    const tb = el("tbody");
    m.gold.forEach((g, i) => { const tr = el("tr"); tr.append(el("th", g)); m.counts[i].forEach((n, j) => { const td = el("td", n, n ? (m.predicted[j] === g ? "hit" : "miss") : ""); tr.append(td); }); tb.append(tr); });
    table.replaceChildren(th, tb);
  } catch (e) { table.replaceChildren(el("caption", e.message)); }
}
async function startEval(ev) {
  ev.preventDefault();
  const f = ev.target, out = $("eval-started");
  const spec = { models: [{ kind: f.kind.value, url: f.url.value.trim(), model: f.model.value.trim() }], conditions: f.conditions.value.split(",").map((s) => s.trim()).filter(Boolean) };
  out.textContent = "submitting…"; out.className = "";
  const r = await fetch(`/v1/runs/${enc(state.run)}/evaluations`, { method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${f.token.value}` }, body: JSON.stringify(spec) });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) { out.textContent = `refused (${r.status}): ${typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)}`; out.className = "err"; return; }
  out.textContent = `evaluation ${body.request} queued; waiting for the evaluator…`;
  // the evaluator reports it as its own stage of the run, which this polls until it ends; a
  // request it gives up on is dead-lettered with the reason instead
  const run = state.run, until = Date.now() + 6 * 3600 * 1000;
  while (Date.now() < until) {
    await new Promise((done) => setTimeout(done, 1500));
    if (state.run !== run) return;
    const s = await getJson(`/v1/runs/${enc(run)}`).catch(() => null);
    const dead = s && (s.dead_letters || []).find((d) => d.subject === "skyqa.v1.eval.requested" && d.time >= body.submitted_at - 1);
    if (dead) { out.textContent = `evaluation failed: ${dead.reason}: ${dead.error}`; out.className = "err"; return; }
    const st = s && (s.stages || []).find((x) => x.stage === body.stage);
    if (!st) continue;
    out.textContent = `evaluation ${st.status}: ${st.message}`;
    if (["completed", "failed"].includes(st.status)) {
      out.className = st.status === "failed" ? "err" : "ok";
      if (st.status === "completed") await showEval();
      return;
    }
  }
  out.textContent = `no word from the evaluator on ${body.request} after 6 hours; see the dashboard`;
}

// -- funnel and QC ------------------------------------------------------------------------------
function bars(target, stages) {
  const max = Math.max(1, ...stages.map((s) => s.count));
  target.replaceChildren(...stages.map((s) => {
    const line = el("div", undefined, "barline"), bar = el("div", undefined, "bar");
    bar.style.width = `${Math.max(0.5, (100 * s.count) / max)}%`;
    line.dataset.stage = s.stage; line.dataset.count = s.count;
    line.append(el("span", s.stage, "label"), bar, el("span", s.count, "count"));
    return line;
  }));
}
async function showFunnel() {
  const f = await getJson(api("/funnel"));
  bars($("funnel-landmarks"), f.landmarks); bars($("funnel-rows"), f.rows);
  const fb = head($("funnel-families"), ["family", "released", "dropped", "withheld"]);
  for (const [name, c] of Object.entries(f.families)) fb.append(row([link(name, hashFor("rows", { family: name })), c.released || 0, c.dropped || 0, c.withheld || 0]));
  $("drops").tBodies[0].replaceChildren(...f.drops.map((d) => {
    const ex = el("span"); d.examples.forEach((s, i) => { if (i) ex.append(" "); ex.append(link(s, hashFor("rows", { row: s, status: "dropped" }))); });
    return row([d.reason, d.rows, ex], { "data-reason": d.reason });
  }));
  const g = f.blind_gate;
  $("gate-verdict").textContent = g.passed ? `passed (${g.mode}; nothing withheld)` : `leaks found (${g.mode}; ${g.withheld_rows} rows withheld)`;
  $("gate-verdict").className = g.passed ? "ok" : "err";
  $("gate-failures").replaceChildren(...g.failures.map((x) => el("li", x)));
  const out = $("gate-outcomes"); out.replaceChildren("Rows by how many blind solvers answered them: ");
  for (const [k, n] of Object.entries(f.outcomes)) out.append(link(`${k}: ${n}`, hashFor("rows", { blind: k })), " ");
  $("gate-tasks").tBodies[0].replaceChildren(...g.tasks.map((t) => row([t.task, t.rows, t.status, t.best_solver, t.score, t.chance, t.p_value, t.detectable, t.box_prior_acc50], { "data-task": t.task, "data-status": t.status })));
  const lb = head($("dropped-landmarks"), ["landmark", "why a family left it out"]);
  for (const [lm, why] of Object.entries(f.dropped_landmarks)) lb.append(row([lm, why]));
  // released by some families and not others (a landmark whose image rows ship without its video rows)
  for (const [lm, why] of Object.entries(f.partly_released || {})) lb.append(row([`${lm} (partly released)`, why]));
  showAuditReport(f.audit);
}

// -- the human answerability audit ----------------------------------------------------------------
// Results (qc_report.json's audit section) under Funnel & QC; the audit mode itself reads only
// routes that never send a gold, and shows each row as a model gets it.
function showAuditReport(a) {
  $("audit-summary").textContent = a ? `${a.answers} answers by ${a.users.join(", ")} on ${a.sampled} sampled rows (${a.per_stratum} per family and task)` : "nobody has answered the audit sample yet";
  $("audit-tasks").tBodies[0].replaceChildren(...Object.entries(a ? a.tasks : {}).map(([task, t]) =>
    row([task, t.family, t.sampled, t.answered, t.agreed, t.agreement, ci(t.ci)], { "data-task": task, "data-agreement": t.agreement })));
  $("audit-disagreements").tBodies[0].replaceChildren(...(a ? a.disagreements : []).map((d) =>
    row([link(d.sample_id, hashFor("rows", { row: d.sample_id })), d.task, d.user, d.reply.join(", "), d.gold.join(", ")], { "data-sample": d.sample_id })));
}
async function auditJson(url, init) {
  const r = await fetch(url, init);
  const body = await r.json().catch(() => ({}));
  const why = typeof body.detail === "string" ? body.detail : `${r.status} ${r.statusText}`;
  if (r.status === 401 || r.status === 403) { auditSignIn(why); const e = new Error(why); e.signin = true; throw e; }
  if (!r.ok) throw new Error(why);
  return body;
}
function auditSignIn(why) {
  const form = $("audit-signin");
  $("audit-why").textContent = why || "";
  form.hidden = false; $("audit-row").hidden = true; $("audit-queue").replaceChildren(); $("audit-progress").textContent = "";
}
async function signInToAudit(e) {
  e.preventDefault();
  const form = $("audit-signin");
  const r = await fetch("/v1/session", {
    method: "POST",
    headers: { Authorization: `Bearer ${form.elements.token.value}`, "Content-Type": "application/json" },
    body: JSON.stringify({ user: form.elements.user.value }),
  });
  form.elements.token.value = "";
  if (!r.ok) { const b = await r.json().catch(() => ({})); $("audit-why").textContent = typeof b.detail === "string" ? b.detail : `${r.status}`; return; }
  form.hidden = true;
  await showAudit(new URLSearchParams(location.hash.slice(1)));
}
async function showAudit(p) {
  let q;
  try { q = await auditJson(api("/audit")); } catch (e) { if (e.signin) return; throw e; }
  $("audit-signin").hidden = true;
  $("audit-progress").textContent = `${q.user}: ${q.answered} of ${q.rows.length} answered`;
  const asked = p.get("row") && q.rows.some((r) => r.sample_id === p.get("row") && r.reply === null) ? p.get("row") : q.next;
  $("audit-queue").replaceChildren(...q.rows.map((r) => {
    const li = el("li", `${r.family} · ${r.task}`, r.reply === null ? (r.sample_id === asked ? "current" : "") : "answered");
    li.dataset.sample = r.sample_id;
    li.title = r.reply === null ? "answer this row" : `you answered ${r.reply.join(", ")}`;
    if (r.reply === null) li.onclick = () => go("audit", { row: r.sample_id });
    return li;
  }));
  $("audit-done").hidden = asked !== null;
  $("audit-row").hidden = asked === null;
  if (asked !== null) await showAuditRow(asked);
}
async function showAuditRow(sampleId) {
  const d = await auditJson(api(`/audit/rows/${enc(sampleId)}`));
  $("audit-row").dataset.sample = d.sample_id; $("audit-row").dataset.kind = d.kind;
  $("audit-title").textContent = `${d.family} · ${d.task}`;
  $("audit-system").textContent = d.system_prompt; $("audit-system").hidden = !d.system_prompt;
  $("audit-user").textContent = d.user_prompt;
  $("audit-media").replaceChildren(...d.media.map((m) => {
    const fig = el("figure", undefined, "medium"); fig.append(el("figcaption", m.label));
    if (m.video) { const v = el("video"); v.controls = true; v.muted = true; v.preload = "metadata"; v.src = m.url; fig.append(v); }
    else {
      const frame = el("div", undefined, "frame"), canvas = el("div", undefined, "canvas"), img = el("img");
      img.src = m.url; img.alt = m.label; img.title = "click: full resolution";
      canvas.append(img); frame.append(canvas); frame.onclick = () => frame.classList.toggle("zoom"); fig.append(frame);
    }
    return fig;
  }));
  const box = $("audit-choices"); box.replaceChildren(el("legend", d.kind === "count" ? "your count" : d.kind === "multi" ? "every option that applies" : "your answer"));
  if (d.kind === "count") {
    const i = el("input"); i.type = "number"; i.name = "count"; i.min = "0"; i.step = "1"; i.required = true; box.append(i);
  } else {
    for (const o of d.options) {
      const lab = el("label"), i = el("input"); i.type = d.kind === "multi" ? "checkbox" : "radio"; i.name = "option"; i.value = o.id; i.required = d.kind !== "multi";
      lab.append(i, ` ${o.id}. ${o.label}`); lab.dataset.option = o.id; box.append(lab);
    }
  }
  $("audit-said").textContent = "";
}
async function answerAudit(e) {
  e.preventDefault();
  const art = $("audit-row"), form = $("audit-form"), kind = art.dataset.kind;
  const picked = [...form.querySelectorAll("input[name=option]:checked")].map((i) => i.value);
  const reply = kind === "count" ? form.elements.count.value : kind === "multi" ? picked : picked[0];
  if (kind === "multi" && !picked.length) { $("audit-said").textContent = "pick at least one option"; return; }
  try {
    await auditJson(api("/audit/answers"), { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ sample_id: art.dataset.sample, reply }) });
  } catch (x) { $("audit-said").textContent = x.message; $("audit-said").className = "err"; return; }
  $("audit-said").className = "";
  if (new URLSearchParams(location.hash.slice(1)).get("row")) go("audit"); else await showAudit(new URLSearchParams());
}

// -- start --------------------------------------------------------------------------------------
(async () => {
  for (const a of document.querySelectorAll("nav a")) a.onclick = (e) => { e.preventDefault(); go(a.dataset.view); };
  $("run").onchange = () => { state.run = $("run").value; state.rowOffset = state.replyOffset = 0; state.evalInfo = null; go(state.view); };
  $("row-filters").onchange = () => { state.rowOffset = 0; go("rows", currentFilters()); };
  $("row-filters").onsubmit = (e) => { e.preventDefault(); state.rowOffset = 0; loadRows().catch((x) => say(x.message, "err")); };
  $("row-filters").q.oninput = () => { state.rowOffset = 0; loadRows().catch((x) => say(x.message, "err")); };
  for (const b of document.querySelectorAll("[data-page]")) b.onclick = () => { state.rowOffset = Math.max(0, Math.min((state.rowTotal || 1) - 1, state.rowOffset + Number(b.dataset.page) * state.limit)); loadRows().catch((x) => say(x.message, "err")); };
  for (const b of document.querySelectorAll("[data-rpage]")) b.onclick = () => { state.replyOffset = Math.max(0, Math.min((state.replyTotal || 1) - 1, state.replyOffset + Number(b.dataset.rpage) * state.evalLimit)); loadReplies().catch((x) => say(x.message, "err")); };
  $("show-marks").onchange = () => $("row-media").classList.toggle("nomarks", !$("show-marks").checked);
  $("show-boxes").onchange = tick;
  $("mission-video").ontimeupdate = tick; $("mission-video").onseeked = tick;
  $("by-task-condition").onchange = pivots; $("by-condition-task").onchange = pivots;
  $("reply-filters").onchange = () => { state.replyOffset = 0; loadReplies().catch((x) => say(x.message, "err")); };
  $("reply-filters").onsubmit = (e) => { e.preventDefault(); $("reply-filters").onchange(); };
  $("compare-form").onchange = () => loadCompare();
  $("confusion-form").onchange = () => loadConfusion();
  $("eval-form").onsubmit = (e) => startEval(e).catch((x) => { $("eval-started").textContent = x.message; });
  $("audit-signin").onsubmit = (e) => signInToAudit(e).catch((x) => { $("audit-why").textContent = x.message; });
  $("audit-form").onsubmit = (e) => answerAudit(e);
  $("audit-results").onclick = (e) => { e.preventDefault(); go("funnel"); };
  window.onhashchange = route;
  try {
    const runs = await getJson("/v1/runs?limit=200");
    options($("run"), runs.map((r) => r.run_id));
    const p = new URLSearchParams(location.hash.slice(1));
    state.run = p.get("run") || (runs[0] && runs[0].run_id) || null;
    if (state.run && ![...$("run").options].some((o) => o.value === state.run)) { const o = el("option", state.run); o.value = state.run; $("run").append(o); }
    if (state.run) $("run").value = state.run; else say("no runs yet: submit a scan first");
  } catch (e) { say(`gateway: ${e.message}`, "err"); }
  route();
})();
