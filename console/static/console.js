// raftmq console: polls the JSON API (docs/console.md) and renders it.
// Plain DOM building with textContent only: names come from clients.
"use strict";

const params = new URLSearchParams(location.search);
const refreshMs = Math.max(250, Number(params.get("refresh")) || 1000);
const state = { selectedTopic: "", selectedGroup: "", creds: null, actionsEnabled: false };

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function num(v) { return el("td", { class: "num" }, v); }
function fmtRate(r) { return r < 0 ? "–" : r.toFixed(1); }
// fmtTime shows a time of day for today, else the date too: a topic last
// written days ago must not read as written today.
function fmtTime(ms) {
  if (!(ms > 0)) return "–";
  const d = new Date(ms);
  return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}
// fmtISO shows a message's timestamp; a producer sets bornTimestamp
// itself, and one out of Date's range (nanoseconds sent as ms) would make
// toISOString throw and fail the whole lookup.
function fmtISO(ms) {
  const d = new Date(ms);
  return isNaN(d.getTime()) ? String(ms) + " (not a valid time)" : d.toISOString();
}
function fmtInt(n) { return Number(n).toLocaleString("en-US"); }

function base64(s) {
  const bytes = new TextEncoder().encode(s);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin);
}

function authHeaders() {
  return state.creds ? { Authorization: "Basic " + base64(state.creds.ak + ":" + state.creds.sk) } : {};
}

