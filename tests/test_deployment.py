"""Scheduling: prefect.yaml's `nightly` deployment, `gpuledger serve`, and the GitHub Actions workflow.

The server tests deploy with the real `prefect deploy` to a Prefect test server,
run one flow run of the deployment through a real process worker (replay, one
provider), and let `gpuledger serve` register its schedule.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
import typer
import yaml
from typer.testing import CliRunner

from gpuledger.adapters.registry import UNITS, specs
from gpuledger.flows.cadence import CADENCES, SCHEDULED_LOCK_WAIT_S, groups, providers_in
from gpuledger.flows.ops_cli import NIGHTLY_CRON, NIGHTLY_TIMEZONE, nightly_deployment, register
from tests.builders import replayed_warehouse, shared_prefect_server

ROOT = Path(__file__).resolve().parent.parent
PREFECT_YAML = ROOT / "prefect.yaml"
NIGHTLY_YML = ROOT / ".github" / "workflows" / "nightly.yml"


def deployment_configs() -> dict[str, dict[str, Any]]:
    from prefect.cli.deploy._models import PrefectYamlModel

    model = PrefectYamlModel.model_validate(yaml.safe_load(PREFECT_YAML.read_text()))  # raises when invalid
    return {d.name: d.model_dump(exclude_unset=True, mode="json") for d in model.deployments}


def nightly_config() -> dict[str, Any]:
    return deployment_configs()["nightly"]


def next_runs(schedule: Any, after: datetime, n: int) -> list[datetime]:
    from prefect.server.schemas.schedules import CronSchedule as ServerCron

    server = ServerCron(cron=schedule.cron, timezone=schedule.timezone, day_or=schedule.day_or)
    return [d.astimezone(timezone.utc) for d in asyncio.run(server.get_dates(n=n, start=after))]


def test_prefect_yaml_defines_the_nightly_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.flows import load_flow_from_entrypoint

    config = nightly_config()
    assert config["name"] == "nightly" and config["entrypoint"] == "flows/refresh.py:nightly_refresh"
    assert config["work_pool"]["name"] == "gpuledger"
    assert config["concurrency_limit"] == {"limit": 1, "collision_strategy": "ENQUEUE"}
    [raw] = config["schedules"]
    schedule = _schedule_config_to_deployment_schedule(raw)["schedule"]  # what `prefect deploy` builds
    assert isinstance(schedule, CronSchedule)
    assert (schedule.cron, schedule.timezone) == ("0 3 * * *", "UTC") == (NIGHTLY_CRON, NIGHTLY_TIMEZONE)
    assert next_runs(schedule, datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc), 2) == [
        datetime(2026, 12, 1, 3, 0, tzinfo=timezone.utc), datetime(2026, 12, 2, 3, 0, tzinfo=timezone.utc)]
    monkeypatch.chdir(ROOT)  # entrypoints are relative to the project folder
    flow = load_flow_from_entrypoint(config["entrypoint"])
    assert flow.name == "nightly_refresh"
    # `gpuledger serve` builds the same schedule
    served = nightly_deployment()
    assert served.name == "nightly" and served.entrypoint == config["entrypoint"]
    [s] = served.schedules
    assert (s.schedule.cron, s.schedule.timezone) == ("0 3 * * *", "UTC")


def test_one_deployment_per_cadence_group_on_its_schedule() -> None:
    from prefect.cli.deploy._schedules import _schedule_config_to_deployment_schedule

    configs = deployment_configs()
    assert set(configs) == set(CADENCES) == {"nightly", "capacity", "market"}
    for name, config in configs.items():
        assert config["entrypoint"] == "flows/refresh.py:nightly_refresh"
        assert config["parameters"] == {"group": name, "lock_wait_s": SCHEDULED_LOCK_WAIT_S}
        assert config["concurrency_limit"] == {"limit": 1, "collision_strategy": "ENQUEUE"}
        assert config["work_pool"] == configs["nightly"]["work_pool"]
        [raw] = config["schedules"]
        schedule = _schedule_config_to_deployment_schedule(raw)["schedule"]
        assert (schedule.cron, schedule.timezone) == (CADENCES[name].cron, "UTC")
    after = datetime(2026, 12, 1, 2, 10, tzinfo=timezone.utc)
    hour = [datetime(2026, 12, 1, h, m, tzinfo=timezone.utc) for h, m in ((3, 0), (4, 0), (5, 0))]
    market = _schedule_config_to_deployment_schedule(configs["market"]["schedules"][0])["schedule"]
    assert next_runs(market, after, 3) == hour
    capacity = _schedule_config_to_deployment_schedule(configs["capacity"]["schedules"][0])["schedule"]
    assert next_runs(capacity, after, 3) == [datetime(2026, 12, 1, h, 30, tzinfo=timezone.utc) for h in (4, 8, 12)]


def test_every_provider_is_in_exactly_one_cadence_group() -> None:
    found = groups()
    listed = [p for members in found.values() for p in members]
    assert sorted(listed) == sorted([s.name for s in specs()] + list(UNITS)) and len(listed) == len(set(listed))
    assert {"aws", "azure", "gcp", "ibmcloud", "oci"} == set(found["nightly"])  # the hyperscalers
    assert {"hyperbolic", "lium", "primeintellect", "spheron", "vastai", "tensordock", "shadeform", "runpod"} == set(
        found["market"])  # RunPod: ALSO
    assert "lambda" in found["capacity"] and "runpod" not in found["capacity"]
    assert providers_in("market") == found["market"]
    with pytest.raises(ValueError, match="unknown cadence group 'weekly'; known: market, capacity, nightly"):
        providers_in("weekly")


def test_serve_refuses_without_a_lasting_server() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    app = typer.Typer()
    register(app)
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        result = CliRunner().invoke(app, ["serve"])
    assert result.exit_code == 2
    assert "needs a Prefect server that keeps running" in result.output


def test_serve_refuses_what_every_run_would_fail_on_before_asking_the_server(tmp_path: Path) -> None:
    # Had been let through to the server (unreachable here: "cannot reach"; reachable: a traceback for the
    # cron, and a schedule whose every run fails for the provider or the file).
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from gpuledger.flows.cli import app as cli_app

    not_duckdb = tmp_path / "notes.duckdb"
    not_duckdb.write_text("not a warehouse")
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:9/api"}):
        said = {args[-1]: CliRunner().invoke(cli_app, ["serve", *args]) for args in (
            ["--cron", "61 3 * * *"], ["--timezone", "Mars/Phobos"], ["-p", "lambd"], ["--db", str(not_duckdb)])}
    assert {k: (r.exit_code, r.output.strip()) for k, r in said.items()} == {
        "61 3 * * *": (2, 'error: Invalid cron string: "61 3 * * *"'),
        "Mars/Phobos": (2, 'error: Value error, Invalid timezone: "Mars/Phobos" (specify in IANA tzdata format, '
                           'for example, America/New_York)'),
        "lambd": (2, "error: unknown provider 'lambd'; did you mean lambda?"),
        str(not_duckdb): (2, f"error: {not_duckdb} is not a DuckDB database (pass --db a gpuledger warehouse, "
                             "or a new file name)")}


def test_serve_never_prints_the_password_of_the_server_url() -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from gpuledger.flows.cli import app as cli_app

    with temporary_settings(updates={PREFECT_API_URL: "http://bob:hunter2@127.0.0.1:9/api"}):
        result = CliRunner().invoke(cli_app, ["serve"])
    assert result.exit_code == 2 and "hunter2" not in result.output and "bob" not in result.output
    assert result.output.startswith("error: cannot reach the Prefect server at http://127.0.0.1:9/api: ")


# -- against a Prefect server ----------------------------------------------------

@pytest.fixture(scope="module")
def api_url(request: pytest.FixtureRequest) -> str:
    return shared_prefect_server(request.config)


async def _read(fn: Any) -> Any:
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        return await fn(client)


def prefect_cli(args: list[str], api_url: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PREFECT_API_URL=api_url)
    return subprocess.run([sys.executable, "-m", "prefect", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.prefect
def test_deploy_then_a_worker_runs_the_deployment(api_url: str, tmp_path: Path) -> None:
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, FlowRunFilter, FlowRunFilterId
    from prefect.deployments import run_deployment

    asyncio.run(_read(lambda c: c.create_work_pool(WorkPoolCreate(name="gpuledger", type="process"))))
    project = tmp_path / "project"  # a copy: `prefect deploy` runs in the project folder
    project.mkdir()
    shutil.copy(PREFECT_YAML, project / "prefect.yaml")
    shutil.copytree(ROOT / "flows", project / "flows", ignore=shutil.ignore_patterns("__pycache__"))
    deployed = prefect_cli(["--no-prompt", "deploy", "--all"], api_url, project)
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert "Deployment 'nightly_refresh/nightly' successfully created" in deployed.stdout

    d = asyncio.run(_read(lambda c: c.read_deployment_by_name("nightly_refresh/nightly")))
    [s] = d.schedules
    assert (s.schedule.cron, s.schedule.timezone, s.active) == ("0 3 * * *", "UTC", True)
    assert (d.entrypoint, d.work_pool_name, d.work_queue_name) == ("flows/refresh.py:nightly_refresh", "gpuledger",
                                                                   "default")
    assert d.pull_steps == [{"prefect.deployments.steps.set_working_directory": {"directory": str(project)}}]
    assert d.global_concurrency_limit is not None and d.global_concurrency_limit.limit == 1

    # one run of the deployment, picked up by a real process worker (replay, one provider)
    db = tmp_path / "deployed.duckdb"
    run = run_deployment("nightly_refresh/nightly", timeout=0,
                         parameters={"providers": ["lambda"], "replay": True, "db": str(db)})
    worker = prefect_cli(["worker", "start", "--pool", "gpuledger", "--run-once"], api_url, tmp_path)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    state = asyncio.run(_read(lambda c: c.read_flow_run(run.id))).state
    assert state.is_completed(), state
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("select provider, state, rows_loaded from scrape_runs").fetchall() == [("lambda", "ok", 27)]
    finally:
        con.close()
    artifacts = asyncio.run(_read(lambda c: c.read_artifacts(
        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpuledger-refresh"])),
        flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[run.id])))))
    [artifact] = artifacts
    assert "| lambda | ok | 27 | 27 | 0 | 0 | 0 |  |" in artifact.data
    assert "## Largest price moves (top 10, by relative change)\n\nNo price changed in this refresh." in artifact.data


async def _pooled_nightly(client: Any) -> Any:
    """A deployment as `prefect deploy` makes prefect.yaml's: nightly_refresh/nightly, bound to a
    work pool, with its own parameters and schedule."""
    from prefect.client.schemas.actions import DeploymentScheduleCreate, WorkPoolCreate
    from prefect.client.schemas.schedules import CronSchedule

    pool = await client.create_work_pool(WorkPoolCreate(name="pooled-test", type="process"), overwrite=True)
    flow_id = await client.create_flow_from_name("nightly_refresh")
    return await client.create_deployment(
        flow_id, name="nightly", work_pool_name=pool.name, entrypoint="flows/refresh.py:nightly_refresh",
        parameters={"db": "/srv/gpuledger/gpuledger.duckdb"},
        schedules=[DeploymentScheduleCreate(schedule=CronSchedule(cron="0 3 * * *", timezone="UTC"), active=True)])


def _nightly_as_deployed() -> tuple[Any, ...]:
    d = asyncio.run(_read(lambda c: c.read_deployment_by_name("nightly_refresh/nightly")))
    return (d.parameters, d.work_pool_name, d.paused,
            [(s.schedule.cron, s.schedule.timezone, s.active) for s in d.schedules])


@pytest.mark.prefect
def test_serve_leaves_the_work_pool_deployment_alone_and_logs_its_runs(api_url: str, tmp_path: Path) -> None:
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId, FlowRunFilter
    from prefect.client.schemas.filters import FlowRunFilterState, FlowRunFilterStateType

    asyncio.run(_read(_pooled_nightly))
    before = _nightly_as_deployed()
    assert before == ({"db": "/srv/gpuledger/gpuledger.duckdb"}, "pooled-test", False, [("0 3 * * *", "UTC", True)])
    app = typer.Typer()
    register(app)
    refused = CliRunner().invoke(app, ["serve", "--name", "nightly"])
    assert refused.exit_code == 2, refused.output
    assert "nightly_refresh/nightly is deployed to the work pool 'pooled-test'" in refused.output
    assert "--force" in refused.output and _nightly_as_deployed() == before

    env = dict(os.environ, PREFECT_API_URL=api_url, PREFECT_RUNNER_POLL_FREQUENCY="1")
    env.pop("PREFECT_LOGGING_LEVEL", None)  # as a user would run it: gpuledger's default, not the test's
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "serve", "--cron", "30 4 * * *",
                             "--db", str(tmp_path / "served.duckdb"), "--replay", "-p", "lambda"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output = ""
    try:
        deadline = time.monotonic() + 90
        found = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                found = asyncio.run(_read(lambda c: c.read_deployment_by_name("nightly_refresh/serve")))
                break
            except Exception:  # noqa: BLE001 - not registered yet
                time.sleep(0.5)
        assert found is not None, proc.stdout.read() if proc.poll() is not None else "serve did not register"
        [s] = found.schedules
        assert (s.schedule.cron, s.schedule.timezone) == ("30 4 * * *", "UTC")
        # a scheduled run due while another refresh holds the lock waits for it (it failed at once)
        assert found.parameters == {"db": str(tmp_path / "served.duckdb"), "providers": ["lambda"], "replay": True,
                                    "lock_wait_s": SCHEDULED_LOCK_WAIT_S}
        assert found.work_pool_name is None
        assert _nightly_as_deployed() == before  # the work-pool deployment: parameters and schedule untouched

        # one run of the served deployment, run by the serving process and logged to its terminal
        from prefect.deployments import run_deployment

        run = run_deployment("nightly_refresh/serve", timeout=0)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = asyncio.run(_read(lambda c: c.read_flow_run(run.id))).state
            if state.is_final():
                break
            time.sleep(1)
        assert state.is_completed(), state
        assert proc.poll() is None  # still serving
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            output, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    assert "serving nightly_refresh/serve" in output
    assert "lambda: fetched 27 offers" in output, output
    assert "Completed" in output, output
    assert _nightly_as_deployed() == before  # stopping serve paused only its own schedule
    late = asyncio.run(_read(lambda c: c.read_flow_runs(flow_run_filter=FlowRunFilter(
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=["SCHEDULED"]))),
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[found.id])))))
    assert late == []


# -- GitHub Actions ----------------------------------------------------------------

# What the registry's sources declare (ProviderSpec.workflow_secrets): the workflow must pass
# exactly these, so a new provider's key cannot be forgotten there or in the docs.
WORKFLOW_SECRETS = {name: spec.name for spec in specs() for name in spec.workflow_secrets}
SECRETS = set(WORKFLOW_SECRETS)


@pytest.mark.prefect
def test_serve_whose_prefect_server_goes_away_stops_in_one_line(tmp_path: Path) -> None:
    """The server serve registered with stops (a restart, an upgrade): Prefect's runner printed its polls'
    tracebacks, its observer logged one, and serve ended in a 370-line traceback; it says so in one line."""
    from gpuledger.flows.prefect_api import TemporaryApiServer

    server = TemporaryApiServer()
    url = server.wait_ready(120)
    env = dict(os.environ, PREFECT_API_URL=url, PREFECT_RUNNER_POLL_FREQUENCY="1", PREFECT_CLIENT_MAX_RETRIES="0")
    proc = subprocess.Popen([sys.executable, "-m", "gpuledger.flows.cli", "serve", "--replay", "-p", "lambda",
                             "--db", str(tmp_path / "served.duckdb")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # said once the deployment is registered
        assert first.startswith("serving nightly_refresh/serve: cron '0 3 * * *' (UTC)"), first
        server.stop()
        output, _ = proc.communicate(timeout=240)
    finally:
        server.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    lines = output.splitlines()
    assert proc.returncode == 1, output
    assert "Traceback" not in output and len(lines) <= 2, output  # the observer's warning may come first
    # the error httpx raised: ConnectError once the server is gone, RemoteProtocolError or ReadError (which may
    # have no text) when it went mid-answer
    assert re.fullmatch(rf"error: lost the Prefect API at {re.escape(url)} \(PREFECT_API_URL\) while serving: "
                        r"(ConnectError|RemoteProtocolError|ReadError)(: [^\n]+)?; serving stopped: start the server "
                        r"again, then `gpuledger serve`", lines[-1]), lines[-1]


def test_the_workflow_passes_exactly_the_secrets_the_sources_declare() -> None:
    text = NIGHTLY_YML.read_text()
    passed = set(re.findall(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", text))
    missing = sorted(f"{name} (declared by {WORKFLOW_SECRETS[name]})" for name in SECRETS - passed)
    assert not missing, f".github/workflows/nightly.yml does not pass: {', '.join(missing)}"
    assert not passed - SECRETS, f"nightly.yml passes secrets no source declares: {sorted(passed - SECRETS)}"
    refresh = next(s for s in workflow()["jobs"]["refresh"]["steps"] if s.get("id") == "refresh")
    unset_loop = re.search(r"for name in ([A-Z0-9_ ]+); do", refresh["run"])
    assert unset_loop and set(unset_loop.group(1).split()) == SECRETS, "nightly.yml's unset loop names other secrets"
    table = (ROOT / "docs" / "operations.md").read_text()
    undocumented = sorted(f"{name} (declared by {WORKFLOW_SECRETS[name]})" for name in SECRETS if f"`{name}`" not in table)
    assert not undocumented, f"docs/operations.md's secrets table lacks: {', '.join(undocumented)}"


def workflow() -> dict[str, Any]:
    doc = yaml.safe_load(NIGHTLY_YML.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def test_nightly_workflow_schedule_and_secrets() -> None:
    doc = workflow()
    assert doc["on"]["schedule"] == [{"cron": "0 3 * * *"}] and "workflow_dispatch" in doc["on"]
    assert doc["permissions"] == {"contents": "read"}
    steps = doc["jobs"]["refresh"]["steps"]
    text = NIGHTLY_YML.read_text()
    assert set(re.findall(r"\$\{\{\s*secrets\.(\w+)\s*\}\}", text)) == SECRETS
    for step in steps:
        for value in (step.get("env") or {}).values():
            m = re.fullmatch(r"\$\{\{ secrets\.(\w+) \}\}", str(value))
            assert m is None or step.get("name") == "Refresh from the live providers", step
        script = step.get("run", "")
        assert "secrets." not in script  # never interpolated into a script
        for line in script.splitlines():
            if re.search(r"\b(echo|printf|cat|tee)\b", line):
                leaked = [n for n in SECRETS if f"${n}" in line or f"${{{n}" in line]
                # the one allowed write: the Google key into a private file, not to the log
                assert not leaked or line.strip() == 'printf \'%s\' "$GCP_SA_KEY" > "$RUNNER_TEMP/gcp-sa.json"', line
    refresh = next(s for s in steps if s.get("id") == "refresh")
    assert "gpuledger refresh\n" in refresh["run"] and "--replay" not in refresh["run"]  # a live refresh
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["path"] == "snapshots/"
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert all(f"`{name}`" in docs for name in SECRETS)  # each secret is documented


def test_nightly_workflow_snapshot_step_runs(tmp_path: Path) -> None:
    """The workflow's snapshot step, run as GitHub would (bash -e -o pipefail) on a replayed warehouse."""
    steps = workflow()["jobs"]["refresh"]["steps"]
    script = next(s for s in steps if s.get("name") == "Snapshot, comparison page and price plot")["run"]
    db = tmp_path / "warehouse-data" / "gpuledger.duckdb"
    db.parent.mkdir()
    replayed_warehouse(db, ["lambda", "runpod"])
    # `gpuledger` as on the runner: the one on PATH (an activated venv), else this interpreter's
    env = dict(os.environ, GPULEDGER_DB=str(db), PATH=f"{os.environ['PATH']}{os.pathsep}{Path(sys.executable).parent}")
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    [folder] = [p for p in (tmp_path / "snapshots").iterdir() if p.is_dir()]
    assert re.fullmatch(r"\d{8}T\d{6}Z", folder.name)
    names = {p.name for p in folder.iterdir()}
    assert {"manifest.json", "offers.csv", "offers.parquet", "prices.html", "h100-sxm.png", "gpuledger.duckdb",
            "status.txt"} <= names
    assert f"snapshot: snapshots/{folder.name}" in done.stdout


