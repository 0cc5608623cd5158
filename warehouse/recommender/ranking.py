"""The recommender's ranking: every current offer's request-independent facts in numpy arrays (read
once per read-only connection, every time on a writable one), then each request fitted, timed, costed
and ranked in array arithmetic, faster than DuckDB plans the same statement. The arithmetic is that of
the pure functions (memory, throughput, fixed, spot, volumes) and the SQL macros billed_seconds and
fit_ok, in their order of operations; tests hold the two to each other."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import duckdb
import numpy as np

from gpuledger.warehouse.recommender.fixed import BOOT_S, internet_gbps, setup_seconds
from gpuledger.warehouse.recommender.spot import HOURS_PER_MONTH, expected_run_hours
from gpuledger.warehouse.recommender.throughput import StepWork, fabric_gbs
from gpuledger.warehouse.recommender.volumes import billed_gb_for, holds, volume_sizings

if TYPE_CHECKING:
    from gpuledger.warehouse.recommender.recommend import RecommendRequest

# Every current offer in key order (provider, region, zone, instance type, purchase option: the
# ranking's last tie-break is then the row number), with what fitting and costing read.
_FACTS_SQL = """
select provider, region, zone, instance_type, purchase_option, price_per_hour, gpu_count, memory_gb_per_gpu,
       multinode_fabric is not null as has_fabric, coalesce(ram_gb, 0) as ram_gb,
       available is false as no_capacity, gpu_model, coalesce(provider_kind, '') as provider_kind,
       network_gbps, vcpus, link_gbs, pcie_gbs,
       -- Vast.ai publishes each host's measured internet speed
       try_cast(json_extract_string(provider_data, '$.cheapest_offer.inet_down_mbps') as double) as inet_down_mbps,
       try_cast(json_extract_string(provider_data, '$.cheapest_offer.inet_up_mbps') as double) as inet_up_mbps,
       term_months is not null as committed, purchase_option = 'on_demand' as on_demand,
       coalesce(available, true) as available_or_unknown, interruptible,
       interruption_rate(interruption_rate_max_pct) as rate, granularity_s, minimum_s,
       coalesce(gpu_vendor, '') = 'NVIDIA' as nvidia,
       precision_ok('bf16', gpu_bf16, gpu_architecture) as ok_bf16,
       precision_ok('fp16', gpu_bf16, gpu_architecture) as ok_fp16,
       coalesce(gpu_bf16_tflops, gpu_fp16_tflops) as peak_bf16,
       coalesce(gpu_fp16_tflops, gpu_bf16_tflops) as peak_fp16,
       gpu_bandwidth_tbs, multinode_fabric
from offer_facts()
order by provider, region, zone, instance_type, purchase_option
"""
_KEY = ("provider", "region", "zone", "instance_type", "purchase_option")
# The columns of `fits` a shown row carries, read for the rows shown only.
_SHOWN_SQL = """
select provider, region, zone, instance_type, purchase_option, price_per_hour, gpu_count, memory_gb_per_gpu,
       link_kind, link_gbs, gpu_form_factor, term_months, available, interruptible, granularity_s,
       minimum_s, gpu_vendor,
       interruption_risk, interruption_risk_level, interruption_rate_max_pct, interruption_risk_source, reliability,
       gpu_model, gpu_variant_exact, gpu_architecture, memory_source, interconnect, link_note, price_per_gpu_hour,
       billing_source, payment_option, multinode_fabric, network_gbps
from offer_facts() o join (select unnest($provider) as provider, unnest($region) as region, unnest($zone) as zone,
                                  unnest($instance_type) as instance_type,
                                  unnest($purchase_option) as purchase_option) k
     using (provider, region, zone, instance_type, purchase_option)
"""


@dataclass(frozen=True, kw_only=True)
class Plan(StepWork):
    """One plan of the request: its GPUs, the step's work and what the job holds and moves."""

    gpus: int
    nodes: int
    need_gb: float
    host_gb: float
    storage_gb: float
    egress_gb: float
    restart_h: float
    write_h: float
    weights_gb: float  # downloaded before each run (the base model's 16-bit files)
    result_gb: float  # uploaded after it


