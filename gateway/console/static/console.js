// Tiergate console: four read-only views over /console/api/*, refreshed every few seconds, and
// "Tenants & keys", which manages them through /admin/* (every call carries X-Tiergate-Console,
// which no other site's page can send here without a CORS preflight this server never grants).
// Everything shown comes from the JSON endpoints; text from the server is set with
// textContent, never as HTML (tenant names and logged prompts are data, not markup).
"use strict";

const REFRESH_MS = 5000;
const COLORS = ["#2563eb", "#16a34a", "#d97706", "#dc2626", "#7c3aed", "#0891b2", "#db2777", "#65a30d"];
const charts = {};
let current = "overview";

const $ = (id) => document.getElementById(id);
const usd = (x) => (x == null ? "–" : Number(x).toFixed(6));
const count = (x) => (x == null ? "–" : String(Math.round(x)));
const pct = (x) => (x == null ? "–" : (100 * x).toFixed(2) + "%");
const ms = (x) => (x == null ? "–" : Number(x).toFixed(1));
const clock = (unixMs) => new Date(unixMs).toISOString().slice(11, 19);

async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", cache: "no-store", ...options });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : response.statusText);
  return body;
}

function setText(id, text) { $(id).textContent = text; }

function fillTable(id, rows) {
  const body = $(id).querySelector("tbody");
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const cell of cells) {
      const td = document.createElement("td");
      td.textContent = cell;
      tr.appendChild(td);
    }
    return tr;
  }));
  return body;
}

// One uPlot per element; rebuilt only when its series change, otherwise fed new data.
function chart(id, xs, series, { bars = false, markers = [], yFormat = null } = {}) {
  const el = $(id);
  const names = Object.keys(series);
  const key = names.join("|") + (bars ? "|bars" : "");
  const data = [xs, ...names.map((n) => series[n])];
  const existing = charts[id];
  if (existing && existing.key === key) {
    existing.markers = markers;
    existing.plot.setData(data);
    return;
  }
  if (existing) existing.plot.destroy();
  const holder = { key, markers };
  const opts = {
    width: Math.max(320, el.clientWidth || 560), height: 200,
    scales: { x: { time: !bars } },
    axes: [{}, yFormat ? { values: (u, ticks) => ticks.map(yFormat), size: 70 } : {}],
    series: [{}, ...names.map((n, i) => ({
      label: n, stroke: COLORS[i % COLORS.length], width: 2,
      fill: bars ? COLORS[i % COLORS.length] + "99" : undefined,
      paths: bars ? uPlot.paths.bars({ size: [0.8] }) : undefined,
    }))],
    hooks: { draw: [(u) => drawMarkers(u, holder.markers)] },
  };
  holder.plot = new uPlot(opts, data, el);
  charts[id] = holder;
}

function drawMarkers(u, markers) {
  const ctx = u.ctx;
  ctx.save();
  ctx.setLineDash([4, 4]);
  ctx.strokeStyle = "#6b7280";
  for (const x of markers) {
    const px = u.valToPos(x, "x", true);
    if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) continue;
    ctx.beginPath();
    ctx.moveTo(px, u.bbox.top);
    ctx.lineTo(px, u.bbox.top + u.bbox.height);
    ctx.stroke();
  }
  ctx.restore();
}

async function showOverview() {
  const o = await api("/console/api/overview");
  const t = o.totals;
  const tokens = Object.values(t.tokens_by_tier).reduce((a, v) => a + v.in + v.out, 0);
  setText("kpi-requests", count(t.requests));
  setText("kpi-tokens", count(tokens));
  setText("kpi-spend", usd(t.spend_usd));
  setText("kpi-saved", usd(t.saved_usd));
  setText("kpi-saved-share", t.top_tier_usd > 0 ? pct(t.saved_usd / t.top_tier_usd) : "–");
  setText("kpi-error-rate", pct(t.error_rate));
  setText("kpi-ledger", o.ledger ? usd(o.ledger.spend_usd) : "no tenants");
  setText("errors-4xx", count(t.errors_4xx));
  setText("errors-5xx", count(t.errors_5xx));
  const served = Object.values(t.served_by_tier).reduce((a, v) => a + v, 0);
  fillTable("tier-mix", o.tiers.map((tier) => {
    const n = t.served_by_tier[tier] || 0, tok = t.tokens_by_tier[tier] || { in: 0, out: 0 };
    return [tier, count(n), served ? pct(n / served) : "–", count(tok.in), count(tok.out)];
  }));
  fillTable("reasons", Object.entries(t.served_by_reason).filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1]).map(([reason, n]) => [reason, count(n)]));
  const m = o.per_minute;
  if (m) {
    chart("chart-requests", m.minutes, m.requests);
    chart("chart-tokens", m.minutes, m.tokens);
    chart("chart-spend", m.minutes, { spend: m.spend_usd, saved: m.saved_usd },
      { yFormat: (v) => (v === 0 ? "0" : v.toPrecision(2)) });
    if (Object.keys(m.reasons).length) chart("chart-reasons", m.minutes, { ...m.reasons, "no upstream": m.upstream_failures });
  }
}

