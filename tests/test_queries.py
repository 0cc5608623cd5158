"""docs/queries.md runs: every SQL block and every Python snippet, on a replayed warehouse.

The warehouse holds five providers replayed through their real clients, then Lambda replayed
again with its 8x H100 cut from $31.92 to $28.72, so the history queries see a real change.
Each SQL answer is checked against the same figure computed here in Python from the tables.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.builders import lambda_price_hook, replayed_warehouse
from gpuledger.warehouse.export import export_snapshot
from gpuledger.warehouse.recommender.recommend import tiered_egress_cost
from gpuledger.warehouse.store import open_reader

DOC = Path(__file__).resolve().parent.parent / "docs" / "queries.md"
PROVIDERS = ["aws", "azure", "lambda", "runpod", "vastai"]


def blocks(lang: str) -> list[tuple[str, str]]:
    """(section heading, code) for every fenced block of `lang`, in order."""
    out, heading = [], ""
    for m in re.finditer(r"^## ([^\n]+)$|^```" + lang + r"\n(.*?)^```", DOC.read_text(), re.M | re.S):
        if m.group(1):
            heading = m.group(1).strip()
        else:
            out.append((heading, m.group(2)))
    return out


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """AWS in three of its regions: the subject is the queries, which every region answers alike."""
    path = tmp_path_factory.mktemp("queries") / "gpuledger.duckdb"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPULEDGER_AWS_REGIONS", "us-east-1,eu-west-1,ap-northeast-1")
        replayed_warehouse(path, PROVIDERS, refresh_id="refresh-1")
    replayed_warehouse(path, ["lambda"], hook=lambda_price_hook("gpu_8x_h100_sxm5", 2872), refresh_id="refresh-2")
    # then the 1x A10 cut from $1.29 to $0.99 (-23.3 %), the 8x H100 staying at its cut price
    replayed_warehouse(path, ["lambda"], hook=lambda_prices_hook({"gpu_8x_h100_sxm5": 2872, "gpu_1x_a10": 99}),
                       refresh_id="refresh-3")
    return path


def lambda_prices_hook(cents: dict[str, int]) -> Any:
    hooks = [lambda_price_hook(instance, c) for instance, c in cents.items()]

    def hook(host: str, request: Any, exchange: Any) -> tuple[int, dict[str, str], bytes] | None:
        answer = None
        for h in hooks:
            changed = h(host, request, exchange)
            if changed is not None:
                answer = changed
                exchange = _Answered(exchange, changed[2])
        return answer
    return hook


class _Answered:
    """An exchange whose body is an earlier hook's answer, for the next hook to change further."""

    def __init__(self, exchange: Any, body: bytes) -> None:
        self._exchange, self._body = exchange, body
        self.status, self.headers, self.path = exchange.status, exchange.headers, exchange.path

    def body(self) -> bytes:
        return self._body


def run(db: Path, query: str) -> tuple[list[str], list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)  # as a user would, no gpuledger code in between
    try:
        rel = con.execute(query)
        return [d[0] for d in rel.description], rel.fetchall()
    finally:
        con.close()


def table(db: Path, query: str) -> list[tuple]:
    return run(db, query)[1]


# Sections whose queries need data these five providers' replay lacks, run by their own tests.
TESTED_ELSEWHERE = {
    "p95 spot price of p5.48xlarge in us-east-1 over 30 days, per AZ": "tests/test_spot_history.py",
    "Capacity Block of 8 x H100 for 3 days starting next week": "tests/test_spot_history.py",
    "3-year commitment vs on-demand for a3-highgpu-8g": "tests/test_commitments.py",
    "3-year commitment vs on-demand for p5.48xlarge: Reserved and Savings Plans": "tests/test_savings_plans.py",
}