@dataclass
class OfferFacts:
    """Every current offer's request-independent facts, as arrays in key order."""

    n: int
    cols: dict[str, np.ndarray]  # NULLs are NaN in float columns
    group: np.ndarray  # the instance group of each offer, as a dense code
    places: list[tuple[str, str]]  # (provider, region) of each place code
    place: np.ndarray  # each offer's place code
    providers: list[str]
    provider_code: np.ndarray
    storage: list[tuple[str, str, str, float]]  # provider, region, storage class, usd per GB-month
    egress: list[tuple[str, str, float, float | None, float]]  # provider, region, start, end, usd
    persists: dict[str, bool | None]
    place_tables: dict[tuple[float, float], dict] = field(default_factory=dict)  # by (storage GB, egress GB)
    shown: dict[int, dict[str, Any]] = field(default_factory=dict)  # row number -> its columns of `fits`

    def offers_per_provider(self) -> dict[str, int]:
        """Current offers of each provider that has any."""
        return dict(zip(self.providers, np.bincount(self.provider_code).tolist()))

    def shown_rows(self, con: duckdb.DuckDBPyConnection, rows: Sequence[int]) -> list[dict[str, Any]]:
        """The columns of `fits` of these offers (row numbers), each read once."""
        missing = [i for i in dict.fromkeys(rows) if i not in self.shown]
        if missing:
            rel = con.execute(_SHOWN_SQL, {k: [self.cols[k][i] for i in missing] for k in _KEY})
            names = [d[0] for d in rel.description]
            by_key = {r[:5]: dict(zip(names, r)) for r in rel.fetchall()}
            for i in missing:
                self.shown[i] = by_key[tuple(self.cols[k][i] for k in _KEY)]
        return [dict(self.shown[i]) for i in rows]


_CACHE: "weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, OfferFacts]" = weakref.WeakKeyDictionary()


def offer_facts(con: duckdb.DuckDBPyConnection) -> OfferFacts:
    """The connection's facts: read once on a read-only connection, every time on a writable one."""
    facts = _CACHE.get(con)
    if facts is None:
        facts = _load(con)
        if con.execute("select current_setting('access_mode')").fetchall()[0][0] == "read_only":
            _CACHE[con] = facts
    return facts


def _load(con: duckdb.DuckDBPyConnection) -> OfferFacts:
    cols = {}
    for name, arr in con.execute(_FACTS_SQL).fetchnumpy().items():  # NULLs as NaN in float columns
        numeric = arr.dtype.kind in "fiu"
        cols[name] = np.ma.filled(arr.astype(float), np.nan) if numeric else np.ma.getdata(arr)
    n = len(cols["provider"])
    providers, provider_code = np.unique(cols["provider"], return_inverse=True)
    _, first, place = np.unique(cols["provider"] + "\0" + cols["region"], return_index=True, return_inverse=True)
    places = [(cols["provider"][i], cols["region"][i]) for i in first]
    # What one row per instance type collapses by.
    _, group = np.unique(cols["provider"] + "\0" + cols["instance_type"] + "\0" + cols["purchase_option"],
                         return_inverse=True)
    # What each run's set-up costs in time does not depend on the request but for the bytes moved.
    cols["down_gbps"], cols["bandwidth_source"] = internet_gbps(
        cols["provider_kind"], cols["network_gbps"], cols["vcpus"], cols["inet_down_mbps"])
    cols["up_gbps"], _ = internet_gbps(cols["provider_kind"], cols["network_gbps"], cols["vcpus"], cols["inet_up_mbps"])
    cols["fabric"] = np.array([fabric_gbs(None if math.isnan(net) else net, cnt, text) for net, cnt, text in zip(
        cols["network_gbps"], cols["gpu_count"], cols["multinode_fabric"])], float)
    cols["boot_s"] = np.array([BOOT_S.get(k, BOOT_S["gpu_cloud"]) for k in cols["provider_kind"]], float)
    storage = con.execute("select provider, region, storage_class, usd_per_gb_month from storage_prices "
                          "where working_volume_ok(storage_class)").fetchall()
    egress = con.execute("select provider, region, tier_start_gb, tier_end_gb, usd_per_gb from egress_prices "
                         "where destination = 'internet'").fetchall()
    persists = dict(con.execute("select provider, storage_persists_when_stopped from providers").fetchall())
    return OfferFacts(n=n, cols=cols, group=group.reshape(-1), places=places, place=place, providers=providers.tolist(),
                      provider_code=provider_code, storage=storage, egress=egress, persists=persists)


