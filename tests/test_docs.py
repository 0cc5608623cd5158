"""Documentation keeps up with the code (sqlite-utils style): every command has help and is in the README."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main
import pytest
import yaml

from gpuledger.adapters.registry import SOURCES, specs
from gpuledger.flows.cli import app

ROOT = Path(__file__).parent.parent


def commands() -> list[str]:
    group = typer.main.get_command(app)
    return sorted(group.commands)  # type: ignore[attr-defined]


def test_every_command_has_help_and_appears_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    group = typer.main.get_command(app)
    assert len(commands()) >= 7
    for name in commands():
        cmd = group.commands[name]  # type: ignore[attr-defined]
        assert cmd.help and len(cmd.help.strip()) > 20, f"`gpuledger {name}` has no real help text"
        assert re.search(rf"gpuledger {name}\b", readme), f"`gpuledger {name}` is not shown in README.md"


def test_the_readme_commands_are_the_ones_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n(python3 -m venv[^\n]*)\n```", readme)
    assert len(blocks) == 2, "the README shows exactly two newcomer commands"
    run, test = blocks
    assert run.endswith("gpuledger refresh --replay")
    ci = (ROOT / ".ci" / "run").read_text()
    assert test in ci, ".ci/run must run the README's test command verbatim"


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of the markdown table whose header line is `header`."""
    lines = text.splitlines()
    start = lines.index(header) + 2  # the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def test_every_registered_source_is_in_the_readme_provider_table() -> None:
    rows = table_rows((ROOT / "README.md").read_text(), "| source | provider | how | what |")
    listed = [r[0].strip("`") for r in rows]
    missing = [s.name for s in specs() if s.name not in listed]
    assert not missing, f"README.md's provider table has no row for: {', '.join(missing)}"
    assert not set(listed) - set(SOURCES), f"README.md lists sources the registry lacks: {set(listed) - set(SOURCES)}"


def test_every_source_threshold_is_in_the_reliability_doc() -> None:
    rows = table_rows((ROOT / "docs" / "reliability.md").read_text(), "| source | `min_row_ratio` | why |")
    documented = {r[0].split()[0].strip("`"): r[1] for r in rows if r[0].startswith("`")}
    declared = {s.name: f"{s.anomaly.min_row_ratio:g}" for s in specs() if s.anomaly.min_row_ratio is not None}
    assert documented == declared, ("docs/reliability.md's min_row_ratio table must list exactly the sources "
                                    f"that set one: documented {documented}, declared {declared}")


def test_the_readme_schedule_is_the_one_prefect_yaml_deploys() -> None:
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    readme = (ROOT / "README.md").read_text()
    schedule = " ".join(re.search(r"- \*\*Schedule\*\*:(.*?)\n- \*\*", readme, re.S).group(1).split())
    count = re.search(r"deploys `nightly_refresh` (\w+) times", schedule).group(1)
    assert {"two": 2, "three": 3, "four": 4}[count] == len(deployments) == 3
    for d in deployments:
        [cadence] = d["schedules"]
        assert f"`{d['name']}`" in schedule and f"(`{cadence['cron']}`" in schedule, (d["name"], schedule)
        assert cadence["timezone"] == "UTC" and "(UTC)" in schedule
    # no other cadence is claimed
    assert sorted(re.findall(r"\(`([0-9*/ ]+)`", schedule)) == sorted(d["schedules"][0]["cron"] for d in deployments)


def test_the_data_dictionary_names_the_schema_version_and_every_offers_column() -> None:
    from gpuledger.warehouse.schema import SCHEMA_VERSION, column_names

    text = (ROOT / "docs" / "data-dictionary.md").read_text()
    stated = int(re.search(r"Schema version (\d+);", text).group(1))
    assert stated == SCHEMA_VERSION == 13, f"docs/data-dictionary.md says schema version {stated}"
    versions = [int(r[0]) for r in table_rows(text, "| version | change |")]
    assert versions == list(range(1, SCHEMA_VERSION + 1))
    rows = table_rows(text, "| column | meaning |")  # the first such table: offers
    documented = {name.strip() for r in rows for name in r[0].split(",")}
    assert set(column_names("offers")) <= documented, set(column_names("offers")) - documented


