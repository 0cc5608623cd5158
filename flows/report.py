"""`gpuledger report OUT.html`: one self-contained page to compare every current offer.

The page needs nothing but the file: CSS and JavaScript are inline, nothing is
fetched (a Content-Security-Policy with `default-src 'none'` and the hash of the
one inline script makes sure of it). The table is rendered here, in Python, with
every scraped string HTML-escaped (provider data is untrusted); the script only
filters and sorts rows that already exist, reading `data-*` attributes and
never writing HTML.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import duckdb

from gpuledger.adapters.registry import SOURCES
from gpuledger.warehouse.freshness import DEFAULT_MAX_AGE_HOURS, NEVER, ProviderFreshness, provider_freshness
from gpuledger.warehouse.recommender.recommend import tiered_egress_cost
from gpuledger.warehouse.store import open_reader

DEFAULT_EGRESS_GB = 140.0

OFFER_SQL = """
with od as (
    select provider, region, instance_type, min(price_per_hour) as od_price
    from offers where purchase_option = 'on_demand' group by all)
select o.gpu_model,
       case when o.gpu_count < 1 then o.gpu_memory_gb
            else coalesce(o.gpu_memory_gb_nominal, o.gpu_memory_gb) end as vram_gb,
       o.gpu_count, o.provider, o.region, o.zone, o.instance_type, o.purchase_option,
       o.price_per_gpu_hour, o.price_per_hour,
       coalesce(o.spot_savings_pct,
                case when o.purchase_option <> 'on_demand' and od.od_price > 0
                     then round(100.0 * (1 - o.price_per_hour / od.od_price), 1) end) as spot_discount_pct,
       coalesce(o.billing_granularity_s, p.billing_granularity_s) as billing_granularity_s,
       coalesce(o.minimum_charge_s, p.minimum_charge_s) as minimum_charge_s,
       o.interruption_risk, o.last_seen
from offers o
left join providers p on p.provider = o.provider
left join od on od.provider = o.provider and od.region = o.region and od.instance_type = o.instance_type
where o.term_months is null  -- the page compares what can be rented now; 1- and 3-year commitments stay in SQL
order by o.price_per_gpu_hour, o.provider, o.region, o.zone, o.instance_type, o.purchase_option
"""

# What the freshness table shows of each provider besides its freshness.
PROVIDER_SQL = """
select p.provider, p.display_name, p.billing_granularity_s, p.minimum_charge_s,
       (select count(*) from offers o where o.provider = p.provider) as offers
from providers p
"""


@dataclass(frozen=True)
class ReportProvider:
    """One row of the page's freshness table: a provider's freshness and its facts."""

    freshness: ProviderFreshness
    display_name: str
    offers: int
    billing_granularity_s: int | None
    minimum_charge_s: int | None

    @property
    def provider(self) -> str:
        return self.freshness.provider

    @property
    def state(self) -> str:
        return self.freshness.state

    @property
    def age_hours(self) -> float | None:
        return self.freshness.age_hours

    @property
    def last_success(self) -> datetime | None:
        return self.freshness.last_ok

    @property
    def last_error(self) -> str | None:
        return self.freshness.last_error if self.freshness.last_state != "ok" else None


@dataclass
class Report:
    path: Path
    rows: list[dict[str, Any]]
    providers: list[ProviderFreshness]
    generated_at: datetime


def report_providers(con: duckdb.DuckDBPyConnection, now: datetime,
                     stale_after_hours: float = DEFAULT_MAX_AGE_HOURS,
                     providers: Iterable[str] = SOURCES) -> list[ReportProvider]:
    """Every provider with a scrape run and every registered source (never loaded: state `never`)."""
    facts = {r[0]: r[1:] for r in con.execute(PROVIDER_SQL).fetchall()}
    offers = dict(con.execute("select provider, count(*) from offers group by provider").fetchall())
    out = []
    for f in provider_freshness(con, stale_after_hours, now, providers):
        name, gran, minimum, _ = facts.get(f.provider, (None, None, None, 0))
        out.append(ReportProvider(f, name or f.provider, offers.get(f.provider, 0), gran, minimum))
    return out


def _egress_tiers(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, list[tuple[float, float | None, float]]]]:
    out: dict[str, dict[str, list[tuple[float, float | None, float]]]] = {}
    for provider, region, start, end, usd in con.execute(
            "select provider, region, tier_start_gb, tier_end_gb, usd_per_gb from egress_prices "
            "where destination = 'internet' order by provider, region, tier_start_gb").fetchall():
        out.setdefault(provider, {}).setdefault(region, []).append((start, end, usd))
    return out


def egress_cost(tiers: dict[str, dict[str, list[tuple[float, float | None, float]]]], provider: str, region: str,
                gb: float) -> tuple[float | None, str]:
    """USD to download `gb` to the internet from (provider, region) through the monthly tiers:
    the region's own tiers, else the provider's dearest region (never an underestimate), else unknown."""
    regions = tiers.get(provider) or {}
    if region in regions:
        return tiered_egress_cost(gb, regions[region]), "region"
    if regions:
        return max(tiered_egress_cost(gb, t) for t in regions.values()), "provider"
    return None, "none"


def report_rows(con: duckdb.DuckDBPyConnection, egress_gb: float = DEFAULT_EGRESS_GB,
                freshness: Sequence[ReportProvider] = ()) -> list[dict[str, Any]]:
    """Every current offer with what the page shows, cheapest per GPU-hour first."""
    rel = con.execute(OFFER_SQL)
    cols = [d[0] for d in rel.description]
    offers = rel.fetchall()  # before the next query on this connection replaces the result
    tiers = _egress_tiers(con)
    fresh = {f.provider: f for f in freshness}
    rows = []
    for values in offers:
        row = dict(zip(cols, values))
        usd, row["egress_source"] = egress_cost(tiers, row["provider"], row["region"], egress_gb)
        row["egress_usd"] = None if usd is None else round(usd, 6)  # no float dust (3.5999999999999996)
        f = fresh.get(row["provider"])
        row["age_hours"] = f.age_hours if f else None
        row["freshness_state"] = f.state if f else "unknown"
        rows.append(row)
    return rows


# -- formatting -----------------------------------------------------------------

def _e(value: Any) -> str:
    """HTML-escape any value for text or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def _money(x: float | None) -> str:
    if x is None:
        return ""
    if x == 0:
        return "free"
    return f"${x:,.2f}" if x >= 1 else f"${x:.3f}"