_SOURCES = ("none", "region", "provider")
LEFT_OUT = 5  # cheaper offers that fit no plan, named with the reason
_PLACE_TABLES_KEPT = 64
_PLACE_COLUMNS = ("storage_class", "storage_usd", "storage_billed", "size_known", "storage_source",
                  "egress_usd", "egress_source")


# The region the adapters give a price that holds in every region (Lambda, OCI, DigitalOcean, TensorDock ...).
GLOBAL_REGION = "global"


def _own_or_providers(by_place: dict, by_provider: dict, provider: str, region: str, none: Any) -> tuple[Any, int]:
    """The place's own value, or the provider's price for every region (source 1), else the provider's
    (2), else `none` (0)."""
    for place in ((provider, region), (provider, GLOBAL_REGION)):
        if place in by_place:
            return by_place[place], 1
    if provider in by_provider:
        return by_provider[provider], 2
    return none, 0


def _place_table(f: OfferFacts, storage_gb: float, egress_gb: float) -> dict[str, np.ndarray]:
    """_PLACE_COLUMNS per place code: storage on the class whose billed volume for storage_gb costs least in
    the region, else in the provider (ties to the class name); egress_gb through the region's tiers, else
    the provider's dearest; each with where it came from (an index into _SOURCES)."""
    if (storage_gb, egress_gb) in f.place_tables:
        return f.place_tables[(storage_gb, egress_gb)]
    storage: dict[tuple[str, str], tuple] = {}  # (volume USD a month, class, USD per GB-month, billed GB, size known)
    for prov, reg, cls, usd in f.storage:
        if holds(prov, cls, storage_gb):  # a fixed-size tier holds only the volumes up to its size
            billed = float(billed_gb_for(prov, cls, storage_gb))
            pick = (billed * usd, cls, usd, billed, (prov, cls) in volume_sizings())
            storage[(prov, reg)] = min(storage.get((prov, reg), pick), pick)
    egress: dict[tuple[str, str], float] = {}
    for prov, reg, start, end, usd in f.egress:
        upper = egress_gb if end is None else min(egress_gb, end)
        egress[(prov, reg)] = egress.get((prov, reg), 0.0) + max(upper - start, 0.0) * usd
    storage_of: dict[str, tuple] = {}
    for (prov, _), pick in storage.items():
        storage_of[prov] = min(storage_of.get(prov, pick), pick)
    egress_of: dict[str, float] = {}
    for (prov, _), usd in egress.items():
        egress_of[prov] = max(egress_of.get(prov, usd), usd)
    rows = []
    for prov, reg in f.places:
        (_, *pick), source = _own_or_providers(storage, storage_of, prov, reg, (0.0, None, 0.0, 0.0, None))
        rows.append((*pick, source, *_own_or_providers(egress, egress_of, prov, reg, 0.0)))
    table = f.place_tables[(storage_gb, egress_gb)] = {name: np.array([r[k] for r in rows])
                                                      for k, name in enumerate(_PLACE_COLUMNS)}
    return table


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b with NULL (NaN) where b is 0 or NULL, as DuckDB divides."""
    a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    out = np.full(a.shape, np.nan)
    return np.divide(a, b, out=out, where=b != 0)  # a NULL b gives NaN by itself


def _round_half_away(x: np.ndarray, digits: int) -> np.ndarray:
    """DuckDB's round(x, digits) on doubles: half away from zero."""
    m = 10.0 ** digits
    with np.errstate(invalid="ignore"):
        return np.sign(x) * np.floor(np.abs(x) * m + 0.5) / m


def _why_not(row: dict[str, Any], plans: Sequence[Plan], req: RecommendRequest) -> str:
    """Why an offer fits no plan: the plan that uses all its GPUs (on as many nodes as the request allows
    and its fabric joins), measured against it."""
    count, usable = row["gpu_count"], row["memory_gb_per_gpu"] * (1 - req.headroom)
    if row["no_capacity"]:
        return "the source reports no capacity right now"
    if math.isnan(usable):
        return "no memory figure for its GPU"
    if count > req.max_gpus:
        return f"{count:g} GPUs, over the limit of {req.max_gpus} per plan"
    whole = [p for p in plans if p.gpus == count * p.nodes and (p.nodes == 1 or row["has_fabric"])]
    plan = max(whole, key=lambda p: p.nodes, default=plans[0])
    if usable < plan.need_gb:
        nodes = f" ({plan.nodes} nodes)" if plan.nodes > 1 else ""
        where = f"per GPU sharded over {plan.gpus}{nodes}" if plan.gpus > 1 else "on one GPU" + (
            " (this method is not sharded)" if count >= 2 else "")
        return f"needs {plan.need_gb:.1f} GiB {where}, has {usable:.1f} usable"
    ram = row["ram_gb"] * (1 - req.headroom)
    if plan.host_gb and ram < plan.host_gb:
        return f"needs {plan.host_gb:.0f} GiB of host RAM for ZeRO-Offload, has {ram:.0f}"
    return "a slice of a GPU cannot be sharded" if count < 1 else "no plan fits its GPU count"