def test_the_data_dictionary_names_the_states_a_scrape_run_is_stored_with() -> None:
    text = " ".join((ROOT / "docs" / "data-dictionary.md").read_text().split())
    runs = text[text.index("## `scrape_runs`"):text.index("## `fetch_validators`")]
    states = re.search(r"`state` \((.*?)\), `rows_parsed`", runs).group(1)
    # a provider without credentials is stored as not_configured; a stopped refresh stores nothing for
    # the providers it kept (store.py records only ok, failed and not_configured)
    assert re.findall(r"`(\w+)`", states) == ["ok", "failed", "not_configured"], states
    freshness = text[text.index("## `offer_freshness`"):text.index("## `offer_history`")]
    assert "`not_configured`" in freshness


def test_google_and_the_capacity_block_unit_without_credentials_are_not_configured_as_documented(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows.fetch import SourcePlan, fetch_outcome

    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_API_KEY", "GPULEDGER_GCP_API_KEY", "GOOGLE_CLOUD_PROJECT",
                 "CLOUDSDK_CONFIG", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws, no gcloud configuration
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    for provider in ("gcp", "aws_capacity_blocks"):
        outcome = fetch_outcome(SourcePlan(provider, "live"))
        assert (outcome.state, "no credentials" in (outcome.error or "")) == ("not_configured", True), outcome.error
    readme = " ".join((ROOT / "README.md").read_text().split())
    operations = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert "without them the provider is `not configured` (`no credentials`" in readme
    assert "without them the unit is `not configured` (`no credentials`" in operations
    assert "fails as `no credentials`" not in readme + operations


def test_the_readme_names_every_source_credential_and_the_workflow_docs_every_keyless_source() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    credentials = readme[readme.index("### Credentials (live mode)"):readme.index("### Settings")]
    standard_chains = {"aws", "gcp"}  # boto3's and Google's own credential chains, named as such
    missing = sorted(f"{name} ({s.name})" for s in specs() if s.name not in standard_chains
                     for name in s.workflow_secrets if f"`{name}`" not in credentials)
    assert not missing, f"README's Credentials section does not name: {', '.join(missing)}"
    # docs/operations.md: the sources that need no secret, by the README provider table's names
    names = {r[0].strip("`"): r[1] for r in table_rows((ROOT / "README.md").read_text(), "| source | provider | how | what |")}
    operations = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    sentence = re.search(r"\| Verda \(formerly DataCrunch\).*?\| ([^|]*?) need none\.", operations).group(1)
    keyless = {s.name for s in specs() if not s.workflow_secrets}
    assert sorted(n for n, shown in names.items() if shown.split(" (")[0] in sentence) == sorted(keyless), sentence


def test_the_source_guide_names_the_registry_lists_a_new_source_joins() -> None:
    from gpuledger.adapters import registry

    text = (ROOT / "docs" / "sources.md").read_text()
    row = next(r for r in table_rows(text, "| place | what it holds |") if "adapters/registry.py" in r[0])
    named = re.findall(r"`([A-Z_]+)`", row[1])
    assert {"API_SOURCES", "PAGE_SOURCES"} <= set(named), row
    assert all(isinstance(getattr(registry, n, None), (tuple, dict)) for n in named), named
    assert registry.SOURCES["aws"] == "gpuledger.adapters.aws" and registry.SOURCES["lambda"].endswith("lambdalabs")


def test_every_command_line_the_docs_show_is_one_the_cli_accepts() -> None:
    """Each `gpuledger ...` shown in README.md and docs/ (code spans and code blocks) parses: no argument or
    option the command does not have. A bare mention (`gpuledger sql`) may leave required ones out."""
    import shlex

    group = typer.main.get_command(app)
    shown = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.name == "recommender.md":  # the recommender's own page is checked by its tests
            continue
        text = path.read_text()
        spans = re.findall(r"`(gpuledger [^`\n]+)`", text)
        for block in re.findall(r"```\n(.*?)```", text, re.S):
            spans += [m.group(1) for line in block.splitlines()
                      if (m := re.search(r"(?:^|&& |=\S+ )(gpuledger [^#|&>\n]*)", line))]
        shown += [(path.name, s.strip()) for s in spans if "..." not in s]
    refused = []
    for where, line in shown:
        try:
            args = shlex.split(line)[1:]
        except ValueError:  # a query spread over lines
            continue
        cmd = group.commands.get(args[0]) if args and not args[0].startswith("-") else None  # type: ignore[attr-defined]
        if cmd is None:
            continue
        try:
            cmd.make_context(args[0], args[1:])
        except Exception as err:  # noqa: BLE001 - the CLI's own click (typer may bring its own copy)
            kinds = {k.__name__ for k in type(err).__mro__}
            if "UsageError" in kinds and "MissingParameter" not in kinds:
                refused.append(f"{where}: {line}: {err}")
    assert len(shown) > 40
    assert not refused, "\n".join(refused)


def test_the_docs_state_the_anomaly_guard_and_the_pending_files_as_the_code_has_them(tmp_path: Path) -> None:
    from gpuledger.adapters.replay import BUNDLED_RECORDINGS, ReplayServer
    from gpuledger.flows.fetch import SourcePlan, fetch_outcome
    from gpuledger.warehouse import pending
    from gpuledger.warehouse.store import AnomalyPolicy

    policy = AnomalyPolicy()
    readme = " ".join((ROOT / "README.md").read_text().split())
    load = readme[readme.index("**Load semantics**"):readme.index("changes nothing.")]
    assert f"fewer than {policy.min_row_ratio:.0%} of the rows of the last good run" in load, load
    assert f"more than {policy.max_median_ratio:g}×" in load, load
    # docs/reliability.md: what a fetch leaves for the merge
    with ReplayServer(BUNDLED_RECORDINGS, providers=["runpod"]) as server:
        outcome = fetch_outcome(SourcePlan("runpod", "replay", server.endpoints(), {}))
    folder = pending.pending_dir(tmp_path / "w.duckdb") / "refresh-1"
    pending.write(folder, outcome)
    files = sorted(p.name for p in folder.iterdir())
    assert "runpod.json" in files and "runpod.offers.json" in files and all(
        re.fullmatch(r"runpod(\.\w+)?\.json", f) for f in files), files
    reliability = " ".join((ROOT / "docs" / "reliability.md").read_text().split())
    kept = reliability[reliability.index("### Nothing fetched is thrown away"):reliability.index("### Clean failures")]
    assert "to `<db>.pending/<refresh_id>/` (`<provider>.json`, the run, and a `<provider>.<table>.json` per table)" in kept


def test_the_docs_state_how_many_providers_a_replay_fetches_at_once_as_the_flow_has_it() -> None:
    from gpuledger.flows.refresh import FETCHES_AT_ONCE, fetches_at_once

    # a replay runs as many fetches as the cores and one, but never more than a live refresh does
    assert fetches_at_once(True) <= FETCHES_AT_ONCE == fetches_at_once(False) == 8
    readme = " ".join((ROOT / "README.md").read_text().split())
    operations = " ".join((ROOT / "docs" / "operations.md").read_text().split())
    assert (f"({FETCHES_AT_ONCE} at a time; a replay, which waits on no provider, as many as the cores and one, "
            f"at most {FETCHES_AT_ONCE})") in readme
    assert (f"{FETCHES_AT_ONCE} provider tasks at a time; a `--replay` from the command line, as many as the cores "
            f"and one, at most {FETCHES_AT_ONCE})") in operations


def test_the_recommender_doc_names_every_column_fits_adds_to_offers() -> None:
    import duckdb

    from gpuledger.warehouse.recommender.macros import install_macros
    from gpuledger.warehouse.schema import column_names, migrate

    con = duckdb.connect()
    migrate(con)
    install_macros(con)
    added = [d[0] for d in con.sql("select * from fits(10.0) limit 0").description
             if d[0] not in column_names("offers")]
    text = " ".join((ROOT / "docs" / "recommender.md").read_text().split())
    listed = text[text.index("returns every `offers` column plus"):text.index("The pieces `fits` is built from")]
    missing = [c for c in added if f"`{c}`" not in listed]
    assert len(added) > 20 and not missing, f"docs/recommender.md's list of fits columns lacks {missing}"


def test_the_fetching_only_what_changed_table_places_every_source() -> None:
    readme = (ROOT / "README.md").read_text()
    providers = {r[0].strip("`"): r[1] for r in table_rows(readme, "| source | provider | how | what |")}
    cells = " ".join(r[0] for r in table_rows((ROOT / "docs" / "operations.md").read_text(),
                                              "| source | how it knows | cost when unchanged |"))
    short = {"gcp": "GCP", "oci": "OCI"}  # the table's names where the README's full one is not used
    missing = []
    for s in specs():
        word = short.get(s.name) or providers[s.name].split()[0]
        if not any(re.search(rf"\b{re.escape(w)}\b", cells) for w in (word, word.removesuffix(".ai"))):
            missing.append(s.name)
    assert not missing, f"docs/operations.md's 'Fetching only what changed' table does not say how these fetch: {missing}"


def test_scaleway_and_seeweb_without_their_eur_rate_are_not_configured_as_the_readme_says(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows.fetch import SourcePlan, fetch_outcome

    for name in ("GPULEDGER_SCALEWAY_USD_PER_EUR", "GPULEDGER_SEEWEB_USD_PER_EUR", "SCW_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ECSAPI_TOKEN", "a-token")  # Seeweb's key is set: only its rate is missing
    for provider in ("scaleway", "seeweb"):
        outcome = fetch_outcome(SourcePlan(provider, "live"))  # refused before any request
        assert outcome.state == "not_configured" and "USD_PER_EUR" in (outcome.error or ""), outcome.error
    readme = " ".join((ROOT / "README.md").read_text().split())
    actions = readme[readme.index("- **GitHub Actions**"):readme.index("- **Scale-out**")]
    assert "a provider without its rate is `not configured` too" in actions, actions
    assert "fails and so does the run" not in actions, actions


def test_the_data_dictionary_names_every_table_view_macro_and_column_of_the_warehouse() -> None:
    import duckdb

    from gpuledger.warehouse.schema import migrate

    con = duckdb.connect()
    migrate(con)
    text = (ROOT / "docs" / "data-dictionary.md").read_text()
    relations = [r[0] for r in con.sql("select table_name from information_schema.tables").fetchall()]
    macros = [r[0] for r in con.sql("select function_name from duckdb_functions() where not internal").fetchall()]
    assert len(relations) >= 20 and len(macros) >= 2
    unnamed = [name for name in relations + macros if f"`{name}" not in text]
    assert not unnamed, f"docs/data-dictionary.md does not name {unnamed}"
    columns = {(t, c) for t, c in con.sql("select table_name, column_name from information_schema.columns").fetchall()}
    for macro in macros:
        columns |= {(macro, d[0]) for d in con.sql(f"select * from {macro}(now()) limit 0").description}
    missing = sorted(f"{t}.{c}" for t, c in columns if not re.search(rf"\b{c}\b", text))
    assert not missing, f"docs/data-dictionary.md does not name these columns: {missing}"