function showExplanation(r) {
  $("explain-error").hidden = true;
  $("explain-result").hidden = false;
  setText("explain-tier", r.tier);
  setText("explain-routed-by", r.routed_by);
  setText("explain-backend", r.backend || "none available");
  setText("explain-capabilities", JSON.stringify(r.capabilities));
  // Thresholds apply to P(level >= k); draw each against its effective threshold (calibrated + shifts).
  const scores = r.classifier ? r.classifier.scores || [] : [];
  const thresholds = (r.steps.find((s) => s.step === "thresholds") || {}).effective || {};
  $("explain-scores").replaceChildren(...scores.slice(1).map((_, i) => {
    const level = i + 2, atLeast = scores.slice(i + 1).reduce((a, p) => a + p, 0), t = thresholds[level];
    const row = document.createElement("div");
    row.className = "bar";
    const label = document.createElement("span");
    label.textContent = `P(level ≥ ${level}) ${atLeast.toFixed(3)}` + (t != null ? ` vs threshold ${t.toFixed(3)}` : "");
    const fill = document.createElement("i");
    fill.style.width = (100 * atLeast).toFixed(1) + "%";
    if (t != null && atLeast >= t) fill.className = "over";
    row.append(fill, label);
    if (t != null) {
      const mark = document.createElement("b");
      mark.style.left = (100 * Math.min(1, Math.max(0, t))).toFixed(1) + "%";
      row.append(mark);
    }
    return row;
  }));
  fillTable("explain-steps", r.steps.map(({ step, ...detail }) => [step, JSON.stringify(detail)]));
}

async function explain(prompt) {
  $("explain-result").hidden = true;  // never show the last answer as this prompt's while it loads
  try {
    showExplanation(await api("/console/api/route", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt, model: $("explain-model").value, tenant: $("explain-tenant").value || null }),
    }));
  } catch (err) {
    $("explain-result").hidden = true;
    $("explain-error").hidden = false;
    setText("explain-error", err.message);
  }
}

function fillSelect(id, values, keepFirst) {
  const select = $(id);
  if (select.dataset.filled) return;
  const options = values.map((v) => { const o = document.createElement("option"); o.value = o.textContent = v; return o; });
  select.replaceChildren(...(keepFirst ? [select.options[0]] : []), ...options);
  select.dataset.filled = "1";
}

async function showRouting() {
  const r = await api("/console/api/routing");
  fillSelect("explain-model", r.models, false);
  fillSelect("explain-tenant", r.tenants, true);
  setText("prompt-logging", r.log_prompts ? "(prompt logging on: click a row to explain it again)" : "(prompt logging off: click a row for its recorded scores)");
  const body = fillTable("recent", r.recent.map((row) => [
    clock(row.ts_ms), row.tenant, row.model, row.tier, row.reason, ms(row.latency_ms),
    `${row.prompt_tokens}/${row.completion_tokens}`, usd(row.cost_micro / 1e6),
    row.scores ? row.scores.map((p) => p.toFixed(2)).join(" ") : "",
  ]));
  r.recent.forEach((row, i) => {
    const tr = body.children[i];
    tr.dataset.requestId = row.request_id;
    tr.classList.add("clickable");
    tr.addEventListener("click", () => {
      if (row.prompt) {  // logged: explain it again as it would be routed now
        $("explain-prompt").value = row.prompt;
        explain(row.prompt);
      } else {  // not logged: show what was recorded when it was served
        showExplanation({ tier: row.tier, routed_by: row.reason, backend: `(recorded ${row.request_id})`,
          capabilities: {}, classifier: row.scores ? { scores: row.scores } : null, steps: [] });
      }
    });
  });
}