# The command GitHub runs a step with, by its `shell` (docs.github.com, workflow syntax,
# jobs.<job_id>.steps[*].shell: unspecified `bash -e {0}`, `bash` `bash --noprofile --norc -eo pipefail {0}`).
GITHUB_SHELLS = {None: ["bash", "-e"], "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"]}


def test_nightly_workflow_steps_fail_when_a_piped_command_fails(tmp_path: Path) -> None:
    doc = workflow()
    shell = doc.get("defaults", {}).get("run", {}).get("shell")
    assert shell == "bash", "without `shell: bash` GitHub runs steps without pipefail"
    steps = doc["jobs"]["refresh"]["steps"]
    assert all(s.get("shell", shell) == "bash" for s in steps if "run" in s)
    # the snapshot step with a `gpuledger` whose export fails: the step must fail there
    script = next(s for s in steps if s.get("name") == "Snapshot, comparison page and price plot")["run"]
    assert "| tail -n 1" in script
    fake = tmp_path / "bin" / "gpuledger"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nif [ "$1" = export ]; then echo "error: export failed" >&2; exit 1; fi\n'
                    'echo "gpuledger $1 ran" >> "$RAN"\n')
    fake.chmod(0o755)
    ran = tmp_path / "ran.txt"
    env = dict(os.environ, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}", RAN=str(ran),
               GPULEDGER_DB=str(tmp_path / "missing.duckdb"))
    done = subprocess.run([*GITHUB_SHELLS[shell], "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: export failed" in done.stderr and "snapshot:" not in done.stdout
    assert not ran.exists()  # nothing after the failed export ran