def _seconds(s: int | None) -> str:
    if s is None:
        return ""
    if s and s % 3600 == 0:
        return f"{s // 3600} h"
    if s and s % 60 == 0:
        return f"{s // 60} min"
    return f"{s} s"


def _billing(gran: int | None, minimum: int | None) -> str:
    text = _seconds(gran) or "?"
    if minimum and minimum != gran:
        text += f" (min {_seconds(minimum)})"
    return text


def _age(hours: float | None) -> str:
    if hours is None:
        return "never"
    if hours < 1:
        return f"{max(hours * 60, 0):.0f} min"
    if hours < 48:
        return f"{hours:.0f} h"
    return f"{hours / 24:.0f} d"


def _num(x: float | None) -> str:
    return "" if x is None else repr(float(x))


def _g(x: float | None) -> str:
    return "" if x is None else f"{x:g}"


COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (key, header, sort type)
    ("gpu", "GPU", "text"), ("vram", "VRAM GiB", "num"), ("count", "GPUs", "num"),
    ("provider", "provider", "text"), ("region", "region", "text"), ("zone", "zone", "text"),
    ("instance", "instance", "text"), ("option", "purchase", "text"),
    ("price", "$ / GPU-h", "num"), ("hourly", "$ / h", "num"), ("spot", "spot discount", "num"),
    ("billing", "billing", "num"), ("egress", "egress", "num"), ("fresh", "data age", "num"),
)