def test_every_sql_block_runs_and_answers_right(db: Path) -> None:
    sql = [(h, q) for h, q in blocks("sql") if h not in TESTED_ELSEWHERE]
    assert [h for h, _ in sql] == ["Cheapest H100 per provider", "Spot discount by region", "Price history of a GPU",
                                   "Price history of a GPU", "Egress: what downloading 140 GB costs at each provider",
                                   "H100 offers with an interruption risk below 5 %",
                                   "Offers whose price moved more than 20 % this week", "Freshness per provider"]
    results = [run(db, q) for _, q in sql]
    for (heading, _), (_, rows) in zip(sql, results):
        assert rows, heading

    # cheapest H100 per provider
    cols, rows = results[0]
    best: dict[str, float] = {}
    for provider, gpu, price in table(db, "select provider, gpu_model, price_per_gpu_hour from offers "
                                          "where purchase_option = 'on_demand'"):
        if gpu.startswith("H100"):
            best[provider] = min(best.get(provider, price), price)
    got = {r[cols.index("provider")]: r[cols.index("price_per_gpu_hour")] for r in rows}
    assert got == best and set(got) == set(PROVIDERS)
    assert [r[5] for r in rows] == sorted(r[5] for r in rows)
    assert got["lambda"] == 3.29  # gpu_1x_h100_pcie at 329 cents, cheaper than the cut 8x SXM (28.72 / 8)

    # spot discount by region
    cols, rows = results[1]
    od: dict[tuple, float] = {}
    for p, r, it, price in table(db, "select provider, region, instance_type, price_per_hour from offers "
                                     "where purchase_option = 'on_demand'"):
        od[(p, r, it)] = min(od.get((p, r, it), price), price)
    discounts: dict[tuple, list[float]] = defaultdict(list)
    for p, r, it, price in table(db, "select provider, region, instance_type, price_per_hour from offers "
                                     "where purchase_option in ('spot', 'interruptible')"):
        if (p, r, it) in od:
            discounts[(p, r)].append(1 - price / od[(p, r, it)])
    assert {(r[0], r[1]) for r in rows} == set(discounts)
    for p, r, n, median_pct, best_pct in rows:
        assert n == len(discounts[(p, r)])
        assert median_pct == pytest.approx(100 * statistics.median(discounts[(p, r)]), abs=0.051)
        assert best_pct == pytest.approx(100 * max(discounts[(p, r)]), abs=0.051)
    assert {p for p, *_ in rows} == {"aws", "azure", "runpod", "vastai"}

    # price history: the Lambda cut is two versions, the second opening when the first closes
    cols, rows = results[2]
    lam = [r for r in rows if r[0] == "lambda" and r[3] == "gpu_8x_h100_sxm5"]
    regions = {r[1] for r in lam}
    assert regions and len(lam) == 2 * len(regions)
    for region in regions:
        old, new = [r for r in lam if r[1] == region]
        assert (old[5], new[5]) == (3.99, 3.59) and old[7] == new[6] and new[7] is None
    assert len(rows) == table(db, "select count(*) from offer_history where gpu_model = 'H100-SXM'")[0][0]

    # the daily series: its last day is today's state, the cheapest current offer per provider
    cols, rows = results[3]
    last_day = max(r[0] for r in rows)
    today = {r[1]: r[2] for r in rows if r[0] == last_day}
    now = dict(table(db, "select provider, min(price_per_gpu_hour) from offers "
                         "where gpu_model = 'H100-SXM' and purchase_option = 'on_demand' group by provider"))
    assert today == now

    # egress of 140 GB, through the tiers
    cols, rows = results[4]
    tiers: dict[tuple, list] = defaultdict(list)
    for p, r, start, end, usd in table(db, "select provider, region, tier_start_gb, tier_end_gb, usd_per_gb "
                                           "from egress_prices where destination = 'internet'"):
        tiers[(p, r)].append((start, end, usd))
    cost: dict[str, list[float]] = defaultdict(list)
    for (p, _), t in tiers.items():
        cost[p].append(tiered_egress_cost(140, t))
    got_e = {r[0]: (r[1], r[2], r[4]) for r in rows}
    assert got_e == {p: (len(c), round(min(c), 2), round(max(c), 2)) for p, c in cost.items()}
    assert got_e["aws"][1] == 3.6  # 100 GB free + 40 GB x 0.09, checked by hand
    assert got_e["lambda"] == (1, 0.0, 0.0) and got_e["runpod"][1:] == (0.0, 0.0)

    # H100 with a published interruption rate below 5 %: Azure's eastus ND H100 v5 spot ("0-5",
    # resource-graph/page-01.json); AWS's p5.48xlarge is ">20%" in the advisor feed, Vast.ai and
    # RunPod publish no rate
    cols, rows = results[5]
    assert {(r[0], r[1], r[2], r[4]) for r in rows} == {("azure", "Standard_ND96isr_H100_v5", "eastus", "spot")}
    assert [r[6:] for r in rows] == [("low", 5.0, "azure_spot_eviction_rate")]
    assert table(db, "select count(*) from offers where provider = 'aws' and instance_type = 'p5.48xlarge' "
                     "and purchase_option = 'spot' and interruption_risk = '>20%'")[0][0] > 0

    # moved more than 20 % this week: the A10 cut of refresh-3, in both its regions; the 10 % cut
    # of the 8x H100 is not
    cols, rows = results[6]
    assert [r[:8] for r in rows] == [("lambda", region, "", "gpu_1x_a10", "on_demand", 1.29, 0.99, -23.3)
                                     for region in ("us-east-1", "us-west-1")]

    # freshness
    assert [(r[0], r[2]) for r in results[7][1]] == [(p, "ok") for p in PROVIDERS]


