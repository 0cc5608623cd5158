"""`gpuledger plot`: price history per provider, from a warehouse with a few days of real merges."""

from __future__ import annotations

import struct
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from PIL import Image
from typer.testing import CliRunner

from gpuledger.flows.ops_cli import register
from gpuledger.flows.plot import figure, plot_price_history
from tests.builders import T0, load_day, offer
from gpuledger.warehouse.store import open_writer

D = [T0 + timedelta(days=i) for i in range(5)]


@pytest.fixture(scope="module")
def history_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("plot") / "ledger.duckdb"
    con = open_writer(db)
    try:
        l4 = offer("g6.xlarge", 0.805, gpu="L4", count=1)
        spot = offer("p5.48xlarge", 40.0, option="spot", zone="us-east-1a")
        # aws: p5 cut from 80 to 72 to 64 (per GPU 10, 9, 8); a cheaper region on day 2 only (7.5)
        load_day(con, "aws", [offer("p5.48xlarge", 80.0), spot, l4], 0)
        load_day(con, "aws", [offer("p5.48xlarge", 72.0), spot, l4], 1)
        load_day(con, "aws", [offer("p5.48xlarge", 72.0), offer("p5.48xlarge", 60.0, region="us-west-2"), spot, l4], 2)
        load_day(con, "aws", [offer("p5.48xlarge", 64.0), spot, l4], 3)
        load_day(con, "aws", [offer("p5.48xlarge", 64.0), spot, l4], 4)  # unchanged: extends the line
        # gcp: 88 -> 96 (11 -> 12 per GPU); its day-1 scrape fails and changes nothing
        load_day(con, "gcp", [offer("a3-highgpu-8g", 88.0, region="us-central1")], 0)
        load_day(con, "gcp", None, 1, error="gcp: HTTP 503")
        load_day(con, "gcp", [offer("a3-highgpu-8g", 96.0, region="us-central1")], 2)
        load_day(con, "gcp", [offer("a3-highgpu-8g", 96.0, region="us-central1")], 3)
        # lambda: an H100 on day 1, gone on day 2 (only an A100 left), back dearer on day 3
        a100 = offer("gpu_1x_a100_sxm4_80gb", 1.29, gpu="A100-SXM4-80", count=1, region="us-west-1")
        load_day(con, "lambda", [offer("gpu_1x_h100_sxm5", 2.49, count=1, region="us-west-1"), a100], 1)
        load_day(con, "lambda", [a100], 2)
        load_day(con, "lambda", [offer("gpu_1x_h100_sxm5", 2.99, count=1, region="us-west-1"), a100], 3)
        # vastai: marketplace interruptible capacity only, 1.60 then 1.40 per GPU-hour
        bid = dict(gpu="H100-SXM", count=1, region="US", option="interruptible")
        load_day(con, "vastai", [offer("1x H100-SXM", 1.60, **bid)], 1)
        load_day(con, "vastai", [offer("1x H100-SXM", 1.40, **bid)], 3)
    finally:
        con.close()
    return db


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plotted_series_match_the_loaded_history(history_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "h100.png"
    h = plot_price_history(history_db, "H100-SXM", out)
    assert h.series == {
        "aws": [(D[0], 10.0), (D[1], 9.0), (D[2], 7.5), (D[3], 8.0), (D[4], 8.0)],
        "gcp": [(D[0], 11.0), (D[2], 12.0), (D[3], 12.0)],
        "lambda": [(D[1], 2.49), (D[2], None), (D[3], 2.99)],
    }
    assert h.extended == {"aws", "gcp"}  # their last point only carries the price to the last scrape that saw it
    assert h.path == out and png_size(out) == h.size_px == (1200, 660)
    with Image.open(out) as img:
        img.verify()
    with Image.open(out) as img:
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # lines, text and antialiasing, not a blank canvas


def test_spot_and_provider_filters(history_db: Path, tmp_path: Path) -> None:
    # spot covers every reclaimable offer: AWS Spot and the marketplace's interruptible bids
    h = plot_price_history(history_db, "H100-SXM", tmp_path / "spot.png", purchase_option="spot")
    assert h.series == {"aws": [(D[0], 5.0), (D[4], 5.0)], "vastai": [(D[1], 1.60), (D[3], 1.40)]}
    assert h.snapshot is None
    h = plot_price_history(history_db, "H100-SXM", tmp_path / "bids.png", purchase_option="interruptible")
    assert h.series == {"vastai": [(D[1], 1.60), (D[3], 1.40)]}
    # an option in any case, with a hyphen as the picture writes it ("on-demand"), is the same option
    assert plot_price_history(history_db, "H100-SXM", tmp_path / "s.png", purchase_option="SPOT").series == {
        "aws": [(D[0], 5.0), (D[4], 5.0)], "vastai": [(D[1], 1.60), (D[3], 1.40)]}
    assert plot_price_history(history_db, "L4", tmp_path / "o.png", purchase_option="On-Demand").series == {
        "aws": [(D[0], 0.805), (D[4], 0.805)]}
    h = plot_price_history(history_db, "H100-SXM", tmp_path / "gcp.png", providers=["gcp", "lambda"])
    assert sorted(h.series) == ["gcp", "lambda"]
    h = plot_price_history(history_db, "L4", tmp_path / "l4.png")
    assert h.series == {"aws": [(D[0], 0.805), (D[4], 0.805)]}


def test_plot_command(history_db: Path, tmp_path: Path) -> None:
    from gpuledger.flows.cli import app  # the command as gpuledger registers it, its error guard included

    runner = CliRunner()
    out = tmp_path / "cli.png"
    result = runner.invoke(app, ["plot", "--gpu", "H100-SXM", str(out), "--db", str(history_db)])
    assert result.exit_code == 0, result.output
    assert png_size(out) == (1200, 660)
    assert "H100-SXM: 3 providers, 11 points" in result.output
    result = runner.invoke(app, ["plot", "--gpu", "H200-SXM", str(tmp_path / "x.png"), "--db", str(history_db)])
    assert result.exit_code == 2
    assert "no price history for GPU 'H200-SXM'; GPUs with history: A100-SXM4-80, H100-SXM, L4" in result.output
    assert not (tmp_path / "x.png").exists()
    # a registered source this warehouse never loaded: no history from it, not "unknown provider 'hotaisle'"
    result = runner.invoke(app, ["plot", "--gpu", "H100-SXM", "-p", "HotAisle", str(tmp_path / "x.png"),
                                 "--db", str(history_db)])
    assert (result.exit_code, result.output) == (2, "error: no on_demand price history for H100-SXM from hotaisle\n")
    # a family has history through its models: say which, rather than "no price history for GPU 'H100'"
    result = runner.invoke(app, ["plot", "--gpu", "h100", str(tmp_path / "x.png"), "--db", str(history_db)])
    assert result.exit_code == 2 and not (tmp_path / "x.png").exists()
    assert result.output == "error: H100 is a family; plot one of its models: H100-SXM\n"
    # an empty name (an unset variable): said so, where it was "did you mean" the nearest names to nothing
    result = runner.invoke(app, ["plot", "--gpu", " ", str(tmp_path / "x.png"), "--db", str(history_db)])
    assert (result.exit_code, result.output) == (2, "error: unknown GPU ' '; the GPU name is empty\n")


def boxes(fig: Any) -> tuple[Any, Any]:
    """The axes' and the legend's boxes on the canvas, in pixels."""
    fig.canvas.draw()
    ax = fig.axes[0]
    return ax.get_window_extent(), ax.get_legend().get_window_extent()


def test_legend_beside_the_lines(history_db: Path, tmp_path: Path) -> None:
    h = plot_price_history(history_db, "H100-SXM", tmp_path / "h100.png")
    axes, legend = boxes(figure(h))
    assert not axes.overlaps(legend) and legend.x0 >= axes.x1  # to the right of the plot, not over it
    assert legend.x1 <= h.size_px[0]  # and still on the picture
    assert png_size(tmp_path / "h100.png") == (1200, 660)


@pytest.fixture(scope="module")
def snapshot_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("snapshot") / "ledger.duckdb"
    con = open_writer(db)
    try:  # one refresh: two providers scraped seconds apart
        load_day(con, "aws", [offer("p5.48xlarge", 80.0)], 0, "refresh-one")
        load_day(con, "lambda", [offer("gpu_1x_h100_sxm5", 2.49, count=1, region="us-west-1")], 10 / 86400,
                 "refresh-one")
    finally:
        con.close()
    return db


def test_a_single_snapshot_says_so(snapshot_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "one.png"
    h = plot_price_history(snapshot_db, "H100-SXM", out)
    assert h.series == {"aws": [(D[0], 10.0)], "lambda": [(D[0] + timedelta(seconds=10), 2.49)]}
    assert h.snapshot == D[0] + timedelta(seconds=10)
    fig = figure(h)
    ax = fig.axes[0]
    assert "one snapshot (2026-11-01 03:00 UTC)" in ax.get_title() and "no price history" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["aws", "lambda"]  # one bar each, the cheapest on top
    assert sorted(round(b.get_width(), 2) for b in ax.patches) == [2.49, 10.0]
    assert png_size(out) == (1200, 660)
    app = typer.Typer()
    register(app)
    result = CliRunner().invoke(app, ["plot", "--gpu", "H100-SXM", str(tmp_path / "cli.png"), "--db", str(snapshot_db)])
    assert result.exit_code == 0, result.output
    assert "H100-SXM: a single snapshot (2026-11-01 03:00 UTC) of 2 providers: no history yet" in result.output
    result = CliRunner().invoke(app, ["plot", "--gpu", "H100-SXM", str(tmp_path / "aws.png"), "-p", "aws",
                                      "--db", str(snapshot_db)])
    assert result.exit_code == 0, result.output
    assert "H100-SXM: a single snapshot (2026-11-01 03:00 UTC) of 1 provider: no history yet" in result.output


def test_two_refreshes_under_an_hour_apart_are_history(tmp_path: Path) -> None:
    # The market cadence refreshes every hour: vastai's bid moved between two refreshes 50 minutes apart,
    # and lambda's only H100 was gone at the second. Neither is "a single refresh".
    db = tmp_path / "ledger.duckdb"
    con = open_writer(db)
    try:
        bid = dict(gpu="H100-SXM", count=1, region="US", option="interruptible")
        a100 = offer("gpu_1x_a100_sxm4_80gb", 1.29, gpu="A100-SXM4-80", count=1, region="us-west-1")
        later = 50 / (24 * 60)
        load_day(con, "vastai", [offer("1x H100-SXM", 1.60, **bid)], 0, "refresh-1")
        load_day(con, "lambda", [offer("gpu_1x_h100_sxm5", 2.49, count=1, region="us-west-1"), a100], 0, "refresh-1")
        load_day(con, "vastai", [offer("1x H100-SXM", 1.40, **bid)], later, "refresh-2")
        load_day(con, "lambda", [a100], later, "refresh-2")
    finally:
        con.close()
    t1 = D[0] + timedelta(minutes=50)
    h = plot_price_history(db, "H100-SXM", tmp_path / "spot.png", purchase_option="spot")
    assert h.series == {"vastai": [(D[0], 1.60), (t1, 1.40)]} and h.snapshot is None
    assert "one snapshot" not in figure(h).axes[0].get_title()
    h = plot_price_history(db, "H100-SXM", tmp_path / "od.png")  # drawn, where it raised ValueError (max of nothing)
    assert h.series == {"lambda": [(D[0], 2.49), (t1, None)]} and h.snapshot is None
    assert png_size(tmp_path / "od.png") == (1200, 660)


def test_plot_never_writes_over_the_warehouse(history_db: Path, tmp_path: Path) -> None:
    from gpuledger.flows.cli import app

    db = tmp_path / "ledger.duckdb"
    db.write_bytes(history_db.read_bytes())
    (tmp_path / "link.png").symlink_to(db)  # the same file under another name
    for out in (db, tmp_path / "link.png"):
        result = CliRunner().invoke(app, ["plot", "--gpu", "H100-SXM", str(out), "--db", str(db)])
        assert result.exit_code == 2 and result.output == f"error: {out} is the warehouse: name another file to write\n"
    assert db.read_bytes() == history_db.read_bytes()


def test_every_provider_line_looks_different() -> None:
    # An H100 plot of the replayed warehouse has 26 providers; matplotlib's colour cycle has 10, so aws and
    # jarvislabs were the same blue line in the legend. Each provider's (colour, dash) is its own now.
    from gpuledger.flows.plot import PriceHistory

    names = [f"p{i:02d}" for i in range(26)]
    h = PriceHistory("H100-SXM", "on_demand", series={n: [(D[0], 1.0 + i), (D[1], 2.0 + i)]
                                                      for i, n in enumerate(names)})
    handles, labels = figure(h).axes[0].get_legend_handles_labels()
    assert labels == names
    looks = {(line.get_color(), line.get_linestyle()) for line in handles}
    assert len(looks) == 26


def test_a_nan_or_infinite_price_is_no_point_of_the_line_or_the_bars(tmp_path: Path) -> None:
    from gpuledger.flows.cli import app

    db = tmp_path / "ledger.duckdb"
    con = open_writer(db)
    try:
        load_day(con, "aws", [offer("p5.48xlarge", 80.0)], 0, "refresh-one")
        load_day(con, "lambda", [offer("gpu_1x_h100_sxm5", 2.49, count=1, region="us-west-1")], 10 / 86400,
                 "refresh-one")
        load_day(con, "gcp", [offer("a3-highgpu-8g", 88.0, region="us-central1")], 20 / 86400, "refresh-one")
        # a warehouse written by something else: offer_history has no CHECK on price_per_gpu_hour
        con.execute("update offer_history set price_per_gpu_hour = 'nan'::double where provider = 'lambda'")
        con.execute("update offer_history set price_per_gpu_hour = 'inf'::double where provider = 'gcp'")
    finally:
        con.close()
    out = tmp_path / "one.png"
    # before: series {"aws": 10.0, "gcp": inf, "lambda": nan}, and the bars raised "Axis limits cannot be NaN or Inf"
    h = plot_price_history(db, "H100-SXM", out)
    assert h.series == {"aws": [(D[0], 10.0)]} and h.snapshot == D[0]
    assert png_size(out) == (1200, 660)
    result = CliRunner().invoke(app, ["plot", "--gpu", "H100-SXM", str(tmp_path / "x.png"), "-p", "lambda",
                                      "--db", str(db)])
    assert (result.exit_code, result.output) == (2, "error: no on_demand price history for H100-SXM from lambda\n")