def _row_html(r: dict[str, Any], egress_gb: float) -> str:
    spot = r["spot_discount_pct"]
    egress_title = {"region": f"{egress_gb:g} GB to the internet from {r['region']}, monthly tiers",
                    "provider": f"{egress_gb:g} GB: no tiers for this region, the provider's dearest region",
                    "none": "no egress price known"}[r["egress_source"]]
    egress_text = _money(r["egress_usd"]) + ("*" if r["egress_source"] == "provider" else "")
    if r["egress_source"] == "none":
        egress_text = "?"
    cells = [
        (r["gpu_model"], r["gpu_model"], ""),
        (_g(r["vram_gb"]), _num(r["vram_gb"]), ""),
        (_g(r["gpu_count"]), _num(r["gpu_count"]), ""),
        (r["provider"], r["provider"], ""),
        (r["region"], r["region"], ""),
        (r["zone"], r["zone"], ""),
        (r["instance_type"], r["instance_type"], ""),
        (r["purchase_option"] + (f" ({r['interruption_risk']})" if r["interruption_risk"] else ""),
         r["purchase_option"], ""),
        (_money(r["price_per_gpu_hour"]), _num(r["price_per_gpu_hour"]), ""),
        (_money(r["price_per_hour"]), _num(r["price_per_hour"]), ""),
        ("" if spot is None else f"{spot:.0f}%", _num(spot), ""),
        (_billing(r["billing_granularity_s"], r["minimum_charge_s"]), _num(r["billing_granularity_s"]), ""),
        (egress_text, _num(r["egress_usd"]), egress_title),
        (_age(r["age_hours"]), _num(r["age_hours"]), r["freshness_state"]),
    ]
    tds = "".join(
        f'<td data-v="{_e(v)}"' + (f' title="{_e(t)}"' if t else "") + f">{_e(text)}</td>"
        for text, v, t in cells)
    attrs = (f'data-gpu="{_e(r["gpu_model"])}" data-vram="{_num(r["vram_gb"])}" data-provider="{_e(r["provider"])}" '
             f'data-region="{_e(r["region"])} {_e(r["zone"])}" data-option="{_e(r["purchase_option"])}" '
             f'data-price="{_num(r["price_per_gpu_hour"])}" class="f-{_e(r["freshness_state"])}"')
    return f"<tr {attrs}>{tds}</tr>"


def _state(state: str) -> str:
    return "never loaded" if state == NEVER else state