@np.errstate(invalid="ignore")  # NaN is NULL here: comparing or dividing it is no error
def rank(con: duckdb.DuckDBPyConnection, f: OfferFacts, plans: Sequence[Plan], req: RecommendRequest,
         fresh: frozenset[str], region_ok: frozenset[str] | None
         ) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]], tuple[float, str] | None, int]:
    """The top candidates as dicts, best first; how many offers fit (after the budget); the offers
    cheaper by the hour than the first that fit no plan (the nearest to fitting when no offer fits, none
    when offers fit but none within the budget), each with its reason; when nothing fits,
    the largest GPU on offer (memory, model); and how many interruptible offers that fit (after the
    budget) have no published interruption rate."""
    c = f.cols
    if len(f.place_tables) > _PLACE_TABLES_KEPT:  # a service's many job sizes: start again, never mid-request
        f.place_tables.clear()
    allowed = [i for i, p in enumerate(f.providers) if p in fresh and (not req.providers or p in req.providers)]
    ok = np.isin(f.provider_code, allowed)
    if region_ok is not None:
        ok &= np.isin(f.place, [i for i, (_, r) in enumerate(f.places) if r in region_ok])
    committed = c["committed"]
    ok &= (~committed & (req.spot | c["on_demand"])) | (req.commitments & committed)
    considered_offers = ok.copy()  # what the user asked to see, before capacity and fit
    if not req.include_unavailable:
        ok &= c["available_or_unknown"]
    mem, count = c["memory_gb_per_gpu"], c["gpu_count"]
    ram = c["ram_gb"]
    plan_of = np.full(f.n, -1)
    # fit_ok's rule (sql/recommend.sql), host RAM for ZeRO-Offload (each node holds its share, with the
    # GPUs' headroom; an offer without a RAM figure cannot be shown to fit) and the GPU limit; the
    # candidates are held to the rows of `fits` by test_fits_macro_gives_the_same_candidate_set
    for i, p in enumerate(plans):
        fit = mem * (1 - req.headroom) >= p.need_gb  # NaN memory never fits (fit_ok)
        if not (p.gpus <= 1 and p.nodes <= 1):
            fit &= (count >= 1) & (count * p.nodes == p.gpus)
            if p.nodes != 1:
                fit &= c["has_fabric"]
        fit &= count * p.nodes <= req.max_gpus
        if p.host_gb != 0:
            fit &= ram * (1 - req.headroom) * p.nodes >= p.host_gb
        plan_of = np.where((plan_of < 0) & ok & fit, i, plan_of)  # the first plan an offer fits
    idx = np.nonzero(plan_of >= 0)[0]
    pi = plan_of[idx]

    def col(name: str) -> np.ndarray:
        """A plan figure for every fitting row."""
        return np.array([getattr(p, name) for p in plans], float)[pi]

    n_rows = len(idx)
    gpus, nodes = col("gpus"), col("nodes")
    sharded = ~((gpus <= 1) & (nodes <= 1))
    cnt = count[idx]
    # The GPUs the job runs on: the shards, the data-parallel copies (one per whole GPU), or a slice.
    gpus_used = np.where(sharded, gpus, np.where(cnt >= 1, np.floor(cnt), cnt))
    precision_supported = {"bf16": c["ok_bf16"], "fp16": c["ok_fp16"]}.get(req.precision, np.ones(f.n, bool))[idx]
    peak = {"bf16": c["peak_bf16"], "fp16": c["peak_fp16"]}.get(req.precision, np.full(f.n, np.nan))[idx]
    bw = c["gpu_bandwidth_tbs"][idx]
    link, fabric, pcie = c["link_gbs"][idx], c["fabric"][idx], c["pcie_gbs"][idx]

    # The time model (throughput.tokens_per_second), NULL where a card figure is unknown.
    tok, util = col("tokens"), col("utilization")
    compute = _div(tok * col("flops_per_token"), peak * 1e12 * util)
    step = (np.fmax(compute, _div(col("weight_read_bytes"), bw * 1e12)) + _div(col("dequant_bytes"), bw * 1e12)
            + _div(col("offload_bytes"), pcie * 1e9))
    whole = np.floor(cnt)
    comm = np.where(sharded, _div(col("shard_bytes"), np.where(nodes > 1, fabric, link) * 1e9),
                    np.where(cnt >= 2, _div(_div(col("replica_bytes") * (whole - 1), whole), link * 1e9), 0.0))
    tokens_per_s = np.where(np.isnan(peak) | np.isnan(bw), np.nan, _div(gpus_used * tok, np.fmax(step, comm)))

    # Hours per run: training (an interruptible run's expected hours, spot.expected_run_hours; without a
    # published rate, its checkpoints and no interruption: a lower bound) plus the run's set-up
    # (fixed.setup_seconds); a request's fixed hours include everything.
    ckpt_h = req.checkpoint_every_minutes / 60.0
    setup_s = np.zeros(n_rows) if req.job_tokens is None else setup_seconds(
        c["boot_s"][idx], c["down_gbps"][idx], c["up_gbps"][idx], col("weights_gb"), col("result_gb"))
    base_hours = (np.full(n_rows, req.hours) if req.job_tokens is None
                  else _div(np.full(n_rows, req.job_tokens), tokens_per_s) / 3600.0)
    rate = c["rate"][idx]
    interruptible = c["interruptible"][idx]
    expected = expected_run_hours(base_hours, np.nan_to_num(rate), ckpt_h, col("restart_h"), col("write_h"))
    run_hours = np.where(interruptible, expected, base_hours) + setup_s / 3600.0

    # Billed compute (recommend.compute_cost; a missing increment is already 3600 s): each run rounded up to
    # the increment, the minimum charge once for the job (runs back to back in one rental), billed_s per run.
    gran = np.maximum(c["granularity_s"][idx], 1)
    run_billed = np.ceil(_round_half_away(run_hours * 3600.0 / gran, 9)) * gran
    minimum_billed = np.ceil(_round_half_away(c["minimum_s"][idx] / gran, 9)) * gran
    billed_s = np.maximum(req.runs * run_billed, minimum_billed) / req.runs
    billed_s = np.where(np.isnan(run_hours), np.nan, billed_s)
    price = c["price_per_hour"][idx]
    compute_usd = req.runs * nodes * price * billed_s / 3600.0

    # Storage on the cheapest class of the region, else of the provider; egress likewise.
    tables = [_place_table(f, p.storage_gb, p.egress_gb) for p in plans]

    def placed(name: str) -> np.ndarray:
        return np.array([t[name] for t in tables])[pi, f.place[idx]]

    s_class, s_known, s_source, s_usd, e_usd, e_source = (placed(k) for k in (
        "storage_class", "size_known", "storage_source", "storage_usd", "egress_usd", "egress_source"))
    s_billed = np.where(s_source > 0, placed("storage_billed"), col("storage_gb"))

    storage_usd = np.where(np.isnan(run_hours), np.nan,
                           s_billed * s_usd * np.maximum(req.runs * run_hours, (req.days or 0.0) * 24.0)
                           / HOURS_PER_MONTH)
    total = compute_usd + storage_usd + e_usd
    qlora_off_cuda = (req.method == "qlora") & ~c["nvidia"][idx]
    tier = np.where(np.isnan(run_hours), 2, np.where(~precision_supported | qlora_off_cuda, 1, 0))
    sort_total = _round_half_away(total, 6)
    sort_key = _round_half_away(run_hours, 9) if req.by == "time" else sort_total
    keep = np.ones(n_rows, bool) if req.budget is None else (total <= req.budget)
    sel = np.nonzero(keep)[0]
    considered = len(sel)
    rate_unknown = int(np.count_nonzero(interruptible[sel] & np.isnan(rate[sel])))
    # One order for all: (slow path, sort key, total, price per hour, key); the row number is the
    # rank of (provider, region, zone, instance type, purchase option). An instance group's best
    # place is its first row in it: within a group the key orders by region, then zone.
    group = f.group[idx] if req.per_instance else np.arange(n_rows)
    order = sel[np.lexsort((idx[sel], price[sel], sort_total[sel], sort_key[sel], tier[sel]))]
    _, first = np.unique(group[order], return_index=True)
    top_rows = order[np.sort(first)[: req.top]]
    others = np.bincount(group[sel])[group[top_rows]] - 1

    def val(arr: np.ndarray, j: int) -> Any:
        v = arr[j].item() if isinstance(arr[j], np.generic) else arr[j]
        return None if isinstance(v, float) and math.isnan(v) else v

    out = []
    shown = f.shown_rows(con, [int(idx[j]) for j in top_rows])
    for j, other, row in zip(top_rows, others, shown):
        o = idx[j]
        plan = plans[pi[j]]
        label = "sharded" if sharded[j] else "data-parallel" if gpus_used[j] >= 2 else "single"
        row.update(
            nodes=int(nodes[j]), plan=label,
            gpus_used=float(gpus_used[j]), precision_supported=bool(precision_supported[j]),
            usable_gb_per_gpu=float(mem[o]) * (1 - req.headroom),  # NaN memory fits no plan
            need_gb=plan.need_gb, storage_gb=plan.storage_gb, egress_gb=plan.egress_gb,
            tokens_per_s=val(tokens_per_s, j), rate=val(rate, j), base_hours=val(base_hours, j),
            setup_s=float(setup_s[j]), setup_usd=float(req.runs * nodes[j] * price[j] * setup_s[j] / 3600.0),
            download_gbps=val(c["down_gbps"], o),
            bandwidth_source=("measured", "published", "assumed")[int(c["bandwidth_source"][o])],
            run_hours=val(run_hours, j), billed_s=val(billed_s, j), compute_usd=val(compute_usd, j),
            storage_class=val(s_class, j), storage_usd_per_gb_month=float(s_usd[j]),
            storage_billed_gb=float(s_billed[j]), storage_size_known=val(s_known, j),
            storage_source=_SOURCES[s_source[j]], egress_usd=float(e_usd[j]),
            egress_source=_SOURCES[e_source[j]], storage_usd=val(storage_usd, j), other_locations=int(other),
            persists_when_stopped=f.persists.get(row["provider"]))
        out.append(row)
    largest = None
    if not out:  # what "nothing fits" names: the largest GPU on offer within the filters and the GPU limit
        on_offer = np.nonzero(ok & (count <= req.max_gpus) & ~np.isnan(mem))[0]
        largest = max(((mem[i], c["gpu_model"][i] or "") for i in on_offer), default=None)
    # Jobs that fit but none shown (over the budget): no offer is shown to be cheaper by the hour than one.
    excluded = considered_offers & (plan_of < 0) & (bool(out) or n_rows == 0)
    return out, considered, _left_out(f, plans, req, excluded, out), largest, rate_unknown


