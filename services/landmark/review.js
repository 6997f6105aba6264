// The review web's page logic. Every value from the API reaches the page through textContent,
// option text or setAttribute, never through HTML parsing: class names, labels and notes are
// reviewer- or model-written text. The token lives in this script's memory only, so a reload
// asks for it again and nothing persistent holds it.
"use strict";

const RING = ["front", "front_right", "right", "back_right", "back", "back_left", "left", "front_left"];
const CATS = ["building", "vehicle", "public_facility", "urban_landscape", "transport_infrastructure",
              "industrial_infrastructure", "vegetation", "other"];
const $ = (s, root = document) => root.querySelector(s);
let token = "";
let runId = "";
// view key -> Promise of an object URL: views never change within a run, and reloading the
// list after every action must not fetch every image again
const media = new Map();

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  e.append(...children.map((c) => (c instanceof Node ? c : String(c))));
  return e;
}

function status(msg, error = false) {
  const s = $("#status");
  s.textContent = msg;
  s.className = error ? "error" : "";
}

function problem(data, res) {
  if (typeof data.detail === "string") return data.detail;
  if (Array.isArray(data.detail)) return data.detail.map((d) => d.msg || JSON.stringify(d)).join("; ");
  return res.statusText || `HTTP ${res.status}`;
}