async function getJSON(path) {
  const r = await fetch(path, { headers: authHeaders(), cache: "no-store" });
  const body = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

async function postJSON(path, payload) {
  const r = await fetch(path, {
    method: "POST",
    headers: Object.assign({ "Content-Type": "application/json" }, authHeaders()),
    body: JSON.stringify(payload),
  });
  const body = await r.json().catch(() => ({ error: r.status + " " + r.statusText }));
  if (!r.ok) throw Object.assign(new Error(body.error || r.statusText), { body });
  return body;
}

// Attributes that name what a node shows: a node keeps its place among
// its siblings by the first of these it has, else by its position.
const keyAttrs = ["data-group", "data-member", "data-topic", "data-consumer-group", "data-queue"];

function keyOf(node) {
  if (node.nodeType !== Node.ELEMENT_NODE) return null;
  for (const a of keyAttrs) if (node.hasAttribute(a)) return a + "=" + node.getAttribute(a);
  return null;
}

// patchChildren makes parent's children equal to next, keeping each node
// that still shows the same thing and changing only what differs. Built
// anew on every poll, a row lost a click whose press and release fell on
// either side of a refresh (the click then went to the table, which
// ignores it), and any text selected in it.
function patchChildren(parent, next) {
  const byKey = new Map();
  for (const c of parent.childNodes) {
    const k = keyOf(c);
    if (k !== null && !byKey.has(k)) byKey.set(k, c);
  }
  next.forEach((n, i) => {
    const k = keyOf(n);
    let o = k !== null ? byKey.get(k) : parent.childNodes[i];
    if (k !== null) byKey.delete(k);
    if (o && o.nodeName === n.nodeName && keyOf(o) === k) patchNode(o, n);
    else o = n;
    const at = parent.childNodes[i];
    if (at !== o) parent.insertBefore(o, at || null);
  });
  while (parent.childNodes.length > next.length) parent.lastChild.remove();
}

function patchNode(o, n) {
  if (o.isEqualNode(n)) return;
  if (o.nodeType !== Node.ELEMENT_NODE) {
    o.nodeValue = n.nodeValue;
    return;
  }
  for (const a of [...o.attributes]) if (!n.hasAttribute(a.name)) o.removeAttribute(a.name);
  for (const a of n.attributes) if (o.getAttribute(a.name) !== a.value) o.setAttribute(a.name, a.value);
  patchChildren(o, [...n.childNodes]);
}

function fill(tbody, rows) {
  patchChildren(tbody, rows);
}

// ---- cluster ----

function renderCluster(v) {
  $("namesrv").textContent = "name server " + v.namesrv;
  state.actionsEnabled = v.actions.enabled;
  $("actions-note").textContent = v.actions.reason;
  $("actions-note").className = v.actions.enabled ? "muted" : "error";
  $("login").hidden = !v.actions.enabled;
  $("balance").disabled = !v.actions.enabled;
  const groups = [];
  for (const c of v.clusters) {
    for (const g of c.groups) {
      const head = el("div", { class: "group-head" },
        el("strong", {}, g.brokerName),
        el("span", { class: "muted" }, "cluster " + c.name),
        el("span", { "data-field": "leader" }, "leader " + (g.leaderId || "none")),
        el("span", { "data-field": "term" }, "term " + g.term),
        el("span", { class: "muted" }, "routed " + (g.routedLeader || "–")),
        g.preferredLeaderId ? el("span", { class: "muted" }, "preferred " + g.preferredLeaderId) : null,
        el("button", { type: "button", disabled: !v.actions.enabled, "data-action": "transfer", "data-group": g.brokerName, "data-target": "" }, "Transfer leadership"));
      const rows = g.members.map((m) => {
        const note = m.error || (m.logStopped ? "log stopped: " + m.logStopped : "") || (m.applyStopped ? "apply stopped: " + m.applyStopped : "") ||
          (m.acksBeforeFsync ? "acks BEFORE fsync" : "");
        const canLead = v.actions.enabled && m.id && m.state === "Follower" && m.suffrage === "Voter";
        return el("tr", { "data-member": m.id || m.remotingAddr, "data-state": m.state },
          el("td", {}, m.id || "–"),
          el("td", {}, m.remotingAddr || "–"),
          el("td", {}, el("span", { class: "badge state-" + m.state }, m.state)),
          num(m.brokerId < 0 ? "–" : m.brokerId),
          el("td", {}, m.suffrage || "–"),
          num(m.term), num(fmtInt(m.lastLogIndex)), num(fmtInt(m.commitIndex)), num(fmtInt(m.appliedIndex)),
          el("td", { class: "num" + (m.lag > 100 ? " lag-high" : ""), "data-field": "lag" }, m.lag < 0 ? "–" : fmtInt(m.lag)),
          num(m.lastContactMillis < 0 ? "–" : m.lastContactMillis + " ms"),
          el("td", { class: m.gossip ? "gossip-" + m.gossip : "muted" }, m.gossip || "–"),
          el("td", { class: note ? "error clip" : "", title: note }, note),
          el("td", {}, canLead ? el("button", { type: "button", "data-action": "transfer", "data-group": g.brokerName, "data-target": m.id }, "Make leader") : ""));
      });
      const table = el("table", {},
        el("thead", {}, el("tr", {}, ...["Raft id", "Address", "State", "Broker id", "Suffrage", "Term", "Last index", "Commit", "Applied", "Lag", "Last contact", "Gossip", "Note", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, ...rows));
      groups.push(el("div", { class: "group", "data-group": g.brokerName, "data-leader": g.leaderId }, head, table));
    }
  }
  if (groups.length === 0) groups.push(el("p", { class: "muted" }, "no broker group is registered with this name server"));
  patchChildren($("cluster"), groups);
  const gs = v.gossip;
  $("gossip-summary").textContent = gs.enabled ? gs.members.length + " nodes" : "(gossipEnable is off)";
  fill($("gossip").tBodies[0], gs.members.map((m) => el("tr", {},
    el("td", {}, m.name), el("td", {}, m.addr), el("td", {}, m.kind), el("td", { class: "gossip-" + m.state }, m.state),
    el("td", {}, m.brokerName || ""), el("td", {}, m.raftId || ""), el("td", {}, m.role || ""), num(m.term || ""))));
}

// ---- topics ----

function renderTopics(v) {
  const showSystem = $("show-system-topics").checked;
  fill($("topics").tBodies[0], v.topics.filter((t) => showSystem || !t.system).map((t) => {
    const tr = el("tr", { class: "selectable" + (t.topic === state.selectedTopic ? " selected" : ""), "data-topic": t.topic },
      el("td", {}, t.topic), el("td", {}, t.brokers.join(", ")), num(t.queues), num(fmtInt(t.messages)), num(fmtInt(t.maxOffset)),
      el("td", { class: "num", "data-field": "rate" }, fmtRate(t.rate)), t.error ? el("td", { class: "error clip", title: t.error }, t.error) : el("td", {}, fmtTime(t.lastUpdate)));
    return tr;
  }));
}

function renderTopicDetail(d) {
  $("topic-detail").hidden = false;
  $("topic-detail-error").hidden = true;
  $("topic-detail-name").textContent = d.topic;
  fill($("topic-queues").tBodies[0], d.queueList.map((q) => el("tr", { "data-queue": q.brokerName + "/" + q.queueId },
    el("td", {}, q.brokerName), num(q.queueId), num(fmtInt(q.minOffset)), el("td", { class: "num", "data-field": "maxOffset" }, fmtInt(q.maxOffset)),
    num(fmtRate(q.rate)), el("td", {}, fmtTime(q.lastUpdate)))));
}

// ---- groups ----

function renderGroups(v) {
  // A broker group that did not answer leaves its queues out of every
  // lag below: say which, or the lag reads smaller than it is.
  const errs = Object.entries(v.errors || {}).sort(([a], [b]) => a.localeCompare(b));
  $("groups-errors").hidden = errs.length === 0;
  $("groups-errors").textContent = errs.length === 0 ? "" :
    "lag below leaves out the queues of " + errs.map(([name, e]) => name + " (" + e + ")").join("; ");
  const showSystem = $("show-system-groups").checked;
  fill($("groups").tBodies[0], v.groups.filter((g) => showSystem || !g.system).map((g) =>
    el("tr", { class: "selectable" + (g.group === state.selectedGroup ? " selected" : ""), "data-consumer-group": g.group },
      el("td", {}, g.group), el("td", {}, g.topics.join(", ")), el("td", { class: "num", "data-field": "lag" }, fmtInt(g.lag)),
      num(fmtRate(g.rate)), num(g.consumeTps.toFixed(1)), el("td", {}, fmtTime(g.lastTimestamp)))));
}

function renderGroupDetail(d) {
  $("group-detail").hidden = false;
  $("group-detail-error").hidden = true;
  $("group-detail-name").textContent = d.group;
  fill($("group-queues").tBodies[0], d.queueList.map((q) => el("tr", { "data-queue": q.topic + "/" + q.brokerName + "/" + q.queueId },
    el("td", {}, q.topic), el("td", {}, q.brokerName), num(q.queueId), num(fmtInt(q.brokerOffset)), num(fmtInt(q.consumerOffset)),
    el("td", { class: "num" + (q.lag > 0 ? " lag-high" : ""), "data-field": "lag" }, fmtInt(q.lag)), num(fmtRate(q.rate)), el("td", {}, fmtTime(q.lastTimestamp)))));
}

// ---- details ----

const details = {
  topic: { path: "/api/topics?topic=", selected: () => state.selectedTopic, render: renderTopicDetail },
  group: { path: "/api/groups?group=", selected: () => state.selectedGroup, render: renderGroupDetail },
};

// refreshDetail shows the selected topic's or group's queues. A failure
// (the topic deleted, the group gone) is shown in its own panel with the
// stale rows cleared; it neither stops the other panel's refresh nor
// marks the whole page as failing.
async function refreshDetail(kind) {
  const d = details[kind], name = d.selected();
  if (!name) return;
  try {
    const v = await getJSON(d.path + encodeURIComponent(name));
    if (d.selected() === name) d.render(v);
  } catch (e) {
    if (d.selected() !== name) return;
    $(kind + "-detail").hidden = false;
    $(kind + "-detail-name").textContent = name;
    $(kind + "-detail-error").textContent = e.message;
    $(kind + "-detail-error").hidden = false;
    fill($(kind + "-queues").tBodies[0], []);
  }
}

// ---- polling ----

let polls = 0;
async function poll() {
  try {
    const [cluster, topics, groups] = await Promise.all([getJSON("/api/cluster"), getJSON("/api/topics"), getJSON("/api/groups")]);
    renderCluster(cluster);
    renderTopics(topics);
    renderGroups(groups);
    await Promise.all([refreshDetail("topic"), refreshDetail("group")]);
    polls++;
    $("status").textContent = "live";
    $("status").className = "ok";
    $("updated").textContent = "updated " + new Date(cluster.time).toLocaleTimeString();
    document.body.dataset.polls = String(polls);
  } catch (e) {
    $("status").textContent = "error: " + e.message;
    $("status").className = "error";
  } finally {
    setTimeout(poll, refreshMs);
  }
}

// ---- actions ----

function showResult(text, ok, outcome) {
  const r = $("action-result");
  r.textContent = text;
  r.className = ok ? "ok" : "error";
  r.dataset.outcome = outcome || (ok ? "ok" : "refused");
}

$("cluster").addEventListener("click", async (ev) => {
  const b = ev.target.closest("button[data-action=transfer]");
  if (!b) return;
  const group = b.dataset.group, target = b.dataset.target;
  showResult("transferring leadership of " + group + "…", true);
  try {
    const r = await postJSON("/api/raft/transfer", { brokerName: group, targetId: target });
    showResult("leadership of " + group + " moved " + r.fromId + " → " + r.newLeaderId + " in " + r.tookMillis + " ms (term " + r.term + ")", true);
  } catch (e) {
    showResult("refused: " + e.message, false);
  }
});

function movesText(moves) {
  return moves.map((m) => m.brokerName + ": " + (m.from || "–") + " → " + (m.to || "–") + " " + m.result).join("; ");
}

$("balance").addEventListener("click", async () => {
  showResult("balancing leaders…", true);
  try {
    const r = await postJSON("/api/raft/balance", {});
    showResult(r.moves.length === 0 ? "leaders already balanced; nothing to move" : movesText(r.moves), true);
  } catch (e) {
    // A failed move answers an error status with every move's result.
    if (e.body && e.body.moves) showResult(e.message + " — " + movesText(e.body.moves), false, "failed");
    else showResult("refused: " + e.message, false);
  }
});

$("login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  state.creds = { ak: $("ak").value, sk: $("sk").value };
  const s = $("login-state");
  try {
    const r = await getJSON("/api/auth");
    if (!r.authenticated) throw new Error("not authenticated");
    s.textContent = "signed in as " + state.creds.ak;
    s.className = "ok";
  } catch (e) {
    state.creds = null;
    s.textContent = "sign-in refused: " + e.message;
    s.className = "error";
  }
});

$("topics").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr[data-topic]");
  if (!tr) return;
  state.selectedTopic = tr.dataset.topic;
  for (const r of $("topics").tBodies[0].rows) r.classList.toggle("selected", r === tr);
  refreshDetail("topic");
});