def _left_out(f: OfferFacts, plans: Sequence[Plan], req: RecommendRequest, excluded: np.ndarray,
              ranked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cheapest offers by the hour, below the first ranked one's price (any, when none is),
    that fit no plan: one per GPU model and count, each with the reason."""
    c = f.cols
    first = ranked[0]["price_per_hour"] * ranked[0]["nodes"] if ranked else math.inf
    rows = np.nonzero(excluded & (c["price_per_hour"] < first))[0]
    cheapest: dict[tuple[str, float], int] = {}  # the cheapest offer of each GPU model and count
    for i in rows[np.argsort(c["price_per_hour"][rows], kind="stable")]:
        cheapest.setdefault((c["gpu_model"][i], c["gpu_count"][i]), int(i))
    # Those nearest to fitting first: the most memory on the node, then the cheapest.
    near = sorted(cheapest.values(), key=lambda i: (-np.nan_to_num(c["memory_gb_per_gpu"][i] * c["gpu_count"][i]),
                                                   c["price_per_hour"][i]))[:LEFT_OUT]
    out = []
    for i in sorted(near, key=lambda i: c["price_per_hour"][i]):
        row = {k: (c[k][i].item() if isinstance(c[k][i], np.generic) else c[k][i])
               for k in ("provider", "region", "instance_type", "purchase_option", "gpu_model", "gpu_count",
                         "price_per_hour", "memory_gb_per_gpu", "ram_gb", "no_capacity")}
        out.append(row | {"reason": _why_not(row | {"has_fabric": bool(c["has_fabric"][i])}, plans, req)})
    return out