def _freshness_html(providers: Sequence[ReportProvider]) -> str:
    rows = []
    for p in providers:
        when = p.last_success.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC") if p.last_success else "never"
        err = f'<td class="err">{_e(p.last_error)}</td>' if p.last_error else "<td></td>"
        rows.append(
            f'<tr class="f-{_e(p.state)}"><td>{_e(p.display_name)}</td><td>{_e(_state(p.state))}</td><td>{_e(when)}</td>'
            f"<td>{_e(_age(p.age_hours))}</td><td>{p.offers}</td>"
            f"<td>{_e(_billing(p.billing_granularity_s, p.minimum_charge_s))}</td>{err}</tr>")
    return ("<table id=\"freshness\"><thead><tr><th>provider</th><th>state</th><th>last successful scrape</th>"
            "<th>age</th><th>offers</th><th>billing</th><th>last error</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


CSS = """
body{font:13px/1.35 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:1.2em;color:#1d2330;background:#fff}
h1{font-size:1.4em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.2em 0 .4em}
.meta{color:#5a6273;margin:0 0 1em}
table{border-collapse:collapse}
th,td{padding:2px 6px;border-bottom:1px solid #e3e6ec;text-align:left;white-space:nowrap}
#offers td:nth-child(2),#offers td:nth-child(3),#offers td:nth-child(n+9):nth-child(-n+11),#offers td:nth-child(13),
#offers td:nth-child(14){text-align:right}
th{background:#f3f5f9;position:sticky;top:0;user-select:none}
#offers th{cursor:pointer}
#offers th[aria-sort=ascending]::after{content:" \\25B2"} #offers th[aria-sort=descending]::after{content:" \\25BC"}
tbody tr:nth-child(even){background:#fafbfd}
#offers tr.f-stale td:last-child{color:#a86400} #offers tr.f-failed td:last-child{color:#b3261e}
#freshness tr.f-failed td:nth-child(2){color:#b3261e;font-weight:600}
#freshness tr.f-stale td:nth-child(2){color:#a86400;font-weight:600}
td.err{white-space:normal;max-width:40em;color:#b3261e}
form{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:end;margin:.6em 0;padding:.6em;background:#f3f5f9}
label{display:flex;flex-direction:column;font-size:.85em;color:#5a6273}
input,select{font:inherit;padding:2px 4px}
#count{font-weight:600}
"""

SCRIPT = """
(function () {
  "use strict";
  var table = document.getElementById("offers");
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var form = document.getElementById("filters");
  var count = document.getElementById("count");
  function val(id) { return document.getElementById(id).value.trim(); }
  function num(id) { var v = val(id); return v === "" ? NaN : Number(v); }
  function apply() {
    var gpu = val("f-gpu"), provider = val("f-provider"), option = val("f-option");
    var region = val("f-region").toLowerCase(), vram = num("f-vram"), maxPrice = num("f-price");
    var shown = 0;
    rows.forEach(function (r) {
      var d = r.dataset;
      var ok = (!gpu || d.gpu === gpu) && (!provider || d.provider === provider) &&
               (!option || d.option === option) && (!region || d.region.toLowerCase().indexOf(region) >= 0) &&
               (isNaN(vram) || Number(d.vram) >= vram) && (isNaN(maxPrice) || Number(d.price) <= maxPrice);
      r.hidden = !ok;
      if (ok) shown++;
    });
    count.textContent = String(shown);
  }
  function sortBy(th) {
    var idx = th.cellIndex, numeric = th.dataset.type === "num";
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    var keyed = rows.map(function (r, i) {
      var v = r.cells[idx].dataset.v;
      return {r: r, i: i, empty: v === "", v: numeric ? Number(v) : v.toLowerCase()};
    });
    keyed.sort(function (a, b) {
      if (a.empty !== b.empty) return a.empty ? 1 : -1;  // blanks last, either way
      if (a.v < b.v) return -dir;
      if (a.v > b.v) return dir;
      return a.i - b.i;  // stable
    });
    rows = keyed.map(function (k) { return k.r; });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r); });
    tbody.appendChild(frag);
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(th); });
  });
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  form.addEventListener("reset", function () { setTimeout(apply, 0); });
  form.addEventListener("submit", function (e) { e.preventDefault(); });
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""


def _options(values: Sequence[str], label: str) -> str:
    return f'<option value="">{_e(label)}</option>' + "".join(
        f'<option value="{_e(v)}">{_e(v)}</option>' for v in values)


def loaded_count(providers: Sequence[ReportProvider]) -> int:
    """Providers with at least one scrape run (the others are registered sources never loaded)."""
    return sum(p.state != NEVER for p in providers)


def render_report(rows: Sequence[dict[str, Any]], providers: Sequence[ReportProvider], generated_at: datetime,
                  egress_gb: float = DEFAULT_EGRESS_GB) -> str:
    """The whole page as one string."""
    gpus = sorted({r["gpu_model"] for r in rows})
    provs = sorted({r["provider"] for r in rows})
    opts = sorted({r["purchase_option"] for r in rows})
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{script_hash}'; "
           "img-src data:; form-action 'none'; base-uri 'none'")
    head = "".join(f'<th data-key="{k}" data-type="{t}" tabindex="0">{_e(h)}</th>' for k, h, t in COLUMNS)
    body = "".join(_row_html(r, egress_gb) for r in rows)
    stamp = generated_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>gpuledger: rented-GPU prices</title>
<style>{CSS}</style>
</head>
<body>
<h1>Rented-GPU prices</h1>
<p class="meta">Generated by gpuledger at {_e(stamp)}: {len(rows)} current offers from {loaded_count(providers)} providers.
Egress = downloading {egress_gb:g} GB to the internet from the offer's region (monthly tiers; * = no tiers for the
region, the provider's dearest region). Data age = time since the provider's last successful scrape.</p>
<h2>Freshness per provider</h2>
{_freshness_html(providers)}
<h2>Offers</h2>
<form id="filters" autocomplete="off">
<label>GPU<select id="f-gpu">{_options(gpus, "any")}</select></label>
<label>min VRAM per GPU (GiB)<input id="f-vram" type="number" min="0" step="1" inputmode="numeric"></label>
<label>provider<select id="f-provider">{_options(provs, "any")}</select></label>
<label>region or zone contains<input id="f-region" type="search"></label>
<label>purchase option<select id="f-option">{_options(opts, "any")}</select></label>
<label>max $ per GPU-hour<input id="f-price" type="number" min="0" step="0.01"></label>
<button type="reset">clear</button>
<span><span id="count">{len(rows)}</span> of {len(rows)} offers shown</span>
</form>
<table id="offers"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<script>{SCRIPT}</script>
</body>
</html>
"""


def write_report(db: str | os.PathLike[str] | None, out: str | os.PathLike[str],
                 egress_gb: float = DEFAULT_EGRESS_GB, stale_after_hours: float = DEFAULT_MAX_AGE_HOURS,
                 now: datetime | None = None) -> Report:
    """Read the warehouse (read-only) and write the page to `out` (written whole, then renamed)."""
    now = now or datetime.now(timezone.utc)
    con = open_reader(db)
    try:
        providers = report_providers(con, now, stale_after_hours)
        rows = report_rows(con, egress_gb, providers)
    finally:
        con.close()
    path = Path(out)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    tmp.write_text(render_report(rows, providers, now, egress_gb), encoding="utf-8")
    tmp.replace(path)
    return Report(path, rows, providers, now)


__all__ = ["Report", "ReportProvider", "egress_cost", "report_providers", "render_report", "report_rows",
           "write_report"]
