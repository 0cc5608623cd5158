"""The Python API (`gpuledger.query`) and `gpuledger show-gpus`, over a warehouse of two providers
loaded from their bundled recordings by the refresh's own fetch and merge (tests/builders.py).

Prices checked by hand against the recordings: Lambda's gpu_8x_h100_sxm5 is 3192 cents an hour
(3.99 USD per GPU-hour), RunPod's "NVIDIA H100 80GB HBM3" has communityPrice 2.69, securePrice
3.99, communitySpotPrice 1.5 and secureSpotPrice 1.75 (adapters/recordings/{lambda,runpod}/).
A hand-made provider `acme` adds an 8x H100-SXM on demand at 40 USD an hour (5 per GPU-hour) and
a 1-year reservation of it at 10 (1.25 per GPU-hour, the cheapest of all).
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest
from rich.console import Console
from typer.testing import CliRunner

import gpuledger
from gpuledger.flows.cli import app
from gpuledger.warehouse.offer_filter import FilterError
from gpuledger.warehouse.store import WarehouseError
from gpuledger.flows import output
from gpuledger.flows.report import gpu_facts, report_rows
from gpuledger.flows.report import gpu_summary as page_summary
from gpuledger.warehouse.store import open_reader, utcnow
from tests.builders import batch, load, offer, replayed_warehouse, scraped


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("api")
    db = folder / "gpuledger.duckdb"  # the default name, for the one-liner run in this folder
    replayed_warehouse(db, ["lambda", "runpod"])
    now = utcnow()
    acme = batch("acme", [offer("acme-8x", 40.0), offer("acme-8x", 10.0, option="reserved_1y_no_upfront",
                                                         term_months=12, payment_option="no_upfront")])
    load(db, [scraped("acme", "replay", now, now, batch=acme)], "refresh-acme")
    return db


def test_query_filters_and_orders_by_price(warehouse: Path) -> None:
    offers = gpuledger.query(gpu="H100-SXM", min_vram_gb=80, spot=False, db=warehouse)
    assert {o.purchase_option for o in offers} == {"on_demand"}
    assert {o.gpu_model for o in offers} == {"H100-SXM"}
    cheapest = offers[0]
    assert (cheapest.provider, cheapest.region, cheapest.price_per_gpu_hour) == ("runpod", "community-cloud", 2.69)
    lambda_8x = [o for o in offers if o.instance_type == "gpu_8x_h100_sxm5"]
    assert {o.price_per_hour for o in lambda_8x} == {31.92}
    assert {o.price_per_gpu_hour for o in lambda_8x} == {3.99}
    prices = [o.price_per_gpu_hour for o in offers]
    assert prices == sorted(prices)


def test_query_spot_family_provider_and_price_filters(warehouse: Path) -> None:
    spot = gpuledger.query(gpu="h100-sxm", spot=True, db=warehouse)
    assert sorted((o.region, o.purchase_option, o.price_per_gpu_hour) for o in spot) == [
        ("community-cloud", "interruptible", 1.5), ("secure-cloud", "interruptible", 1.75)]
    family = gpuledger.query(gpu="H100", providers=["lambda"], db=warehouse)
    assert family and {o.provider for o in family} == {"lambda"}
    assert {o.gpu_model for o in family} >= {"H100-SXM", "H100-PCIe"}
    assert gpuledger.query(gpu="H100-SXM", max_price=2.0, db=warehouse) == spot
    assert gpuledger.query(gpu="H100-SXM", regions=["us-south-*"], spot=False, db=warehouse)
    assert {o.region for o in gpuledger.query(gpu="H100-SXM", regions=["us-south-*"], db=warehouse)} == {"us-south-1"}


def test_on_demand_with_commitments_keeps_the_commitments(warehouse: Path) -> None:
    """query(spot=False, commitments=True) (show-gpus --on-demand --commitments) gave on-demand offers only."""
    acme = gpuledger.query(providers=["acme"], spot=False, commitments=True, db=warehouse)
    assert sorted((o.purchase_option, o.price_per_hour) for o in acme) == [
        ("on_demand", 40.0), ("reserved_1y_no_upfront", 10.0)]
    assert [o.purchase_option for o in gpuledger.query(providers=["acme"], spot=False, db=warehouse)] == ["on_demand"]


def test_query_frames(warehouse: Path) -> None:
    offers = gpuledger.query(gpu="H100-SXM", spot=False, db=warehouse)
    df = offers.df()
    assert len(df) == len(offers) and df["price_per_gpu_hour"].iloc[0] == 2.69
    assert "content_hash" not in df.columns and "first_seen" in df.columns
    pl = offers.pl()
    assert pl.height == len(offers) and pl["provider"][0] == "runpod"


def test_query_reads_read_only_and_says_what_is_wrong(warehouse: Path, tmp_path: Path) -> None:
    before = warehouse.stat().st_mtime_ns
    gpuledger.query(db=warehouse)
    assert warehouse.stat().st_mtime_ns == before
    with pytest.raises(WarehouseError, match="no warehouse at"):
        gpuledger.query(db=tmp_path / "missing.duckdb")
    with pytest.raises(FilterError, match="min_vram_gb"):
        gpuledger.query(min_vram_gb=-1, db=warehouse)
    with pytest.raises(FilterError, match="lists of names"):
        gpuledger.query(providers="aws", db=warehouse)


def test_query_beside_a_notebook_connection_to_the_same_file(warehouse: Path) -> None:
    # README: the file opens in pandas as duckdb.connect(path, read_only=True); in the same process the
    # API had been refused as "a damaged or truncated file: restore it".
    import duckdb

    notebook = duckdb.connect(str(warehouse), read_only=True)
    try:
        spot = gpuledger.query(gpu="H100-SXM", spot=True, db=warehouse)
        assert [(o.region, o.price_per_gpu_hour) for o in spot] == [("community-cloud", 1.5), ("secure-cloud", 1.75)]
        assert notebook.sql("select count(*) from offers where provider = 'acme'").fetchall() == [(2,)]
    finally:
        notebook.close()


def test_query_gives_its_times_in_utc_whatever_the_zone_of_the_machine(warehouse: Path) -> None:
    """On a machine in Asia/Kolkata (here: a notebook's connection that set it for the process), first_seen and
    last_seen came back at +05:30 and .df()'s columns in that zone, where the CLI shows UTC."""
    import duckdb

    notebook = duckdb.connect(str(warehouse), read_only=True)
    try:
        notebook.execute("set global TimeZone = 'Asia/Kolkata'")
        offers = gpuledger.query(gpu="H100-SXM", spot=True, db=warehouse)
        seen = [o.last_seen.utcoffset() for o in offers] + [o.first_seen.utcoffset() for o in offers]
        assert seen == [timedelta(0)] * 4
        assert str(offers.arrow().schema.field("last_seen").type) == "timestamp[us, tz=UTC]"
        assert notebook.execute("select current_setting('TimeZone')").fetchall() == [("Asia/Kolkata",)]
    finally:
        notebook.close()


def test_spot_and_commitments_that_are_not_booleans_raise(warehouse: Path) -> None:
    # spot="no" or spot=0 had matched neither `is True` nor `is False`: on-demand and spot offers both, in silence
    assert len(gpuledger.query(gpu="H100-SXM", spot=None, db=warehouse)) > 2
    for wrong in ({"spot": "no"}, {"spot": 0}, {"spot": "true"}, {"commitments": "yes"}):
        with pytest.raises(ValueError, match=r"^spot is True, False or None and commitments True or False, got "):
            gpuledger.query(gpu="H100-SXM", db=warehouse, **wrong)


def test_a_truncated_warehouse_is_a_warehouse_error_as_in_the_cli(warehouse: Path, tmp_path: Path) -> None:
    # Its header opens; its pages fail when read: that had been DuckDB's own IOException.
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(warehouse.read_bytes()[:int(warehouse.stat().st_size * 0.3)])
    with pytest.raises(WarehouseError, match=rf"^cannot read the warehouse {cut}: IO Error: Could not read .*"
                                             r"\(a damaged or truncated file: restore it, or refresh into a new --db\)$"):
        gpuledger.query(db=cut)


def test_done_means_one_liner_uses_the_default_warehouse(warehouse: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPULEDGER_DB"}
    line = "import gpuledger; print(gpuledger.query(gpu='H100-SXM', spot=False)[:3])"
    done = subprocess.run([sys.executable, "-c", line], cwd=warehouse.parent, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[Offer(provider='runpod', instance_type='1x NVIDIA H100 80GB HBM3', "
                                  "region='community-cloud', zone='', purchase_option='on_demand', "
                                  "gpu_model='H100-SXM', gpu_count=1.0, price_per_gpu_hour=2.69, ...)")
    assert done.stdout.count("Offer(") == 3


def as_schema_9(db: Path) -> None:
    """The warehouse made a schema-9 one: offers without gpu_memory_from_canon (added by schema 10)."""
    con = duckdb.connect(str(db))
    try:
        con.execute("drop view if exists offer_freshness; alter table offers drop column gpu_memory_from_canon; "
                    "delete from schema_migrations where version >= 10")
    finally:
        con.close()


def test_query_of_a_warehouse_older_than_its_columns_says_refresh_upgrades_it(warehouse: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    old.write_bytes(warehouse.read_bytes())
    as_schema_9(old)
    # before: DuckDB's BinderException (Table "o" does not have a column named "gpu_memory_from_canon")
    with pytest.raises(WarehouseError, match=r"^the warehouse is at schema version 9, this gpuledger reads version "
                                             r"13: the next `gpuledger refresh` upgrades it in place$"):
        gpuledger.query(db=old)


def test_names_match_in_any_case_and_an_unknown_one_raises_naming_the_nearest(warehouse: Path) -> None:
    exact = gpuledger.query(gpu="H100-SXM", providers=["runpod"], regions=["community-cloud"], db=warehouse)
    assert exact and gpuledger.query(gpu="h100-sxm", providers=["RunPod"], regions=["Community-Cloud"],
                                     db=warehouse) == exact
    assert gpuledger.query(gpu="h100", regions=["US-*"], db=warehouse)  # a family, a prefix
    with pytest.raises(ValueError, match=r"^unknown GPU 'H1000'; did you mean H100\b"):
        gpuledger.query(gpu="H1000", db=warehouse)
    with pytest.raises(FilterError, match=r"^unknown provider 'lambdda'; did you mean lambda\b"):
        gpuledger.query(providers=["lambdda"], db=warehouse)
    with pytest.raises(FilterError, match=r"^unknown region 'eu-\*'; did you mean"):  # was 'eu-', not as given
        gpuledger.query(regions=["eu-*"], db=warehouse)
    # A registered source this warehouse never loaded is a name, not a mistake: nothing from it.
    assert gpuledger.query(providers=["AWS"], db=warehouse) == []


def test_providers_or_regions_none_is_no_filter_as_for_every_other_argument(warehouse: Path) -> None:
    everything = gpuledger.query(db=warehouse)
    # before: TypeError: 'NoneType' object is not iterable
    assert gpuledger.query(providers=None, regions=None, db=warehouse) == everything and len(everything) > 2
    with pytest.raises(FilterError, match="^providers and regions are lists of names, not one string$"):
        gpuledger.query(providers="", db=warehouse)


def test_an_empty_gpu_name_raises_as_show_gpus_refuses_it(warehouse: Path) -> None:
    # gpu="" (an unset variable) had returned every GPU's offers, as gpu=None does, in silence
    assert len(gpuledger.query(gpu=None, db=warehouse)) > len(gpuledger.query(gpu="H100", db=warehouse)) > 0
    with pytest.raises(FilterError, match=r"^the GPU name is empty: name a model \(H100-SXM\) or a family \(H100\)"):
        gpuledger.query(gpu="", db=warehouse)


def test_commitments_only_when_asked(warehouse: Path) -> None:
    assert {o.purchase_option for o in gpuledger.query(providers=["acme"], db=warehouse)} == {"on_demand"}
    both = gpuledger.query(providers=["acme"], commitments=True, db=warehouse)
    assert [(o.purchase_option, o.price_per_gpu_hour) for o in both] == [("reserved_1y_no_upfront", 1.25),
                                                                         ("on_demand", 5.0)]


def show(*args: str) -> Any:
    return CliRunner().invoke(app, ["show-gpus", *args])


def test_show_gpus_counts_what_it_prices_and_names_the_cheapest_provider(warehouse: Path) -> None:
    result = show("--db", str(warehouse), "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(rows[0]) == ["gpu_model", "vram_gb", "on_demand_usd", "on_demand_provider", "spot_usd",
                             "spot_provider", "offers", "providers", "regions", "obtainable"]
    models = [r["gpu_model"] for r in rows]
    assert len(models) == len(set(models))
    h100 = next(r for r in rows if r["gpu_model"] == "H100-SXM")
    # 5 Lambda + 4 RunPod + acme's on-demand offer; acme's reservation is no on-demand or spot price.
    # Obtainable: 7 observations (Lambda's three types in us-south-1, one in us-midwest-1, the 2x type
    # sold out as "global"; RunPod's type in each cloud), 6 with capacity; acme publishes no signal.
    assert h100 == {"gpu_model": "H100-SXM", "vram_gb": "80.0", "on_demand_usd": "2.69", "on_demand_provider": "runpod",
                    "spot_usd": "1.5", "spot_provider": "runpod", "offers": "10", "providers": "acme, lambda, runpod",
                    "regions": "6", "obtainable": str(round(6 / 7, 4))}
    assert int(h100["offers"]) == len(gpuledger.query(gpu="H100-SXM", db=warehouse))
    committed = show("--db", str(warehouse), "--format", "json", "--commitments", "--gpu", "h100-sxm")
    [h100] = json.loads(committed.stdout)
    assert (h100["committed_usd"], h100["committed_provider"], h100["offers"]) == (1.25, "acme", 11)


def test_show_gpus_filters_are_the_api_filters(warehouse: Path) -> None:
    result = show("--db", str(warehouse), "--on-demand", "-p", "LAMBDA", "--min-vram", "80", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    offers = gpuledger.query(spot=False, providers=["lambda"], min_vram_gb=80, db=warehouse)
    assert {r["gpu_model"] for r in rows} == {o.gpu_model for o in offers}
    assert all(r["spot_usd"] is None and r["providers"] == "lambda" for r in rows)
    h100 = next(r for r in rows if r["gpu_model"] == "H100-SXM")
    assert (h100["on_demand_usd"], h100["on_demand_provider"]) == (3.99, "lambda")


def test_show_gpus_for_one_gpu_lists_each_provider_and_option_like_the_page(warehouse: Path) -> None:
    result = show("h100-sxm", "--db", str(warehouse), "--format", "json")
    assert result.exit_code == 0, result.output
    rows = [tuple(r.values()) for r in json.loads(result.stdout)]
    # the cheapest offer of each provider and option; Lambda's 8x at 31.92/h in two regions, the first by name
    assert rows == [
        ("H100-SXM", "runpod", "on_demand", 2.69, 2.69, 1.0, "1x NVIDIA H100 80GB HBM3", "community-cloud", 80.0, 2, 1.0),
        ("H100-SXM", "lambda", "on_demand", 3.99, 31.92, 8.0, "gpu_8x_h100_sxm5", "us-midwest-1", 80.0, 5, 1.0),
        ("H100-SXM", "acme", "on_demand", 5.0, 40.0, 8.0, "acme-8x", "us-east-1", 80.0, 1, None),
        ("H100-SXM", "runpod", "interruptible", 1.5, 1.5, 1.0, "1x NVIDIA H100 80GB HBM3", "community-cloud", 80.0, 2,
         1.0)]
    # the page's GPU view counts the same offers, per provider and in all
    con = open_reader(warehouse)
    try:
        page = {g["gpu"]: g for g in page_summary(report_rows(con), gpu_facts(con))}
    finally:
        con.close()
    assert {p["provider"]: p["offers"] for p in page["H100-SXM"]["providers"]} == {"runpod": 4, "lambda": 5, "acme": 1}
    summary = json.loads(show("--db", str(warehouse), "--format", "json").stdout)
    assert {r["gpu_model"]: r["offers"] for r in summary} == {g: p["offers"] for g, p in page.items()}
    # a family lists every variant; a commitment is a row of its own, after the options without one
    family = json.loads(show("H100", "--db", str(warehouse), "--format", "json", "--commitments").stdout)
    assert {r["gpu_model"] for r in family} == {"H100-SXM", "H100-PCIe", "H100-NVL"}
    sxm = [(r["provider"], r["purchase_option"]) for r in family if r["gpu_model"] == "H100-SXM"]
    assert sxm == [("runpod", "on_demand"), ("lambda", "on_demand"), ("acme", "on_demand"),
                   ("runpod", "interruptible"), ("acme", "reserved_1y_no_upfront")]


def test_show_gpus_never_cuts_a_provider_name(warehouse: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = Console(width=90, record=True, file=io.StringIO())
    monkeypatch.setattr(output, "out", narrow)
    assert show("--db", str(warehouse), "--gpu", "H100-SXM").exit_code == 0
    text = narrow.export_text()
    assert "…" not in text and all(name in text for name in ("acme", "lambda", "runpod")), text


def test_show_gpus_table_lists_every_provider_of_a_gpu(tmp_path: Path) -> None:
    # The real warehouse has 26 providers of H100-SXM: 242 characters of names, which the table had cut at a
    # cell's 200 ("..., runpod, scal…": scaleway, tensordock, vastai, verda and vultr not shown)
    db = tmp_path / "ledger.duckdb"
    names = [f"cloud-number-{i:02d}" for i in range(16)]  # 16 x 15 characters and 15 separators: 270
    now = utcnow()
    load(db, [scraped(name, "replay", now, now, batch=batch(name, [offer(f"{name}-8x", 40.0 + i)]))
              for i, name in enumerate(names)], "refresh-many")
    result = show("--db", str(db))
    assert result.exit_code == 0, result.output
    assert "…" not in result.output
    shown = " ".join(line.split("│")[8].strip() for line in result.output.splitlines() if line.count("│") > 8)
    assert shown == ", ".join(names)


def test_show_gpus_bad_input_is_one_line_exit_2(warehouse: Path, tmp_path: Path) -> None:
    bad = show("--db", str(warehouse), "--format", "xml")
    said = " ".join(bad.output.replace("│", " ").split())
    assert bad.exit_code == 2 and "Invalid value for '--format' / '-f'" in said and \
        "'xml' is not one of 'table', 'csv', 'json'" in said, said
    for args, message in ((["--gpu", "H1000"], "error: unknown GPU 'H1000'; did you mean H100, "),
                          (["H1000"], "error: unknown GPU 'H1000'; did you mean H100, "),
                          (["-p", "lambdda"], "error: unknown provider 'lambdda'; did you mean lambda"),
                          (["--region", "mars-1"], "error: unknown region 'mars-1'; did you mean "),
                          ([""], "error: the GPU name is empty: name a model (H100-SXM) or a family (H100)"),
                          (["--gpu", ""], "error: the GPU name is empty: ")):
        result = show("--db", str(warehouse), *args)
        assert result.exit_code == 2 and result.output.startswith(message), (args, result.output)
        assert len(result.output.strip().splitlines()) == 1, result.output
    aws = show("--db", str(warehouse), "--provider", "AWS")  # registered, never loaded here: said, exit 0
    assert aws.exit_code == 0 and "no current offer passes these filters" in aws.output
    missing = show("--db", str(tmp_path / "none.duckdb"))
    assert missing.exit_code == 2 and "no warehouse at" in missing.output and "Traceback" not in missing.output


def test_show_gpus_and_report_on_an_older_warehouse_say_refresh_upgrades_it(warehouse: Path, tmp_path: Path) -> None:
    # A warehouse of schema 10 (before availability_history and its view availability_obtainable): show-gpus had
    # ended in DuckDB's Catalog Error and a traceback; export already said this
    old = tmp_path / "old.duckdb"
    old.write_bytes(warehouse.read_bytes())
    con = duckdb.connect(str(old))
    try:
        con.execute("drop view availability_obtainable; drop macro table availability_obtainable_at; "
                    "drop table availability_history; drop table fetch_validators; "
                    "delete from schema_migrations where version >= 11")
    finally:
        con.close()
    for args in ((), ("H100",), ("--gpu", "H100", "--json")):
        result = show("--db", str(old), *args)
        assert (result.exit_code, result.output) == (2, "error: the warehouse is at schema version 10, this gpuledger "
                                                        "reads version 13: the next `gpuledger refresh` upgrades it "
                                                        "in place\n"), (args, result.output)
    # the page reads that view too: before, DuckDB's Catalog Error and a traceback
    page = tmp_path / "page.html"
    result = CliRunner().invoke(app, ["report", str(page), "--db", str(old)])
    assert (result.exit_code, result.output) == (2, "error: the warehouse is at schema version 10, this gpuledger "
                                                    "reads version 13: the next `gpuledger refresh` upgrades it in "
                                                    "place\n")
    assert not page.exists()
    as_schema_9(old)  # which recommend reads (a BinderException's traceback)
    result = CliRunner().invoke(app, ["recommend", "--model", "llama-3-8b", "--method", "qlora", "--db", str(old)])
    assert (result.exit_code, result.output) == (2, "error: the warehouse is at schema version 9, this gpuledger "
                                                    "reads version 13: the next `gpuledger refresh` upgrades it in "
                                                    "place\n")
