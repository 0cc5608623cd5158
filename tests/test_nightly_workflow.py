"""The nightly GitHub workflow keeps history: on a cache miss it restores the warehouse from the
published catalog, it publishes each night's catalog, and a provider without credentials leaves
the run green. Its steps run here as GitHub runs them (bash -eo pipefail), `gh` replaced by a
stand-in that keeps a release's assets in a folder."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
from gpuledger.flows.cli import app
from gpuledger.flows.fetch import SourcePlan, fetch_outcome
from gpuledger.warehouse import pending
from gpuledger.warehouse.catalog import MANIFEST
from tests.builders import lambda_price_hook, replayed_warehouse, shared_prefect_server

ROOT = Path(__file__).parent.parent
SHELL = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c"]  # GitHub's `shell: bash`

# A stand-in for the GitHub CLI's release commands this workflow runs: the release `catalog` is the
# folder $RELEASE, every call is appended to $GH_LOG.
FAKE_GH = r"""#!/bin/bash
echo "$*" >> "$GH_LOG"
[ "$1" = release ] || exit 2
case "$2" in
  view) [ -n "$GH_DOWN" ] && { echo "HTTP 502: Bad Gateway (https://api.github.com/...)" >&2; exit 1; }
        [ -d "$RELEASE" ] || { echo "release not found" >&2; exit 1; }
        case " $* " in *" --json assets "*) ls "$RELEASE" ;; esac ;;
  create) mkdir -p "$RELEASE" ;;
  download) dir="${@: -1}"; mkdir -p "$dir"; cp "$RELEASE"/* "$dir"/ ;;
  upload) cp "$4" "$RELEASE"/ ;;
  delete-asset) rm "$RELEASE/$4" ;;
  *) exit 2 ;;
esac
"""


def workflow() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def step(job: str, name: str) -> str:
    return next(s for s in workflow()["jobs"][job]["steps"] if s.get("name") == name)["run"]


def run_step(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    path = f"{cwd / 'bin'}{os.pathsep}{os.environ['PATH']}{os.pathsep}{Path(sys.executable).parent}"
    return subprocess.run([*SHELL, script], cwd=cwd, env=dict(os.environ, PATH=path, **env), capture_output=True,
                          text=True, timeout=300)


def offers_and_history(db: Path) -> list[Any]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [con.execute(f"select count(*), md5(string_agg(t::varchar, '|' order by t::varchar)) from {t} t"
                            ).fetchall() for t in ("offers", "offer_history")]
    finally:
        con.close()


RESTORE = "Restore the warehouse from the published catalog when the cache has none"


def test_a_cache_miss_restores_the_warehouse_from_the_published_catalog(tmp_path: Path) -> None:
    published = tmp_path / "published.duckdb"
    replayed_warehouse(published, ["lambda", "runpod"])
    assert CliRunner().invoke(app, ["publish", str(tmp_path / "catalog"), "--db", str(published)]).exit_code == 0
    db = tmp_path / "warehouse-data" / "gpuledger.duckdb"
    script = step("refresh", RESTORE)

    restored = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "catalog"))
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "::warning::no cached warehouse (evicted?): restoring it from the published catalog" in restored.stdout
    assert offers_and_history(db) == offers_and_history(published)

    # a cache hit: the cached warehouse is used as it is
    cached = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "nowhere"))
    assert cached.returncode == 0 and "warehouse restored from the Actions cache" in cached.stdout


def fake_gh(tmp_path: Path) -> Path:
    fake = tmp_path / "bin" / "gh"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(FAKE_GH)
    fake.chmod(0o755)
    return fake


def test_a_cache_miss_without_a_catalog_fails_rather_than_start_empty(tmp_path: Path) -> None:
    fake_gh(tmp_path)
    db = tmp_path / "warehouse-data" / "gpuledger.duckdb"
    script = step("refresh", RESTORE)
    gh = dict(RELEASE=str(tmp_path / "release"), GH_LOG=str(tmp_path / "gh.log"), GITHUB_REPOSITORY="owner/repo")
    missing = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "no-catalog"), **gh)
    assert missing.returncode == 2 and "manifest.json: not in" in missing.stderr
    empty = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "no-catalog"),
                     START_EMPTY="true", **gh)
    assert empty.returncode == 0 and "start_empty asked for an empty one" in empty.stdout and not db.exists()
    # a release whose first publish stopped before its manifest holds no catalog either
    (tmp_path / "release").mkdir()
    (tmp_path / "release" / "lambda.offers.20261201T030000Z.parquet").write_bytes(b"PAR1")
    empty = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "release"),
                     START_EMPTY="true", **gh)
    assert empty.returncode == 0 and "start_empty asked for an empty one" in empty.stdout and not db.exists()
    # GitHub not answering is not "nothing published": the run stops rather than start empty
    down = run_step(script, tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(tmp_path / "release"),
                    START_EMPTY="true", GH_DOWN="1", **gh)
    assert down.returncode == 1 and "::error::cannot tell whether the release catalog is published" in down.stdout
    assert not db.exists()


def test_start_empty_beside_a_published_catalog_restores_from_it(tmp_path: Path) -> None:
    """Started empty, the run would publish a second history of the published offers into the catalog (each
    pulled offer then has two open versions and `gpuledger check` fails): start_empty is for the first run."""
    fake_gh(tmp_path)
    published = tmp_path / "published.duckdb"
    replayed_warehouse(published, ["lambda", "runpod"])
    release = tmp_path / "release"
    assert CliRunner().invoke(app, ["publish", str(release), "--db", str(published)]).exit_code == 0
    db = tmp_path / "warehouse-data" / "gpuledger.duckdb"
    restored = run_step(step("refresh", RESTORE), tmp_path, GPULEDGER_DB=str(db), CATALOG_URL=str(release),
                        START_EMPTY="true", RELEASE=str(release), GH_LOG=str(tmp_path / "gh.log"),
                        GITHUB_REPOSITORY="owner/repo")
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "start_empty ignored: the release catalog is published" in restored.stdout
    assert offers_and_history(db) == offers_and_history(published)


def test_a_release_without_a_manifest_gets_its_first_catalog(tmp_path: Path) -> None:
    """A first publish that stopped after creating the release (no assets, or no manifest.json): `gh release
    download` of an empty release fails ("no assets to download"), which stopped every later night's build."""
    fake_gh(tmp_path)
    db, release = tmp_path / "warehouse.duckdb", tmp_path / "release"
    release.mkdir()
    replayed_warehouse(db, ["lambda"])
    env = dict(GPULEDGER_DB=str(db), RELEASE=str(release), GH_LOG=str(tmp_path / "gh.log"),
               GITHUB_REPOSITORY="owner/repo", GH_REPO="owner/repo", GITHUB_OUTPUT=str(tmp_path / "output"))
    built = run_step(step("refresh", "Build the catalog (the published one, with what this run brought)"), tmp_path,
                     **env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert "no release catalog yet" in built.stdout and "catalog=built" in (tmp_path / "output").read_text()
    done = run_step(step("publish", "Publish the catalog as the assets of the release `catalog`"), tmp_path, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    pulled = tmp_path / "pulled.duckdb"
    assert CliRunner().invoke(app, ["pull", str(release), "--db", str(pulled)]).exit_code == 0
    assert offers_and_history(pulled) == offers_and_history(db)


def test_each_night_publishes_new_files_then_the_manifest_then_drops_what_it_no_longer_names(tmp_path: Path) -> None:
    fake_gh(tmp_path)
    db, release, log = tmp_path / "warehouse.duckdb", tmp_path / "release", tmp_path / "gh.log"
    env = dict(GPULEDGER_DB=str(db), RELEASE=str(release), GH_LOG=str(log), GITHUB_REPOSITORY="owner/repo",
               GH_REPO="owner/repo", GITHUB_OUTPUT=str(tmp_path / "output"))
    build, publish = step("refresh", "Build the catalog (the published one, with what this run brought)"), \
        step("publish", "Publish the catalog as the assets of the release `catalog`")
    before: set[str] = set()
    for night, hook in enumerate((None, lambda_price_hook("gpu_1x_a10", 119))):
        replayed_warehouse(db, ["lambda"], hook=hook, refresh_id=f"refresh-{night}")
        log.write_text("")
        shutil.rmtree(tmp_path / "catalog", ignore_errors=True)
        built = run_step(build, tmp_path, **env)
        assert built.returncode == 0, built.stdout + built.stderr
        assert "catalog=built" in (tmp_path / "output").read_text()
        done = run_step(publish, tmp_path, **env)
        assert done.returncode == 0, done.stdout + done.stderr
        calls = log.read_text().splitlines()
        manifest = json.loads((tmp_path / "catalog" / MANIFEST).read_text())
        now = {f["name"] for f in manifest["providers"]["lambda"]["files"]}
        assert sorted(p.name for p in release.iterdir()) == sorted(now | {MANIFEST})
        # only the files this night made are sent, the manifest after them, then the replaced ones go
        uploads = [Path(c.split()[3]).name for c in calls if c.startswith("release upload")]
        assert uploads == sorted(now - before) + [MANIFEST]
        deleted = [c.split()[3] for c in calls if c.startswith("release delete-asset")]
        assert sorted(deleted) == sorted(before - now)
        assert all(calls.index(f"release delete-asset catalog {d} --yes") > calls.index(
            f"release upload catalog catalog/{MANIFEST} --clobber") for d in deleted)
        if night == 0:
            assert "no release catalog yet" in built.stdout and any(c.startswith("release create") for c in calls)
        else:  # the second night's: its current files and the history segment of the moved price
            assert len(now - before) == 4 and len(deleted) == 3
        before = now
    pulled = tmp_path / "pulled.duckdb"
    result = CliRunner().invoke(app, ["pull", str(release), "--db", str(pulled)])
    assert result.exit_code == 0, result.output
    assert offers_and_history(pulled) == offers_and_history(db)


def test_only_the_publish_job_may_write_and_it_holds_no_provider_secret() -> None:
    doc = workflow()
    assert doc["permissions"] == {"contents": "read"} and "permissions" not in doc["jobs"]["refresh"]
    job = doc["jobs"]["publish"]
    assert job["permissions"] == {"contents": "write"} and job["needs"] == "refresh"
    # after a refresh whose providers failed too: their previous files are kept
    assert job["if"] == "${{ always() && needs.refresh.outputs.catalog == 'built' }}"
    assert "secrets." not in yaml.safe_dump(job)
    keep = next(s for s in doc["jobs"]["refresh"]["steps"] if s.get("name") == "Keep the warehouse for the next run")
    assert keep["if"] == "always() && steps.refresh.conclusion == 'success'"  # never a failed restore in the cache
    assert doc["on"]["workflow_dispatch"]["inputs"]["start_empty"]["default"] is False


@pytest.fixture
def saved_night(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A warehouse whose night's results are saved beside it, not merged: lambda live without its key, runpod
    replayed (with the shared Prefect API the merge's flow talks to)."""
    shared_prefect_server(request.config)
    db = tmp_path / "w.duckdb"
    monkeypatch.delenv("LAMBDA_API_KEY", raising=False)
    no_key = fetch_outcome(SourcePlan("lambda", "live"))  # live, no key: refused before any request
    with ReplayServer(BUNDLED_RECORDINGS, providers=["runpod"]) as server:
        fetched = fetch_outcome(SourcePlan("runpod", "replay", server.endpoints(), {}))
    assert (no_key.state, fetched.state) == ("not_configured", "ok")
    for outcome in (no_key, fetched):
        pending.write(pending.pending_dir(db) / "refresh-night", outcome)
    return db


@pytest.mark.prefect
def test_a_provider_without_credentials_is_not_configured_and_the_refresh_exits_0(saved_night: Path) -> None:
    db = saved_night
    result = CliRunner().invoke(app, ["refresh", "--resume", "--db", str(db)])  # the refresh's merge and summary
    assert result.exit_code == 0, result.output
    shown = " ".join(result.output.split())  # the terminal's line breaks left out
    assert "lambda: not configured: LAMBDA_API_KEY is not set; the instance-types API needs an API key" in shown
    status = CliRunner().invoke(app, ["status", "--db", str(db), "-p", "lambda", "-p", "runpod", "--format", "csv"])
    assert status.exit_code == 0, status.output
    assert "lambda,not_configured," in status.output and "runpod,ok," in status.output


@pytest.mark.prefect
def test_the_progress_of_a_resume_counts_the_saved_results_it_merges(saved_night: Path) -> None:
    """--resume names no provider up front: the bar's count is the saved results' (it read "2/0")."""
    from rich.console import Console

    from gpuledger.flows.progress import RefreshProgress
    from gpuledger.flows.refresh import nightly_refresh

    with RefreshProgress(Console(width=80, record=True), []) as bar:
        summary = nightly_refresh(db=str(saved_night), resume=True)
        assert bar.state() == ("merged runpod", 2, 2)
    assert [p["provider"] for p in summary["providers"]] == ["lambda", "runpod"]


def test_the_catalog_manifest_is_what_the_workflow_uploads_last() -> None:
    assert MANIFEST == "manifest.json" and "catalog/manifest.json --clobber" in step(
        "publish", "Publish the catalog as the assets of the release `catalog`")


REFRESH = "Refresh from the live providers"


def refresh_step_env(variables: dict[str, str]) -> dict[str, str]:
    """The refresh step's env as GitHub evaluates it with no secrets: an unset secret or variable is ''."""
    s = next(s for s in workflow()["jobs"]["refresh"]["steps"] if s.get("name") == REFRESH)
    env = {}
    for name, value in s["env"].items():
        m = re.fullmatch(r"\$\{\{ (secrets|vars)\.(\w+) \}\}", str(value))
        assert m, value
        env[name] = variables.get(m.group(2), "") if m.group(1) == "vars" else ""
    return env


def test_the_euro_rates_reach_the_refresh_from_repository_variables(tmp_path: Path) -> None:
    """Scaleway needs no key, so it runs every night; its prices are EUR, and without a rate every one is
    quarantined and Scaleway fails (`gpuledger refresh` exits 1): the workflow must be able to give the rate."""
    fake = tmp_path / "bin" / "gpuledger"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nfrom gpuledger.warehouse.settings import load_settings\n"
                    "s = load_settings()\nprint('rates', s.scaleway_usd_per_eur, s.seeweb_usd_per_eur)\n")
    fake.chmod(0o755)
    common = dict(RUNNER_TEMP=str(tmp_path), GITHUB_OUTPUT=str(tmp_path / "output"))
    outside = {k: v for k, v in os.environ.items() if not k.startswith("GPULEDGER_")}
    for variables, shown in (({"GPULEDGER_SCALEWAY_USD_PER_EUR": "1.1403", "GPULEDGER_SEEWEB_USD_PER_EUR": "1.15"},
                              "rates 1.1403 1.15"),
                             ({}, "rates None None")):  # not set: no rate, not an empty one that fails the settings
        done = subprocess.run([*SHELL, step("refresh", REFRESH)], cwd=tmp_path, capture_output=True, text=True,
                              env=dict(outside, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
                                       **refresh_step_env(variables), **common), timeout=60)
        assert done.returncode == 0 and shown in done.stdout, done.stdout + done.stderr
        assert (tmp_path / "output").read_text().splitlines()[-1] == "exit=0"
