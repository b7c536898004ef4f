// dblock ui: renders the state the server pushes (server-sent events from
// "events", or "state" polled where those are missing). Every key, owner
// and value is set as text (textContent, attributes through setAttribute):
// never as HTML.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const meta = (name) => document.querySelector('meta[name="' + name + '"]').getAttribute("content");
  const token = meta("dblock-token");
  const allowUnlock = meta("dblock-allow-unlock") === "true";
  const interval = Number(meta("dblock-interval")) || 1000;
  const $ = (id) => document.getElementById(id);

  let last = null; // the latest state
  let timelineKey = null; // the key whose timeline is open
  let timelineAt = 0; // when its history was last fetched

  // el makes an element with a class and text.
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // dur renders milliseconds for people: 850ms, 12.3s, 4m05s, 2h10m.
  function dur(ms) {
    if (ms === null || ms === undefined || ms < 0) return "–";
    if (ms < 1000) return ms + "ms";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }

  function setStatus(text, cls) {
    const s = $("status");
    s.textContent = text;
    s.className = cls || "";
  }

  // matches says whether the search box's words are all in the group.
  function matches(g, q) {
    if (!q) return true;
    const hay = [g.kind, g.name];
    for (const h of g.holders) hay.push(h.key, h.owner, h.what);
    for (const w of g.waiters) hay.push(w.key, w.owner, w.what);
    const text = hay.join("\n").toLowerCase();
    return q.toLowerCase().split(/\s+/).filter(Boolean).every((word) => text.includes(word));
  }

  // The words of the counts: one, more (or none).
  const countWords = {
    locks: ["lock", "locks"], leaders: ["leader", "leaders"], permits: ["permit", "permits"], shared: ["shared", "shared"],
    waiting: ["waiting", "waiting"], chains: ["chain", "chains"], cycles: ["cycle", "cycles"],
  };

  // ownerParts splits an owner for display: dblock's own owners are
  // host:pid followed by 32 hex digits, shown as host:pid and the first
  // four of them (all of it on hover); any other owner is shown whole.
  function ownerParts(o) {
    const m = /^(.*:\d+):([0-9a-f]{32})$/.exec(o);
    return m ? { main: m[1], rest: "#" + m[2].slice(0, 4) } : { main: o, rest: "" };
  }

  // ownerText is an owner as the page shows it, on one line of text.
  function ownerText(o) {
    const p = ownerParts(o);
    return p.rest ? p.main + " " + p.rest : p.main;
  }

  // ownerEl is an owner as an element: host:pid, the rest muted, the
  // whole owner on hover.
  function ownerEl(tag, cls, o) {
    const p = ownerParts(o);
    const e = el(tag, cls, p.main);
    if (p.rest) {
      e.append(" ", el("span", "owner-rest", p.rest));
      e.title = o;
    }
    return e;
  }

  function render(st) {
    last = st;
    for (const k of Object.keys(countWords)) {
      const n = st.counts[k];
      $("count-" + k).textContent = String(n);
      $("label-" + k).textContent = countWords[k][n === 1 ? 0 : 1];
    }
    $("count-cycles").parentElement.classList.toggle("alarm", st.counts.cycles > 0);
    const err = $("error");
    err.hidden = !st.error;
    err.textContent = st.error ? "Cannot read the lock table: " + st.error : "";
    renderChains(st.chains);
    const q = $("search").value.trim();
    const groups = $("groups");
    const shown = st.groups.filter((g) => matches(g, q));
    groups.replaceChildren(...shown.map(renderGroup));
    const empty = $("empty");
    empty.hidden = shown.length > 0;
    empty.textContent = st.groups.length === 0 ? "Nothing is held or waited for." : "Nothing matches the search.";
    if (timelineKey && Date.now() - timelineAt > 2000) loadTimeline();
  }

  function renderChains(chains) {
    $("chains-section").hidden = chains.length === 0;
    $("chains").replaceChildren(...chains.map((c) => {
      const li = el("li", c.cycle ? "cycle" : "chain");
      if (c.cycle) li.append(el("span", "badge cycle", "cycle"), " ");
      c.steps.forEach((s, i) => {
        if (i > 0) li.append(el("span", "arrow", " → "));
        li.append(ownerEl("span", "owner", s.owner), " waits for ", el("span", "key", s.what));
        if (s.held_by.length) {
          li.append(" held by ");
          s.held_by.forEach((o, j) => li.append(...(j > 0 ? [", "] : []), ownerEl("span", "owner", o)));
        }
      });
      return li;
    }));
  }

  const kindLabel = { lock: "lock", leader: "leader of", semaphore: "semaphore", shared: "shared" };

  function renderGroup(g) {
    const a = el("article", "group kind-" + g.kind);
    a.dataset.kind = g.kind;
    a.dataset.name = g.name;
    const h = el("h3");
    h.append(el("span", "kind", kindLabel[g.kind] || g.kind), " ", el("span", "name", g.name));
    if (g.kind === "semaphore") {
      const n = g.permits ? String(g.permits) : "≥" + (g.max_slot + 1);
      h.append(" ", el("span", "usage", g.used + "/" + (g.used === 0 && !g.permits ? "?" : n) + " used"));
    } else if (g.kind === "shared") {
      h.append(" ", el("span", "usage", g.readers + " reader" + (g.readers === 1 ? "" : "s") + ", " + (g.writer ? "writer" : "no writer")));
    }
    a.append(h);
    if (g.holders.length) a.append(holdersTable(g));
    else a.append(el("p", "muted", "not held"));
    if (g.waiters.length) {
      const ul = el("ul", "waiters");
      for (const w of g.waiters) ul.append(renderWaiter(w));
      a.append(ul);
    }
    return a;
  }

  // The columns of every card's table, with their widths (the same in
  // every card, so that they line up down the page): what the holder holds
  // the key as, owner, token, depth, held for, expires in, data, buttons.
  const holderCols = [["as", "9em"], ["owner", "auto"], ["token", "6em"], ["depth", "4em"], ["held for", "6.5em"],
    ["expires in", "6.5em"], ["data", "auto"], ["", allowUnlock ? "12em" : "6.5em"]];

  // role says as what a holder holds its key: lock, leader, writer,
  // permit 2, reader 61 (the card's title names the key).
  function role(h) {
    return h.slot >= 0 && (h.role === "permit" || h.role === "reader") ? h.role + " " + h.slot : h.role;
  }

  function holdersTable(g) {
    const t = el("table", "holders");
    const cols = el("colgroup");
    for (const [, w] of holderCols) {
      const c = el("col");
      if (w !== "auto") c.style.width = w;
      cols.append(c);
    }
    t.append(cols);
    const head = el("tr");
    for (const [c] of holderCols) head.append(el("th", "", c));
    const thead = el("thead");
    thead.append(head);
    t.append(thead);
    const body = el("tbody");
    for (const h of g.holders) {
      const tr = el("tr", "holder");
      tr.id = h.id;
      tr.dataset.key = h.key;
      const as = el("td", "role", role(h));
      as.title = h.what;
      tr.append(as, ownerEl("td", "owner", h.owner), el("td", "num", h.token), el("td", "num", h.depth),
        el("td", "num", dur(h.held_for_ms)), el("td", "num", dur(h.expires_in_ms)), el("td", "data", h.data || ""));
      const act = el("td", "actions");
      const tl = el("button", "timeline", "timeline");
      tl.type = "button";
      tl.addEventListener("click", () => openTimeline(h.key));
      act.append(tl);
      if (allowUnlock) {
        const u = el("button", "unlock", "force-unlock");
        u.type = "button";
        u.addEventListener("click", () => confirmUnlock(h));
        act.append(" ", u);
      }
      tr.append(act);
      body.append(tr);
    }
    t.append(body);
    return t;
  }

  function renderWaiter(w) {
    const li = el("li", "waiter" + (w.chain ? " " + w.chain : ""));
    li.dataset.key = w.key;
    li.append(el("span", "label", "waiting"), " ", ownerEl("span", "owner", w.owner), " for ", el("span", "key", w.what),
      " ", el("span", "muted", dur(w.waited_ms) + (w.position ? ", place " + w.position : "")));
    if (w.chain) li.append(" ", el("span", "badge " + w.chain, w.chain));
    if (w.blocked_by.length) {
      li.append(" ", el("span", "label", "blocked by"), " ");
      w.blocked_by.forEach((b, i) => {
        if (i > 0) li.append(", ");
        const link = el(b.holder_id ? "a" : "span", "blocker", ownerText(b.owner) + " (" + b.what + ")");
        link.title = b.owner;
        if (b.holder_id) {
          link.setAttribute("href", "#" + b.holder_id);
          link.addEventListener("click", (e) => {
            e.preventDefault();
            flash(document.getElementById(b.holder_id));
          });
        }
        li.append(link);
      });
    }
    if (w.holds && w.holds.length) li.append(" ", el("span", "muted", "holding " + w.holds.join(", ")));
    return li;
  }

  function flash(node) {
    if (!node) return;
    node.scrollIntoView({ block: "center" });
    node.classList.remove("flash");
    void node.offsetWidth; // restart the animation
    node.classList.add("flash");
  }

  // Force-unlock, behind a confirmation in the page.
  let pending = null;
  function confirmUnlock(h) {
    pending = h.key;
    $("confirm-text").textContent = "Force-unlock " + h.what + ", held by " + h.owner + " (token " + h.token + ")? Its holder loses it at once.";
    $("confirm").showModal();
  }

  async function unlock(key) {
    try {
      const r = await fetch("unlock", {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Dblock-Token": token },
        body: JSON.stringify({ key: key }),
      });
      const body = await r.json();
      setStatus(r.ok ? "force-unlocked " + key + " (was " + body.owner + ")" : "force-unlock of " + key + " failed: " + body.error, r.ok ? "" : "bad");
    } catch (e) {
      setStatus("force-unlock of " + key + " failed: " + e, "bad");
    }
  }

  // The timeline of a key, from its history.
  function openTimeline(key) {
    timelineKey = key;
    $("timeline-section").hidden = false;
    $("timeline-key").textContent = key;
    loadTimeline().then(() => $("timeline-section").scrollIntoView());
  }

  async function loadTimeline() {
    const key = timelineKey;
    timelineAt = Date.now();
    try {
      const r = await fetch("history?key=" + encodeURIComponent(key) + "&since=" + encodeURIComponent($("timeline-since").value));
      const h = await r.json();
      if (key !== timelineKey) return;
      const note = $("timeline-note");
      if (h.error) note.textContent = "Cannot read the history: " + h.error;
      else if (h.no_table) note.textContent = "This table has no history table: run dblock migrate --history (PostgreSQL, MySQL, MariaDB, SQLite).";
      else if (h.events.length === 0) note.textContent = "No events in this stretch (the history is kept when the table is migrated with --history, on PostgreSQL, MySQL, MariaDB and SQLite).";
      else if (h.truncated) note.textContent = "The oldest " + h.events.length + " events of this stretch; there are more: choose a shorter stretch.";
      else note.textContent = h.events.length + " events";
      $("timeline").replaceChildren(drawTimeline(h));
    } catch (e) {
      $("timeline-note").textContent = "Cannot read the history: " + e;
    }
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  // leases turns events into the leases they tell of: owner, token, start,
  // end and how it ended (released, lost, force-unlocked, deleted, or
  // open: still held).
  function leases(h) {
    const from = Date.parse(h.from), now = Date.parse(h.now);
    const open = new Map(), out = [];
    for (const e of h.events) {
      const t = Date.parse(e.time);
      if (e.event === "acquired") {
        const l = { owner: e.owner, token: e.token, start: t, end: null, how: "open", detail: e.detail || "" };
        open.set(e.token, l);
        out.push(l);
        continue;
      }
      if (e.depth !== 0) continue; // re-entered, or released one level
      let l = open.get(e.token);
      if (!l) { // taken before the window
        l = { owner: e.owner, token: e.token, start: e.held_ms !== null ? Math.max(from, t - e.held_ms) : from, end: null, how: "open" };
        out.push(l);
      }
      open.delete(e.token);
      l.end = t;
      l.how = e.event === "released" ? "released" : e.event;
      l.detail = e.detail || "";
    }
    for (const l of out) if (l.end === null) l.end = Math.max(now, l.start);
    return { from: from, now: now, leases: out.sort((a, b) => a.start - b.start) };
  }

  // textWidth measures text as the timeline writes it (11px, the page's
  // font), so that the owners' lane labels get the room they need.
  const measure = document.createElement("canvas").getContext("2d");
  function textWidth(text) {
    measure.font = "11px " + getComputedStyle(document.body).fontFamily;
    return measure.measureText(text).width;
  }

  // fit shortens text with "…" until it is at most w wide.
  function fit(text, w) {
    if (textWidth(text) <= w) return text;
    let n = text.length;
    while (n > 1 && textWidth(text.slice(0, n) + "…") > w) n--;
    return text.slice(0, n) + "…";
  }

  function drawTimeline(h) {
    const { from: since, now, leases: ls } = leases(h);
    // The picture spans the events (with a margin), not all of the
    // stretch asked for: a few seconds of activity in an hour stay legible.
    const first = ls.length ? Math.min(...ls.map((l) => l.start)) : since;
    const from = Math.max(since, first - Math.max(1000, (now - first) / 20));
    const owners = [...new Set(ls.map((l) => l.owner))];
    // The page's width; the lane labels' column as wide as the widest
    // (an owner as the page shows it), up to two fifths of it.
    const width = Math.max(480, $("timeline").clientWidth || 960);
    const labelRoom = Math.min(width * 0.4, Math.max(textWidth("free"), ...owners.map((o) => textWidth(ownerText(o)))));
    const left = Math.ceil(labelRoom) + 24, lane = 24, top = 26;
    const height = top + (owners.length + 1) * lane + 30;
    const x = (t) => left + ((t - from) / Math.max(1, now - from)) * (width - left - 16);
    const s = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img", class: "timeline" });
    s.append(svg("title", {}, "who held " + h.key + " when"));
    // time axis: how long ago, the clock time on hover
    for (let i = 0; i <= 4; i++) {
      const t = from + (i / 4) * (now - from);
      s.append(svg("line", { x1: x(t), x2: x(t), y1: top - 6, y2: height - 24, class: "grid" }));
      const label = i === 4 ? "now" : dur(Math.round(now - t)) + " ago";
      const a = svg("text", { x: x(t), y: height - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "axis" }, label);
      a.append(svg("title", {}, new Date(t).toLocaleString()));
      s.append(a);
    }
    // legend
    let lx = left;
    for (const [cls, label] of [["released", "held, released"], ["open", "still held"], ["lost", "lost (lease ran out)"], ["force-unlocked", "force-unlocked"], ["gap", "free"]]) {
      s.append(svg("rect", { x: lx, y: 4, width: 12, height: 10, class: cls === "gap" ? "gap" : "lease " + cls }));
      s.append(svg("text", { x: lx + 16, y: 13, class: "axis" }, label));
      lx += 24 + textWidth(label);
    }
    owners.forEach((o, i) => {
      const t = svg("text", { x: left - 8, y: top + i * lane + 15, "text-anchor": "end", class: "lane" }, fit(ownerText(o), labelRoom));
      t.append(svg("title", {}, o));
      s.append(t);
    });
    const freeY = top + owners.length * lane;
    s.append(svg("text", { x: left - 8, y: freeY + 15, "text-anchor": "end", class: "lane muted" }, "free"));
    // gaps: where no lease holds the key
    let covered = from;
    const gaps = [];
    for (const l of ls) {
      if (l.start > covered) gaps.push([covered, l.start]);
      covered = Math.max(covered, l.end);
    }
    if (ls.length && covered < now) gaps.push([covered, now]);
    for (const [a, b] of gaps) {
      const r = svg("rect", { x: x(a), y: freeY + 4, width: Math.max(1, x(b) - x(a)), height: lane - 8, class: "gap bar" });
      r.append(svg("title", {}, "free for " + dur(b - a)));
      s.append(r);
    }
    for (const l of ls) {
      const y = top + owners.indexOf(l.owner) * lane;
      const r = svg("rect", { x: x(l.start), y: y + 4, width: Math.max(2, x(l.end) - x(l.start)), height: lane - 8, rx: 3, class: "lease bar " + l.how });
      r.append(svg("title", {}, l.owner + ", token " + l.token + ": from " + new Date(l.start).toLocaleTimeString() + " for " + dur(l.end - l.start) +
        (l.how === "open" ? ", still held" : ", " + l.how) + (l.detail ? " (" + l.detail + ")" : "")));
      s.append(r);
      if (l.how === "lost" || l.how === "force-unlocked" || l.how === "deleted") {
        const cx = x(l.end), cy = y + lane / 2;
        const m = svg("g", { class: "mark " + l.how });
        m.append(svg("title", {}, l.how + (l.detail ? ": " + l.detail : "")));
        m.append(svg("path", { d: "M" + (cx - 5) + " " + (cy - 5) + " l10 10 m0 -10 l-10 10" }));
        s.append(m);
      }
    }
    return s;
  }

  // Wiring.
  $("search").addEventListener("input", () => last && render(last));
  $("timeline-close").addEventListener("click", () => {
    timelineKey = null;
    $("timeline-section").hidden = true;
  });
  $("timeline-since").addEventListener("change", () => timelineKey && loadTimeline());
  $("confirm-yes").addEventListener("click", () => {
    $("confirm").close();
    if (pending !== null) unlock(pending);
    pending = null;
  });
  $("confirm-no").addEventListener("click", () => {
    $("confirm").close();
    pending = null;
  });

  function poll() {
    fetch("state").then((r) => r.json()).then((st) => {
      render(st);
      setStatus("live (polling)");
    }).catch((e) => setStatus("cannot reach the server: " + e, "bad")).finally(() => setTimeout(poll, interval));
  }

  if (window.EventSource) {
    const es = new EventSource("events");
    es.onopen = () => setStatus("live");
    es.onmessage = (e) => render(JSON.parse(e.data));
    es.onerror = () => setStatus("reconnecting…", "bad");
  } else {
    poll();
  }
})();