def test_python_snippets_run(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copy(db, tmp_path / "gpuledger.duckdb")
    con = open_reader(db, allow_files=True)
    try:
        export_snapshot(con, tmp_path / "snapshots", ["parquet"], ["offers"])
    finally:
        con.close()
    monkeypatch.chdir(tmp_path)
    snippets = blocks("python")
    assert [h for h, _ in snippets] == ["pandas", "polars"]
    printed: dict[str, str] = {}
    for heading, code in snippets:
        out = io.StringIO()
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/queries.md ({heading})", "exec"), namespace)
        printed[heading] = out.getvalue()
    h100_sxm = dict(table(db, "select provider, round(min(price_per_gpu_hour), 2) from offers "
                              "where gpu_model = 'H100-SXM' and purchase_option = 'on_demand' group by provider"))
    assert "H100-SXM" in printed["pandas"] and "A100-SXM4-80" in printed["pandas"]
    assert f"{h100_sxm['aws']:.2f}" in printed["pandas"]
    assert "cheapest" in printed["polars"] and "lambda" in printed["polars"]
    for provider in PROVIDERS:
        assert provider in printed["polars"]


def test_the_readme_example_queries_answer_what_their_comments_say(db: Path) -> None:
    readme = (DOC.parent.parent / "README.md").read_text()
    [block] = re.findall(r"^```sql\n(.*?)^```", readme, re.M | re.S)
    queries = [q.strip() for q in block.split(";") if q.strip()]
    assert [q.splitlines()[0] for q in queries] == [
        "-- cheapest 80 GB-class card per provider, on demand: one row per provider",
        "-- spot price and discount of one type in each zone, cheapest first: one row per zone",
        "-- every price a p5.48xlarge had on demand in us-east-1, and when (valid_to NULL: in force now)"]
    cheapest, spot, history = (run(db, q) for q in queries)

    best: dict[str, float] = {}
    for provider, price in table(db, "select provider, price_per_gpu_hour from offers "
                                     "where gpu_memory_gb_nominal >= 80 and purchase_option = 'on_demand'"):
        best[provider] = min(best.get(provider, price), price)
    cols, rows = cheapest
    assert len(rows) == len(best) == len(PROVIDERS)  # one row per provider, not per GPU, instance and region
    assert {r[0]: r[cols.index("usd_per_gpu_hour")] for r in rows} == best
    assert [r[-1] for r in rows] == sorted(best.values())

    cols, rows = spot
    zones = table(db, "select zone, price_per_hour from offers where instance_type = 'g6e.xlarge' "
                      "and purchase_option = 'spot'")
    assert len(zones) > 3 and len({z for z, _ in zones}) == len(zones) == len(rows)
    assert sorted((r[1], r[2]) for r in rows) == sorted(zones) and [r[2] for r in rows] == sorted(r[2] for r in rows)

    cols, rows = history
    now = table(db, "select price_per_hour from offers where provider = 'aws' and region = 'us-east-1' and "
                    "instance_type = 'p5.48xlarge' and purchase_option = 'on_demand'")
    assert rows and rows[-1][0] == now[0][0] and rows[-1][2] is None  # the version in force now, last
    assert all(r[2] is not None for r in rows[:-1])


def test_the_readme_example_queries_run_as_written_through_gpuledger_sql(db: Path) -> None:
    """Each README query begins with a `--` comment, which the command line once took for an unknown option
    ("No such option: -- cheapest ..."); passed as one argument, before or after the options, it answers what
    DuckDB answers, and a mistyped option is still named as one."""
    from typer.testing import CliRunner

    from gpuledger.flows.cli import app

    readme = (DOC.parent.parent / "README.md").read_text()
    [block] = re.findall(r"^```sql\n(.*?)^```", readme, re.M | re.S)
    for query in (q.strip() for q in block.split(";") if q.strip()):
        assert query.startswith("-- ")
        cols, rows = run(db, query)
        for args in (["sql", query, "--db", str(db), "--format", "csv"], ["sql", "--format=csv", "--db", str(db), query]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 0, result.output
            header, *lines = result.stdout.splitlines()
            assert header.split(",") == cols and len(lines) == len(rows) > 0
            assert [line.split(",")[0] for line in lines] == [str(r[0]) for r in rows]

    mistyped = CliRunner().invoke(app, ["sql", "--formt", "csv", "--db", str(db), "select 1"])
    assert mistyped.exit_code == 2 and "No such option: --formt" in mistyped.output


def test_the_readme_fits_example_keeps_the_cards_it_says_it_keeps(db: Path) -> None:
    """before: `fits(vram_gb := 48, gpus := 1)`, read as "48 GB cards", left out every 48 GB card: vram_gb is the job's
    need in GiB, and a card fits when its memory less 5% headroom holds it."""
    from gpuledger.warehouse.recommender.macros import install_macros

    readme = (DOC.parent.parent / "README.md").read_text()
    [(call, need)] = re.findall(r"`select \* from (fits\(vram_gb := ([\d.]+), gpus := 1\))`", readme)
    # AWS reports the L40S (g6e) as 45776 MiB (GPU_FACTS.md of the facts): 44.70 GiB, 42.47 usable
    assert 45776 / 1024 == pytest.approx(44.70, abs=0.01) and 45776 / 1024 * 0.95 == pytest.approx(42.47, abs=0.01)
    con = duckdb.connect(str(db), read_only=True)
    try:
        install_macros(con)
        fitting = {m for (m,) in con.execute(f"select distinct gpu_model from {call}").fetchall()}
        too_big = {m for (m,) in con.execute("select distinct gpu_model from fits(48)").fetchall()}
    finally:
        con.close()
    assert float(need) <= 42.47 and "L40S" in fitting and "L40S" not in too_big
    assert "a 48 GB card (44.7 GiB, about 42.5 usable) holds `vram_gb := 40`, not 48" in " ".join(readme.split())
