"""One rule for usage errors across the command line: a name that matches nothing (a GPU, a
provider, a region, a model, a method, a table, a format), a value that is not one, or a file
that is not a gpuledger warehouse is one line on stderr and exit 2 in every command; a name in
another case is the same name. The warehouse: Lambda replayed through its real client."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest
import typer.main
from typer.testing import CliRunner

from gpuledger.flows.cli import app
from gpuledger.flows.refresh import resolve_providers
from tests.builders import replayed_warehouse

runner = CliRunner()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("usage") / "ledger.duckdb"
    replayed_warehouse(path, ["lambda"])
    return path


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


USAGE_ERRORS = [
    (["show-gpus", "--gpu", "H1000"], "unknown GPU 'H1000'; did you mean H100, "),
    (["show-gpus", "H1000"], "unknown GPU 'H1000'; did you mean H100, "),
    (["show-gpus", "-p", "lambdda"], "unknown provider 'lambdda'; did you mean lambda"),
    (["show-gpus", "--region", "us-sooth-1"], "unknown region 'us-sooth-1'; did you mean us-south-1"),
    (["status", "-p", "lambdda"], "unknown provider 'lambdda'; did you mean lambda"),
    (["recommend", "--model", "llama-3-8", "--method", "qlora"], "unknown model 'llama-3-8'; did you mean "),
    (["recommend", "--model", "llama-3-8b", "--method", "qlorra"], "unknown method 'qlorra'; did you mean qlora"),
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "-p", "lambdda"],
     "unknown provider 'lambdda'; did you mean lambda"),
    (["plot", "--gpu", "H1000", "OUT/p.png"], "unknown GPU 'H1000'; did you mean H100, "),
    (["plot", "--gpu", "H100-SXM", "-p", "lambdda", "OUT/p.png"], "unknown provider 'lambdda'; did you mean lambda"),
    (["report", "OUT/p.html", "--model", "llama-3-8"], "unknown model 'llama-3-8'; did you mean "),
    (["export", "OUT", "-t", "nosuch"], "unknown table 'nosuch'; did you mean "),
    (["export", "OUT", "--format", "xml"], "unknown export format 'xml'; did you mean "),
    (["export", "OUT", "--since", "yesterday"], "--since 'yesterday' is not a date or time"),
    (["sql", "select 1", "--format", "xml"], "'xml' is not one of 'table', 'csv', 'json'"),
    (["refresh", "-p", "lambdda"], "unknown provider 'lambdda'; did you mean lambda"),
    (["sql", "select 1", "--json", "--format", "csv"], "--json and --format csv ask for two formats: give one"),
    (["status", "--format", "csv", "--json"], "--json and --format csv ask for two formats: give one"),
    (["pull", "OUT", "-f", "csv", "--json"], "--json and --format csv ask for two formats: give one"),
    (["status", "--stale-after", "1e12"], "--stale-after': 1e+12 is not a number of hours within (0, 1e+09]"),
    (["status", "--stale-after", "0"], "--stale-after': 0 is not a number of hours within (0, 1e+09]"),
    (["report", "OUT/p.html", "--stale-after", "0"], "--stale-after': 0 is not a number of hours within (0, 1e+09]"),
    # before: the last of two contradictory flags won in silence (--on-demand --spot listed spot offers)
    (["show-gpus", "H100-SXM", "--on-demand", "--spot"], "--spot and --on-demand exclude each other"),
    (["show-gpus", "--spot", "--on-demand"], "--spot and --on-demand exclude each other"),
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "--grad-ckpt", "--no-grad-ckpt"],
     "--grad-ckpt and --no-grad-ckpt exclude each other"),
    # before: "seq_len must be ...", "checkpoint_every_minutes must be ...": the request's fields, not the flags
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "--seq-len", "0"],
     "error: --seq-len must be at least 1, got 0"),
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "--checkpoint-every", "0"],
     "error: --checkpoint-every must be within [1, 1440], got 0.0"),
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "--max-age-hours", "-1"],
     "error: --max-age-hours must be positive and at most 1e+09, got -1.0"),
    (["recommend", "--model", "llama-3-8b", "--method", "qlora", "--tokens", "5", "--dataset-tokens", "5"],
     "error: give the job size once: --tokens, --dataset-tokens (x --epochs) or --examples (x --seq-len x --epochs)"),
    (["recommend", "--model", "hours", "--method", "qlora"],  # a value given, and a flag named, stay as they are
     "error: unknown model 'hours'; did you mean "),
    (["show-gpus", "--min-vram", "-1"], "error: --min-vram must be a number >= 0, got -1.0"),
    # before: the first statement's rows were dropped unseen, `2` printed alone
    (["sql", "select 1; select 2"], "statement 1 of 2 is a select, whose rows would not be shown"),
    (["sql", "create temp table t as select 1; pragma version; from t"], "statement 2 of 3 is a pragma, whose rows"),
]


@pytest.mark.parametrize("args, says", USAGE_ERRORS, ids=[" ".join(a[:3]) for a, _ in USAGE_ERRORS])
def test_every_usage_error_exits_2_in_one_line(args: list[str], says: str, db: Path, tmp_path: Path) -> None:
    args = [a.replace("OUT", str(tmp_path / "out")) for a in args]
    code, text = run(*args, "--db", str(db))
    said = " ".join(text.replace("│", " ").split())
    assert code == 2 and says in said, (code, text)
    if "error:" in text:  # ours (click's own usage errors draw a box)
        assert text.startswith("error: ") and len(text.strip().splitlines()) == 1, text
    assert not (tmp_path / "out").exists()


def test_names_in_another_case_are_the_same_names(db: Path, tmp_path: Path) -> None:
    assert resolve_providers(["LAMBDA", "Aws", "lambda"]) == ["lambda", "aws"]
    for args in (["status", "-p", "LAMBDA", "--json"], ["show-gpus", "H100-sxm", "-p", "Lambda"],
                 ["recommend", "--model", "Llama-3-8B", "--method", "QLoRA", "-p", "LAMBDA", "--top", "1"],
                 ["plot", "--gpu", "h100-sxm", "-p", "LAMBDA", str(tmp_path / "p.png")]):
        code, text = run(*args, "--db", str(db))
        assert code == 0 and ("lambda" in text or args[0] == "plot"), (args, text)
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_a_file_that_is_no_warehouse_is_refused_alike_by_every_command(tmp_path: Path) -> None:
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))  # another program's DuckDB file
    con.execute("create table offers (x integer)")
    con.close()
    garbage = tmp_path / "garbage.duckdb"
    garbage.write_bytes(bytes(range(256)) * 64)
    commands = (["check"], ["status"], ["sql", "select 1"], ["show-gpus"], ["export", str(tmp_path / "out")],
                ["recommend", "--model", "llama-3-8b", "--method", "qlora"], ["report", str(tmp_path / "p.html")])
    for path, message in ((other, f"error: {other} is a DuckDB file but not a gpuledger warehouse"),
                          (garbage, f"error: {garbage} is not a DuckDB database (pass --db a gpuledger warehouse")):
        said = set()
        for args in commands:
            code, text = run(*args, "--db", str(path))
            assert code == 2 and text.startswith(message) and len(text.strip().splitlines()) == 1, (args, text)
            said.add(" ".join(text.split()))
        assert len(said) == 1, said  # the same words from every command
    assert not (tmp_path / "out").exists() and not (tmp_path / "p.html").exists()


def test_every_commands_help_shows_each_option_name_whole_at_80_columns() -> None:
    """before: `COLUMNS=80 gpuledger recommend --help` showed --dataset-toke…, --checkpoint-e…, --include-unav…"""
    for name, command in typer.main.get_command(app).commands.items():
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, name
        for param in command.params:
            if isinstance(param, typer.core.TyperArgument) or not param.opts:
                continue
            first = next(o for o in param.opts if o.startswith("--"))
            starts = re.compile(rf"│[ *]{{1,4}}{re.escape(first)} ")  # the option column, not a help text
            rows = [line for line in result.output.splitlines() if starts.match(line)]
            assert len(rows) == 1, (name, first, rows)
            row = rows[0]
            for option in param.opts + param.secondary_opts:  # each whole in its row: -m, --no-grad-ckpt
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w…-])", row), (name, option, row)


def test_a_gpu_count_range_that_holds_nothing_is_refused(db: Path) -> None:
    import gpuledger
    from gpuledger.warehouse.offer_filter import FilterError

    # before: 0 offers and no word of why
    with pytest.raises(FilterError, match=r"^min_gpu_count 4 is more than max_gpu_count 2: no offer can pass both$"):
        gpuledger.query(gpu="H100", min_gpu_count=4, max_gpu_count=2, db=db)
    # a range of one count is a range: Lambda's recording offers H100s 8 to a node (gpu_8x_h100_sxm5)
    eight = gpuledger.query(gpu="H100", min_gpu_count=8, max_gpu_count=8, db=db).df()
    assert "gpu_8x_h100_sxm5" in set(eight["instance_type"]) and set(eight["gpu_count"]) == {8}


def test_show_gpus_says_a_named_provider_holds_no_offer_here(db: Path) -> None:
    # before: `show-gpus -p aws` on a warehouse of Lambda alone said "no current offer passes these filters"
    result = runner.invoke(app, ["show-gpus", "-p", "aws", "--db", str(db), "--format", "csv"])
    assert result.exit_code == 0 and result.stdout.count("\n") == 1, result.output  # the header alone
    assert result.stderr.splitlines() == [
        "no current offer in this warehouse from aws (never loaded); `gpuledger status` shows each provider's scrapes",
        "no current offer passes these filters"]
    # beside a provider that has offers: its rows (Lambda's recording: gpu_8x_h100_sxm5 at $31.92/h), and the line
    result = runner.invoke(app, ["show-gpus", "H100-SXM", "-p", "aws", "-p", "lambda", "--db", str(db), "--json"])
    assert [(r["provider"], r["usd_per_hour"]) for r in json.loads(result.stdout)] == [("lambda", 31.92)]
    assert result.stderr.startswith("no current offer in this warehouse from aws (never loaded);")


def test_the_python_apis_messages_keep_their_field_names() -> None:
    from gpuledger.warehouse.recommender.recommend import RecommendRequest

    with pytest.raises(ValueError, match=r"^seq_len must be at least 1, got 0$"):
        RecommendRequest(method="qlora", model="llama-3-8b", seq_len=0)
    with pytest.raises(ValueError, match=r"^checkpoint_every_minutes must be within \[1, 1440\], got 0$"):
        RecommendRequest(method="qlora", model="llama-3-8b", checkpoint_every_minutes=0)