async function showQuality() {
  const q = await api("/console/api/quality");
  setText("quality-enabled", q.enabled ? "on" : "off");
  setText("quality-rate", pct(q.sampling_rate));
  const shift = Object.entries(q.threshold_shift);
  setText("router-outcomes", `${count(q.router.learned)} / ${count(q.router.heldout)}`);
  setText("router-candidates", `${count(q.router.swapped)} / ${count(q.router.refused)}`);
  const cascades = Object.entries(q.cascade.tenants);
  setText("cascade-thresholds", cascades.length ? cascades.map(([t, c]) => c.source === "calibrated"
    ? `${t}: ${c.threshold.toFixed(3)} (calibrated on ${count(c.verdicts)} verdicts, ${new Date(c.at_ms).toISOString()})`
    : `${t}: policy's (static, ${count(c.verdicts_recorded)} verdicts)`).join("; ") : "policy's (static)");
  setText("quality-shift", shift.length ? shift.map(([k, v]) => `level ≥${k}: ${v >= 0 ? "+" : ""}${v}`).join(", ") : "none");
  const events = [
    ...q.changes.map((c) => ({ at: c.at_ms, what: "threshold", detail: JSON.stringify(c) })),
    ...q.swaps.filter((s) => s.at_ms).map((s) => ({ at: s.at_ms, what: "classifier swap", detail: `${s.previous} → ${s.current} (${s.reason})` })),
    ...q.router.history.map((r) => ({ at: r.at_ms, what: `router candidate ${r.result}`,
      detail: `${r.batch} new outcomes; savings at 95% quality ${r.savings_at_95pct.candidate} vs serving ${r.savings_at_95pct.serving} on ${r.heldout} held out` })),
    ...q.cascade.history.map((r) => ({ at: r.at_ms, what: `cascade threshold ${r.result}`,
      detail: `tenant ${r.tenant}: ${r.candidate_threshold} (serving ${r.serving_threshold}) on ${r.verdicts} verdicts, ${r.heldout} held out` })),
  ].sort((a, b) => b.at - a.at);
  fillTable("changes", events.map((e) => [new Date(e.at).toISOString(), e.what, e.detail]));
  if (q.series && q.series.minutes.length) {
    const rates = Object.fromEntries(Object.entries(q.series.failure_rate));
    chart("chart-failures", q.series.minutes, rates, { markers: events.map((e) => e.at / 1000) });
  }
  setText("quality-samples", q.similarity ? count(q.similarity.counts.reduce((a, n) => a + n, 0)) : "no store");
  if (q.similarity) {
    chart("chart-similarity", q.similarity.bin_edges.slice(0, -1), { samples: q.similarity.counts }, { bars: true });
  }
}

async function showWorkers() {
  const w = await api("/console/api/workers");
  fillTable("workers", w.workers.map((x) => [
    x.worker, x.tiers.join(", "), x.healthy ? "up" : "down", x.breaker, count(x.waiting), count(x.running),
    pct(x.kv_cache_usage), pct(x.prefix_cache_hit_rate),
    x.ttft_ms_p50 != null ? `${ms(x.ttft_ms_p50)} / ${ms(x.ttft_ms_p99)}` : (x.embed_ms_p50 != null ? `embed ${ms(x.embed_ms_p50)} / ${ms(x.embed_ms_p99)}` : "–"),
    x.tpot_ms_p50 != null ? `${ms(x.tpot_ms_p50)} / ${ms(x.tpot_ms_p99)}` : "–",
    pct(x.spec_acceptance),
  ]));
}

const admin = (path, method = "GET", body = undefined) => api(path, {
  method, headers: { "X-Tiergate-Console": "1", ...(body ? { "Content-Type": "application/json" } : {}) },
  body: body ? JSON.stringify(body) : undefined });
const when = (unix) => (unix ? new Date(unix * 1000).toISOString().slice(0, 16).replace("T", " ") : "–");

function keyState(k) {
  if (k.revoked_at) return "revoked";
  if (k.expires_at && k.expires_at * 1000 <= Date.now()) return "expired";
  return k.secrets.length > 1 ? "rotating" : "active";
}