$("groups").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr[data-consumer-group]");
  if (!tr) return;
  state.selectedGroup = tr.dataset.consumerGroup;
  for (const r of $("groups").tBodies[0].rows) r.classList.toggle("selected", r === tr);
  refreshDetail("group");
});

$("lookup").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams();
  for (const [k, id] of [["topic", "lookup-topic"], ["key", "lookup-key"], ["id", "lookup-id"]]) {
    const v = $(id).value.trim();
    if (v) q.set(k, v);
  }
  const out = $("lookup-result");
  out.replaceChildren(el("p", { class: "muted" }, "looking up…"));
  try {
    const r = await getJSON("/api/message?" + q.toString());
    out.replaceChildren(...r.messages.map((m) => {
      const rows = [["msgId", m.msgId], ["offsetMsgId", m.offsetMsgId], ["topic", m.topic], ["tags", m.tags || ""], ["keys", (m.keys || []).join(" ")],
        ["queue", m.queueId + " @ " + m.queueOffset], ["stored", fmtISO(m.storeTimestamp) + " on " + m.storeHost],
        ["born", fmtISO(m.bornTimestamp) + " at " + m.bornHost], ["reconsumes", m.reconsumeTimes],
        ["body (" + m.bodySize + " B, " + m.bodyEncoding + (m.bodyTruncated ? ", the first 64 KiB" : "") + ")", m.body]];
      const dl = el("dl", { class: "message", "data-msg-id": m.msgId });
      for (const [k, v] of rows) dl.append(el("dt", {}, k), el("dd", { "data-field": k.split(" ")[0] }, v));
      return dl;
    }));
  } catch (e) {
    out.replaceChildren(el("p", { class: "error" }, "lookup failed: " + e.message));
  }
});

$("show-system-topics").addEventListener("change", () => getJSON("/api/topics").then(renderTopics).catch(() => {}));
$("show-system-groups").addEventListener("change", () => getJSON("/api/groups").then(renderGroups).catch(() => {}));

poll();
