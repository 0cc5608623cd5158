(function () {
  "use strict";
  // Every value shown comes from the JSON data block and is written with textContent only:
  // scraped strings are data, never markup.
  var D = JSON.parse(document.getElementById("page-data").textContent);
  var COLS = D.columns, byKey = {};
  COLS.forEach(function (c) { byKey[c.key] = c; });
  var N = D.offers.n, codes = {}, dicts = {};
  Object.keys(D.offers.cols).forEach(function (k) {
    codes[k] = Int32Array.from(D.offers.cols[k].codes);
    dicts[k] = D.offers.cols[k].dict;
  });
  var $ = function (id) { return document.getElementById(id); };
  var narrow = window.matchMedia("(max-width: 700px)").matches;
  var HOUR = 3600e3, ROW_H = 24;

  // -- data age, judged now in the browser from the last successful scrape ----------------------
  var prov = {};
  D.providers.forEach(function (p) { prov[p.provider] = p; });
  var provOfCode = dicts.provider.map(function (name) { return prov[name] || null; });
  function ageHours(p) { return p && p.last_ok_ms != null ? (Date.now() - p.last_ok_ms) / HOUR : null; }
  function stateOf(p) {  // the latest attempt's state first, as `gpuledger status` judges it
    if (!p) return "never";
    if (p.not_configured) return "not_configured";  // credentials not set: skipped, not failed
    if (p.failed) return "failed";
    if (p.last_ok_ms == null) return "never";
    return ageHours(p) > D.stale_after_hours ? "stale" : "ok";
  }
  function ageText(h) {
    if (h == null) return "never";
    if (h < 1) return Math.max(Math.round(h * 60), 0) + " min";
    if (h < 48) return Math.round(h) + " h";
    return Math.round(h / 24) + " d";
  }
  // The age column sorts by the provider's last successful scrape, newest first.
  (function () {
    var ranked = provOfCode.map(function (p, i) { return i; }).filter(function (i) {
      return provOfCode[i] && provOfCode[i].last_ok_ms != null;
    }).sort(function (a, b) { return provOfCode[b].last_ok_ms - provOfCode[a].last_ok_ms; });
    var rank = new Int32Array(provOfCode.length).fill(-1);
    ranked.forEach(function (c, r) { rank[c] = r; });
    var pc = codes.provider, age = new Int32Array(N);
    for (var i = 0; i < N; i++) age[i] = rank[pc[i]];
    codes.age = age;
  })();

  // -- formatting -------------------------------------------------------------------------------
  var DOLLARS = new Intl.NumberFormat("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});
  function money(x) {
    if (x == null) return "";
    if (x === 0) return "free";
    return "$" + (x >= 1 ? DOLLARS.format(x) : x.toFixed(3));
  }
  var FMT = {
    text: function (v) { return v == null ? "" : String(v); },
    num: function (v) { return v == null ? "" : String(v); },
    money: money,
    pct: function (v) { return v == null ? "" : v.toFixed(0) + "%"; },
    share: function (v) { return v == null ? "" : (v * 100).toFixed(1) + "%"; }
  };
  function cellText(col, i) {
    var c = codes[col.key][i];
    if (col.key === "age") return ageText(ageHours(provOfCode[codes.provider[i]]));
    if (col.key === "egress") {
      var src = dicts.egress_source[codes.egress_source[i]];
      if (src === "none" || c < 0) return "?";
      return money(dicts.egress[c]) + (src === "provider" ? "*" : "");
    }
    return c < 0 ? "" : FMT[col.fmt](dicts[col.key][c]);
  }

  // -- state, in the URL fragment ---------------------------------------------------------------
  var KEYS = ["view", "gpu", "vram", "provider", "region", "option", "price", "sort", "cols", "open", "model",
              "method", "tokens", "runs", "spot"];
  var S = {};
  function readHash() {
    var p = new URLSearchParams(location.hash.slice(1));
    KEYS.forEach(function (k) { S[k] = p.get(k) || ""; });
  }
  // The address is written once the current change is done (history calls cross to the
  // browser process, and the view should not wait for them).
  var hashQueued = false;
  function writeHash() {
    if (hashQueued) return;
    hashQueued = true;
    queueMicrotask(function () { hashQueued = false; writeHashNow(); });
  }
  function writeHashNow() {
    var p = new URLSearchParams();
    KEYS.forEach(function (k) { if (S[k]) p.set(k, S[k]); });
    var h = p.toString();
    history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
  }
  function visibleCols() {
    if (S.cols) {
      var want = S.cols.split(",");
      var cols = COLS.filter(function (c) { return want.indexOf(c.key) >= 0; });
      if (cols.length) return cols;
    }
    return COLS.filter(function (c) { return narrow ? c.narrow > 0 : c.wide; });
  }

  // -- filter and sort: integer work on dictionary codes (a code is its value's sort rank) -------
  var identity = new Uint32Array(N);
  for (var ii = 0; ii < N; ii++) identity[ii] = ii;
  var order = identity, view = identity, sortedBy = "";
  function sortRows() {
    // A counting sort on the codes (dense ranks): linear, stable (ties keep the default order),
    // blanks last either way.
    if (S.sort === sortedBy) return;
    sortedBy = S.sort;
    var desc = S.sort.charAt(0) === "-", key = desc ? S.sort.slice(1) : S.sort;
    if (!key || !codes[key]) { order = identity; return; }
    var c = codes[key], size = 0, i;
    for (i = 0; i < N; i++) if (c[i] >= size) size = c[i] + 1;
    var start = new Int32Array(size + 2);  // slot size: blanks
    for (i = 0; i < N; i++) start[(c[i] < 0 ? size : desc ? size - 1 - c[i] : c[i]) + 1]++;
    for (i = 1; i <= size + 1; i++) start[i] += start[i - 1];
    order = new Uint32Array(N);
    for (i = 0; i < N; i++) order[start[c[i] < 0 ? size : desc ? size - 1 - c[i] : c[i]]++] = i;
  }
  function mask(key, test) {
    var d = dicts[key], m = new Uint8Array(d.length);
    for (var j = 0; j < d.length; j++) m[j] = test(d[j]) ? 1 : 0;
    return m;
  }
  function filterRows() {
    var preds = [];
    function on(key, test) { var m = mask(key, test), c = codes[key]; preds.push(function (i) { return m[c[i]] === 1; }); }
    if (S.gpu) on("gpu", function (v) { return v === S.gpu; });
    if (S.provider) on("provider", function (v) { return v === S.provider; });
    if (S.option === "reclaimable") on("option", function (v) { return v !== "on_demand"; });
    else if (S.option) on("option", function (v) { return v === S.option; });
    var vram = parseFloat(S.vram), price = parseFloat(S.price);
    if (!isNaN(vram)) on("vram", function (v) { return v >= vram; });
    if (!isNaN(price)) on("price", function (v) { return v <= price; });
    if (S.region) {
      var q = S.region.toLowerCase(), contains = function (v) { return v.toLowerCase().indexOf(q) >= 0; };
      var mr = mask("region", contains), mz = mask("zone", contains), cr = codes.region, cz = codes.zone;
      preds.push(function (i) { return mr[cr[i]] === 1 || mz[cz[i]] === 1; });
    }
    if (!preds.length) { view = order; return; }
    var out = new Uint32Array(N), n = 0, np = preds.length;
    rows: for (var x = 0; x < N; x++) {
      var i = order[x];
      for (var p = 0; p < np; p++) if (!preds[p](i)) continue rows;
      out[n++] = i;
    }
    view = out.subarray(0, n);
  }

  // -- the offers table, rendered on demand -----------------------------------------------------
  var table = $("offers"), scroller = $("scroller"), tbody = table.tBodies[0], cols = [];
  function buildHead() {
    cols = visibleCols();
    var cg = document.createElement("colgroup"), tr = document.createElement("tr"), width = 0;
    cols.forEach(function (c) {
      var col = document.createElement("col");
      var w = narrow && c.narrow ? c.narrow : c.width;
      col.style.width = w + "px";
      width += w;
      cg.appendChild(col);
      var th = document.createElement("th");
      th.textContent = c.label;
      th.title = c.title;
      th.dataset.key = c.key;
      th.tabIndex = 0;
      if (c.fmt !== "text") th.className = "r";
      var s = S.sort === c.key ? "ascending" : S.sort === "-" + c.key ? "descending" : "";
      if (s) th.setAttribute("aria-sort", s);
      tr.appendChild(th);
    });
    var old = table.querySelector("colgroup");
    if (old) old.remove();
    table.insertBefore(cg, table.tHead);
    table.tHead.replaceChildren(tr);
    table.style.width = Math.max(width, scroller.clientWidth - 2) + "px";
    resetPool();
  }
  // Rows are reused from a pool: a re-render only rewrites the text of the cells on screen.
  var topPad = padRow(), bottomPad = padRow(), pool = [];
  function padRow() {
    var tr = document.createElement("tr");
    tr.className = "pad";
    tr.appendChild(document.createElement("td"));
    return tr;
  }
  function resetPool() {
    pool = [];
    tbody.replaceChildren();
  }
  function poolRow(x) {
    while (pool.length <= x) {
      var tr = document.createElement("tr");
      for (var k = 0; k < cols.length; k++) {
        var td = document.createElement("td");
        td.className = cols[k].key === "age" ? "r age" : cols[k].fmt !== "text" ? "r" : "";
        tr.appendChild(td);
      }
      pool.push(tr);
    }
    return pool[x];
  }
  function setPad(tr, h) {
    tr.hidden = h <= 0;
    tr.firstChild.colSpan = cols.length;
    tr.firstChild.style.height = h + "px";
  }
  function renderRows() {
    var st = scroller.scrollTop, h = scroller.clientHeight || 600;
    var first = Math.max(0, Math.floor(st / ROW_H) - 4);
    var last = Math.min(view.length, Math.ceil((st + h) / ROW_H) + 4);
    var want = last - first;
    for (var x = 0; x < want; x++) {
      var i = view[first + x], tr = poolRow(x), cls = "f-" + stateOf(provOfCode[codes.provider[i]]);
      if (tr.className !== cls) tr.className = cls;
      for (var k = 0; k < cols.length; k++) {
        var td = tr.cells[k], text = cellText(cols[k], i);
        if (td.textContent !== text) {
          td.textContent = text;
          td.title = cols[k].fmt === "text" && text.length > 14 ? text : "";
        }
      }
    }
    setPad(topPad, first * ROW_H);
    setPad(bottomPad, (view.length - last) * ROW_H);
    var kids = tbody.children;
    if (kids.length !== want + 2 || kids[0] !== topPad || kids[want] !== pool[want - 1]) {
      var frag = document.createDocumentFragment();
      frag.appendChild(topPad);
      for (x = 0; x < want; x++) frag.appendChild(pool[x]);
      frag.appendChild(bottomPad);
      tbody.replaceChildren(frag);
    }
    $("count").textContent = String(view.length);
  }
  var pending = false;
  scroller.addEventListener("scroll", function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; renderRows(); });
  });
  function refreshOffers(resetScroll) {
    sortRows();
    filterRows();
    if (resetScroll) scroller.scrollTop = 0;
    renderRows();
  }

  // -- the filter form and the column picker ----------------------------------------------------
  var FIELDS = {gpu: "f-gpu", vram: "f-vram", provider: "f-provider", region: "f-region", option: "f-option",
                price: "f-price"};
  function syncForm() {
    Object.keys(FIELDS).forEach(function (k) { $(FIELDS[k]).value = S[k]; });
    var shown = visibleCols().map(function (c) { return c.key; });
    Array.prototype.forEach.call($("picker").querySelectorAll("input"), function (box) {
      box.checked = shown.indexOf(box.value) >= 0;
    });
  }
  function onForm() {
    Object.keys(FIELDS).forEach(function (k) { S[k] = $(FIELDS[k]).value.trim(); });
    writeHash();
    refreshOffers(true);
  }
  var form = $("filters");
  form.addEventListener("input", onForm);
  form.addEventListener("change", function (e) { if (!e.target.closest("#picker")) onForm(); });
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  $("clear").addEventListener("click", function () {
    KEYS.forEach(function (k) { if (FIELDS[k] || k === "sort") S[k] = ""; });
    var colsChanged = S.cols !== "";
    S.cols = "";
    writeHash();
    syncForm();
    if (colsChanged) buildHead(); else markSort();
    refreshOffers(true);
  });
  var fs = $("picker").querySelector("fieldset");
  COLS.forEach(function (c) {
    var label = document.createElement("label"), box = document.createElement("input");
    box.type = "checkbox";
    box.value = c.key;
    box.addEventListener("change", function () {
      var keys = Array.prototype.filter.call(fs.querySelectorAll("input"), function (b) { return b.checked; })
        .map(function (b) { return b.value; });
      S.cols = keys.join(",");
      writeHash();
      buildHead();
      renderRows();
    });
    label.appendChild(box);
    label.appendChild(document.createTextNode(c.label));
    fs.appendChild(label);
  });
  function markSort() {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      var k = th.dataset.key, s = S.sort === k ? "ascending" : S.sort === "-" + k ? "descending" : "";
      if (s) th.setAttribute("aria-sort", s); else th.removeAttribute("aria-sort");
    });
  }
  function sortBy(key) {
    S.sort = S.sort === key ? "-" + key : key;
    writeHash();
    markSort();
    refreshOffers(true);
  }
  table.tHead.addEventListener("click", function (e) {
    var th = e.target.closest("th");
    if (th) sortBy(th.dataset.key);
  });
  table.tHead.addEventListener("keydown", function (e) {
    var th = e.target.closest("th");
    if (th && e.key === "Enter") sortBy(th.dataset.key);
  });

  // -- the GPU summary --------------------------------------------------------------------------
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text != null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function best(b) {  // the price, then who sells it (under it on a phone)
    var td = el("td", b ? money(b.price) : "–", "r");
    if (b) td.appendChild(el("span", b.provider, "by"));
    return td;
  }
  function gpuDetail(g) {
    var tr = el("tr", null, "detail"), td = el("td");
    td.colSpan = 9;
    var t = el("table"), head = el("tr");
    ["provider", "cheapest on-demand", "cheapest spot / interruptible", "offers"].forEach(function (h, i) {
      head.appendChild(el("th", h, i ? "r" : ""));
    });
    t.appendChild(el("thead")).appendChild(head);
    var body = t.appendChild(el("tbody"));
    g.providers.forEach(function (p) {
      var r = el("tr");
      r.appendChild(el("td", p.provider));
      r.appendChild(el("td", p.on_demand == null ? "–" : money(p.on_demand), "r"));
      r.appendChild(el("td", p.spot == null ? "–" : money(p.spot), "r"));
      r.appendChild(el("td", String(p.offers), "r"));
      body.appendChild(r);
    });
    td.appendChild(t);
    var b = el("button", "show its " + g.offers + " offers", "link show-offers");
    b.type = "button";
    b.addEventListener("click", function () {
      KEYS.forEach(function (k) { if (FIELDS[k]) S[k] = ""; });
      S.gpu = g.gpu;
      setView("offers");
    });
    td.appendChild(b);
    tr.appendChild(td);
    return tr;
  }
  function renderGpus() {
    var body = $("gpus").tBodies[0], frag = document.createDocumentFragment(), open = S.open.split(",");
    var variants = {}, family = null;
    D.gpus.forEach(function (g) { variants[g.family] = (variants[g.family] || 0) + 1; });
    D.gpus.forEach(function (g) {
      var grouped = variants[g.family] > 1;
      if (grouped && g.family !== family) {  // a family's variants under its name
        var head = el("tr", null, "fam"), name = el("td", g.family + " ");
        name.colSpan = 9;
        name.appendChild(el("span", variants[g.family] + " variants", "muted"));
        head.appendChild(name);
        frag.appendChild(head);
      }
      family = g.family;
      var tr = el("tr", null, grouped ? "gpu var" : "gpu"), isOpen = open.indexOf(g.gpu) >= 0;
      tr.tabIndex = 0;
      tr.dataset.gpu = g.gpu;
      tr.setAttribute("aria-expanded", isOpen ? "true" : "false");
      tr.appendChild(el("td", g.gpu));
      tr.appendChild(best(g.best_on_demand));
      tr.appendChild(best(g.best_spot));
      [[g.vram_gb == null ? "" : g.vram_gb + " GB", "r"], [g.memory_type || "", "w"],
       [g.bf16 == null ? "?" : g.bf16 ? "yes" : "no", "w"], [g.fp8 == null ? "?" : g.fp8 ? "yes" : "no", "w"],
       [String(g.offers), "r w"], [String(g.providers.length), "r w"]].forEach(function (c) {
        tr.appendChild(el("td", c[0], c[1]));
      });
      function toggle() {
        var now = open.indexOf(g.gpu) >= 0;
        open = now ? open.filter(function (x) { return x !== g.gpu; }) : open.concat([g.gpu]);
        S.open = open.filter(Boolean).join(",");
        writeHash();
        renderGpus();
      }
      tr.addEventListener("click", toggle);
      tr.addEventListener("keydown", function (e) { if (e.key === "Enter") toggle(); });
      frag.appendChild(tr);
      if (isOpen) frag.appendChild(gpuDetail(g));
    });
    body.replaceChildren(frag);
  }

  // -- the fine-tuning view: each answer's pool, costed for the job the reader picks -------------
  // The arithmetic is the recommender's (warehouse/recommender/ranking.py): hours = training x the
  // spot factor + set-up, billed up to the increment and minimum; storage by the run-hour; egress
  // through the region's monthly tiers (else the provider's dearest region).
  var T = D.tuning;
  function fillSelect(id, items) {
    var s = $(id);
    items.forEach(function (it) { var o = el("option", it.label); o.value = it.value; s.appendChild(o); });
  }
  fillSelect("t-model", T.models);
  fillSelect("t-method", T.methods);
  function tiered(gb, tiers) {
    var usd = 0;
    tiers.forEach(function (t) {
      var upper = t[1] == null ? gb : Math.min(gb, t[1]);
      if (upper > t[0]) usd += (upper - t[0]) * t[2];
    });
    return usd;
  }
  function egress(c, gb) {
    var regions = T.tiers[c.provider] || {};
    if (c.egress === "region" && regions[c.region]) return tiered(gb, regions[c.region]);
    if (c.egress === "none") return 0;
    var most = 0;
    Object.keys(regions).forEach(function (r) { most = Math.max(most, tiered(gb, regions[r])); });
    return most;
  }
  function roundTo(x, digits) { var m = Math.pow(10, digits); return Math.sign(x) * Math.floor(Math.abs(x) * m + 0.5) / m; }
  function jobCost(c, tokens, runs) {
    var hours = tokens / c.tps / 3600 * c.k + c.setup_h, gran = Math.max(c.gran, 1);
    // Each run rounded up to the increment; the minimum charge paid once, runs back to back in one rental.
    var billed = Math.max(runs * Math.ceil(roundTo(hours * 3600 / gran, 9)) * gran,
                          Math.ceil(roundTo(c.min / gran, 9)) * gran);
    var total = c.price * billed / 3600 + c.storage_h * runs * hours + egress(c, c.result_gb * runs);
    return {hours: hours, total: total};
  }
  var RUNS = ["1", "2", "3", "5", "10"], ORDER = ["provider", "region", "instance_type", "purchase_option"];
  function cmp(a, b) {  // the recommender's last tie-break: the offer's key, in code-point order
    for (var i = 0; i < ORDER.length; i++) {
      if (a[ORDER[i]] !== b[ORDER[i]]) return a[ORDER[i]] < b[ORDER[i]] ? -1 : 1;
    }
    return 0;
  }
  function renderTune() {
    var model = S.model || (T.models[0] && T.models[0].value) || "";
    var method = S.method || (T.methods[0] && T.methods[0].value) || "";
    var tokens = parseFloat(S.tokens) > 0 ? parseFloat(S.tokens) * 1e6 : T.default_tokens;
    var runs = RUNS.indexOf(S.runs) >= 0 ? +S.runs : 1, spot = S.spot === "1";
    $("t-model").value = model;
    $("t-method").value = method;
    $("t-tokens").value = S.tokens || String(T.default_tokens / 1e6);
    $("t-runs").value = String(runs);
    $("t-spot").checked = spot;
    $("t-tokens").max = String(T.max_tokens / 1e6);
    var a = T.answers[model + "|" + method], body = $("tune-table").tBodies[0], notes = $("tune-notes");
    body.replaceChildren();
    notes.replaceChildren();
    if (!a) { $("tune-need").textContent = "no answer was computed for this model and method"; return; }
    if (tokens > T.max_tokens) {  // the pool holds the leaders up to this size, as far as the recommender costs
      $("tune-need").textContent = "At most " + (T.max_tokens / 1e6).toLocaleString("en-US") +
        "M tokens per run (more than Llama 3 was pretrained on).";
      return;
    }
    var job = (tokens / 1e6).toLocaleString("en-US", {maximumFractionDigits: 3}) + "M tokens per run" +
      (runs > 1 ? ", " + runs + " runs" : "") + (S.tokens ? "" : " (the default job: a typical instruction tune, " +
      T.default_job + ")") + (spot ? "; on demand, spot and interruptible" : "; on demand");
    var shards = Object.keys(a.sharded).map(function (g) { return g + " GPUs: " + a.sharded[g].toFixed(1); });
    $("tune-need").textContent = a.model + ", " + method + ": " + a.need_gb.toFixed(1) + " GiB on one GPU" +
      (shards.length ? " (sharded, GiB per GPU: " + shards.join(", ") + ")" : "") + ". Job costed: " + job + ".";
    var ranked = a.candidates.filter(function (c) { return spot || !c.spot; }).map(function (c) {
      var j = jobCost(c, tokens, runs);
      return {c: c, hours: j.hours, total: j.total, key: roundTo(j.total, 6)};
    }).sort(function (x, y) {
      return x.c.tier - y.c.tier || x.key - y.key || x.c.price - y.c.price || cmp(x.c, y.c);
    });
    var seen = {}, shown = 0;
    ranked.forEach(function (r) {
      var c = r.c, group = c.provider + "|" + c.instance_type + "|" + c.purchase_option;
      if (seen[group] || shown >= T.shown) return;
      seen[group] = true;
      shown++;
      var tr = el("tr", null, c.spot ? "spot" : "");
      [[String(shown), "r"], [c.gpus], [money(r.total), "r cost"], [r.hours.toFixed(2), "r"],
       [Math.round(c.tps).toLocaleString("en-US") + " (" + Math.round(c.tps_gpu).toLocaleString("en-US") + ")", "r"],
       [c.plan], [c.provider], [c.instance_type], [c.region], [c.purchase_option], [money(c.price), "r"],
       [c.need_gb.toFixed(1) + " GiB", "r"]].forEach(function (x) { tr.appendChild(el("td", x[0], x[1])); });
      body.appendChild(tr);
      if (c.flags.length) {
        var w = el("tr", null, "warn"), td = el("td");
        td.appendChild(el("div", c.flags.map(function (f) { return T.flags[f]; }).join(" · ")));
        td.colSpan = 12;
        w.appendChild(td);
        body.appendChild(w);
      }
    });
    if (!shown) notes.appendChild(el("li", "nothing fits this job on the offers with a speed estimate"));
    notes.appendChild(el("li", "Offers whose GPU has no published tensor figure have no speed estimate: not ranked here."));
    if (S.tokens || runs > 1) {
      notes.appendChild(el("li", "The hours and interruptions a warning names are those of the default job (" +
        T.default_job + ", one run); the costs and hours in the table are this job's."));
    }
    a.left_out.forEach(function (n) { notes.appendChild(el("li", "Left out, " + n)); });
    if (a.stale.length) notes.appendChild(el("li", "Stale providers left out: " + a.stale.join(", ")));
  }
  function onTune() {
    S.model = $("t-model").value;
    S.method = $("t-method").value;
    var t = $("t-tokens").value.trim();
    S.tokens = t && parseFloat(t) !== T.default_tokens / 1e6 ? t : "";
    S.runs = $("t-runs").value === "1" ? "" : $("t-runs").value;
    S.spot = $("t-spot").checked ? "1" : "";
    writeHash();
    renderTune();
  }
  $("tune").addEventListener("change", onTune);
  $("tune").addEventListener("submit", function (e) { e.preventDefault(); });

  // -- freshness table --------------------------------------------------------------------------
  function renderFreshness() {
    var late = [];
    Array.prototype.forEach.call($("freshness").tBodies[0].rows, function (tr) {
      var p = prov[tr.dataset.provider], state = stateOf(p);
      tr.className = "f-" + state;
      var skipped = state === "not_configured", h = ageHours(p);
      tr.querySelector("td.state").textContent = state === "never" ? "never loaded" : skipped ? "not configured" : state;
      tr.querySelector("td.age").textContent = ageText(h);
      if (h != null && (state === "stale" || state === "failed" || (skipped && h > D.stale_after_hours))) {
        late.push(p.provider + " (" + (state === "failed" ? "last scrape failed, data " : skipped ?
          "not configured, data " : "data ") + ageText(h) + " old)");
      }
    });
    // Said on the page, not in a tooltip: whose prices may have moved since.
    $("stale").hidden = !late.length;
    $("stale").textContent = late.length ? "Not fresh: " + late.join(", ") + ". Their prices may have moved." : "";
  }

  // -- views ------------------------------------------------------------------------------------
  var VIEWS = ["gpus", "offers", "tune"];
  function show() {
    var v = VIEWS.indexOf(S.view) >= 0 ? S.view : "gpus";
    VIEWS.forEach(function (name) {
      $("v-" + name).hidden = name !== v;
      $("tab-" + name).setAttribute("aria-pressed", name === v ? "true" : "false");
    });
    if (v === "gpus") renderGpus();
    if (v === "tune") renderTune();
    if (v === "offers") { syncForm(); buildHead(); refreshOffers(false); }
  }
  function setView(v) {
    S.view = v === "gpus" ? "" : v;
    writeHash();
    show();
  }
  VIEWS.forEach(function (name) { $("tab-" + name).addEventListener("click", function () { setView(name); }); });
  window.addEventListener("hashchange", function () { readHash(); show(); });
  window.addEventListener("resize", function () { if (!$("v-offers").hidden) { buildHead(); renderRows(); } });
  setInterval(function () { renderFreshness(); if (!$("v-offers").hidden) renderRows(); }, 60e3);

  readHash();
  renderFreshness();
  show();
  document.body.setAttribute("data-ready", "1");
})();