async function api(path, body) {
  const res = await fetch("/review/api" + path, {
    method: body === undefined ? "GET" : "POST",
    headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(problem(data, res));
  return data;
}

// <img src> cannot carry the bearer header; fetching the bytes and showing an object URL keeps
// the token out of URLs (history, logs, the DOM)
function mediaUrl(key) {
  if (!media.has(key)) {
    const url = fetch("/review/api/media?key=" + encodeURIComponent(key), {
      headers: { "Authorization": "Bearer " + token },
    }).then(async (res) => {
      if (!res.ok) throw new Error(`view ${key}: HTTP ${res.status}`);
      return URL.createObjectURL(await res.blob());
    });
    url.catch(() => media.delete(key));
    media.set(key, url);
  }
  return media.get(key);
}

function forgetMedia() {
  for (const url of media.values()) url.then((u) => URL.revokeObjectURL(u), () => {});
  media.clear();
}

const runPath = (...parts) => "/runs/" + [runId, ...parts].map(encodeURIComponent).join("/");

async function act(id, what, body, okMsg) {
  try {
    await api(runPath("instances", id, what), body);
    status(okMsg);
    await load();
  } catch (e) { status(e.message, true); }
}

function select(attrs, values, chosen) {
  const s = el("select", attrs);
  for (const v of values) {
    const o = new Option(v, v);
    o.selected = v === chosen;
    s.append(o);
  }
  return s;
}

function viewNode(item, v) {
  const r = item.review;
  const node = el("div", { "class": "view", "data-view": v.view_id });
  if (r.main_view === v.view_id) node.classList.add("main");
  if (v.invalid) node.classList.add("invalid");
  const img = el("img", { alt: v.view_id });
  mediaUrl(v.key).then((u) => { img.src = u; }, () => { img.alt = `${v.view_id} (unavailable)`; });
  const box = el("div", { "class": "box" });
  const [w] = v.size;
  const [x0, y0, x1, y1] = v.bbox;
  const s = w > 0 ? 200 / w : 0;
  // CSSOM writes are not inline style attributes, so style-src 'self' allows them
  Object.assign(box.style, {
    left: `${x0 * s}px`, top: `${y0 * s}px`, width: `${(x1 - x0) * s}px`, height: `${(y1 - y0) * s}px`,
  });
  const controls = el("div", { "class": "row" });
  if (v.mode === "orbit") {
    const dir = select({ "data-dir": v.view_id }, RING, v.direction);
    const anchor = el("button", {
      "data-anchor": v.view_id,
      title: "this view shows the chosen side; re-derive the others; make it main",
    }, "anchor+main");
    anchor.onclick = () => act(item.instance_id, "direction",
      { view_id: v.view_id, direction: dir.value, main: true }, `${item.instance_id}: anchored ${dir.value}`);
    const valid = el("button", { "data-valid": v.view_id, "data-to": String(v.invalid) },
      v.invalid ? "mark valid" : "mark invalid");
    valid.onclick = () => act(item.instance_id, "validity",
      { view_id: v.view_id, valid: v.invalid }, `${item.instance_id}: view updated`);
    controls.append(dir, anchor, valid);
  }
  node.append(img, box, el("div", {}, `${v.view_id} · `, el("b", {}, v.direction)), controls);
  return node;
}

function cardNode(item) {
  const r = item.review;
  const id = item.instance_id;
  const card = el("section", { "class": "card", "data-id": id });
  if (r.action === "keep" || r.action === "drop") card.classList.add(r.action);

  const head = el("div", { "class": "row" }, el("b", {}, id),
    el("span", { "class": "tag" }, r.action || "undecided"), el("span", { "class": "tag" }, r.annotation_status));
  for (const action of ["keep", "drop"]) {
    const b = el("button", { "data-decide": action }, action === "keep" ? "Keep" : "Drop");
    b.onclick = () => act(id, "decide", { action }, `${id}: ${action}`);
    head.append(b);
  }
  const cls = el("input", { "data-class": true, size: 18 });
  cls.value = item.class_name;
  const sync = el("button", { "data-sync": true }, "Sync class name");
  sync.onclick = () => act(id, "class_name", { class_name: cls.value }, "class name synced");
  const auto = el("button", { "data-auto": true }, "Auto-label");
  auto.onclick = () => act(id, "auto_label", {}, `${id}: auto-label requested`);
  head.append(cls, sync, auto);

  const views = el("div", { "class": "views" }, ...item.views.map((v) => viewNode(item, v)));

  const cat = select({ "data-cat": true }, CATS, r.landmark_category);
  const sub = el("input", { "data-sub": true, placeholder: "subcategory" });
  sub.value = r.landmark_subcategory;
  const desc = el("input", { "class": "desc", "data-desc": true, placeholder: "description (at most 20 words)" });
  desc.value = r.landmark_description;
  const save = el("button", { "data-save": true }, "Save labels");
  save.onclick = () => act(id, "labels",
    { category: cat.value, subcategory: sub.value, description: desc.value }, `${id}: labels saved`);
  const labels = el("div", { "class": "row labels" }, cat, sub, desc, save);
  if (r.auto_label) {
    labels.append(el("span", { "class": "tag" }, `auto: ${r.auto_label.category} / ${r.auto_label.confidence}`));
  }
  card.append(head, views, labels);
  return card;
}

async function load() {
  if (!runId) { $("#list").replaceChildren(); return; }
  const data = await api(runPath());
  $("#list").replaceChildren(...data.instances.map(cardNode));
}

async function refreshRuns(keep) {
  const runs = await api("/runs");
  const label = (r) => `${r.run_id} (${r.mode}${r.finalized ? ", finalized" : ""})`;
  $("#run").replaceChildren(...runs.map((r) => new Option(label(r), r.run_id)));
  runId = runs.some((r) => r.run_id === keep) ? keep : runs.length ? runs[0].run_id : "";
  $("#run").value = runId;
  await load();
  return runs;
}

async function connect() {
  token = $("#token").value.trim();
  forgetMedia();
  try {
    const runs = await refreshRuns(runId);
    status(runs.length ? `${runs.length} run(s)` : "no runs to review");
  } catch (e) { status(e.message, true); }
}

document.addEventListener("DOMContentLoaded", () => {
  $("#connect").onclick = connect;
  $("#token").onkeydown = (e) => { if (e.key === "Enter") connect(); };
  $("#run").onchange = async (e) => {
    runId = e.target.value;
    forgetMedia();
    try { await load(); } catch (err) { status(err.message, true); }
  };
  $("#finalize").onclick = async () => {
    if (!runId) return;
    try {
      const r = await api(runPath("finalize"), {});
      await refreshRuns(runId);
      status(`finalized: ${r.valid} of ${r.total} landmarks released`);
    } catch (e) { status(e.message, true); }
  };
});