function keyButton(label, onClick) {
  const button = document.createElement("button");
  button.textContent = label;
  button.addEventListener("click", onClick);
  return button;
}

async function keyAction(run) {
  try {
    $("keys-error").hidden = true;
    await run();
    await showKeys();
  } catch (err) {
    setText("keys-error", err.message);
    $("keys-error").hidden = false;
  }
}

function showSecret(key) {
  setText("key-secret-id", key.id);
  setText("key-secret", key.secret);
  $("key-secret-box").hidden = false;
}

async function showKeys() {
  const [tenants, keys, alerts, audit] = await Promise.all([admin("/admin/tenants"), admin("/admin/keys?limit=1000"),
    admin("/admin/alerts?limit=50"), admin("/admin/audit?limit=20")]);
  fillTable("tenants", tenants.data.map((t) => [t.name, t.source,
    t.policy && t.policy.budgets ? JSON.stringify(t.policy.budgets) : "–",
    t.policy && t.policy.allowed_tags ? t.policy.allowed_tags.join(", ") : "–",
    t.policy ? JSON.stringify(t.policy) : "(config file)"]));
  const chosen = $("key-tenant").value;
  $("key-tenant").replaceChildren(...tenants.data.map((t) => new Option(t.name, t.name)));
  if (chosen) $("key-tenant").value = chosen;
  const body = fillTable("keys", keys.data.map((k) => [k.id, k.tenant, k.prefix + "…", k.owner || "–",
    when(k.expires_at), keyState(k), k.budgets ? JSON.stringify(k.budgets) : "–", ""]));
  keys.data.forEach((k, i) => {
    const cell = body.rows[i].cells[7];
    if (k.revoked_at) return;
    cell.append(keyButton("Rotate", () => keyAction(async () => showSecret(await admin(`/admin/keys/${k.id}/rotate`, "POST", {})))),
      keyButton("Revoke", () => keyAction(() => admin(`/admin/keys/${k.id}/revoke`, "POST", {}))));
    body.rows[i].dataset.keyId = k.id;
  });
  fillTable("alerts", alerts.data.map((a) => [new Date(a.created_at * 1000).toISOString().slice(0, 19),
    a.key_id ? `${a.tenant} / ${a.key_id}` : a.tenant, a.budget, a.period, a.percent + "%", a.status, String(a.attempts)]));
  fillTable("audit", audit.data.map((e) => [new Date(e.ts * 1000).toISOString().slice(0, 19), e.who, e.action, e.target]));
}

$("tenant-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const name = $("tenant-name").value.trim();
  keyAction(async () => {
    const policy = $("tenant-policy").value.trim() ? JSON.parse($("tenant-policy").value) : {};
    const known = (await admin("/admin/tenants")).data.some((t) => t.name === name);
    await (known ? admin(`/admin/tenants/${encodeURIComponent(name)}`, "PATCH", { policy })
      : admin("/admin/tenants", "POST", { name, policy }));
  });
});
$("key-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const fields = { tenant: $("key-tenant").value };
  if ($("key-owner").value.trim()) fields.owner = $("key-owner").value.trim();
  if ($("key-days").value) fields.expires_in_s = Number($("key-days").value) * 86400;
  keyAction(async () => {
    if ($("key-budgets").value.trim()) fields.budgets = JSON.parse($("key-budgets").value);
    showSecret(await admin("/admin/keys", "POST", fields));
  });
});

const VIEWS = { overview: showOverview, routing: showRouting, quality: showQuality, workers: showWorkers, keys: showKeys };

async function refresh() {
  try {
    await VIEWS[current]();
    setText("updated", "updated " + new Date().toISOString().slice(11, 19) + " UTC");
    document.body.dataset.loaded = current;
  } catch (err) {
    setText("updated", "error: " + err.message);
  }
}

function route() {
  current = VIEWS[location.hash.slice(1)] ? location.hash.slice(1) : "overview";
  for (const section of document.querySelectorAll(".view")) section.hidden = section.id !== "view-" + current;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("active", link.dataset.view === current);
  delete document.body.dataset.loaded;
  refresh();
}

$("explain-form").addEventListener("submit", (e) => { e.preventDefault(); explain($("explain-prompt").value); });
window.addEventListener("hashchange", route);
setInterval(refresh, REFRESH_MS);
route();
