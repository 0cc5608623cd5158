"""One typed settings object: every GPULEDGER_* variable is a field, documented, read at call time."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from gpuledger.adapters.base import SourceContext, SourceError
from gpuledger.warehouse import settings as settings_module
from gpuledger.warehouse.settings import DEVELOPMENT_VARIABLES, Settings, env_name, load_settings

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("adapters", "spiders", "warehouse", "flows", "gpuledger")
VARIABLE = re.compile(r"GPULEDGER_[A-Z0-9_]+")


def readme_settings_table() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Settings", 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `(GPULEDGER_[A-Z0-9_]+)` \|", section, flags=re.M)


def test_every_setting_is_a_row_of_the_readme_table_and_every_row_a_setting() -> None:
    rows = readme_settings_table()
    fields = [env_name(f) for f in Settings.model_fields]
    assert len(rows) == len(set(rows))
    assert set(rows) == set(fields)
    assert len(fields) == 30 and "GPULEDGER_AWS_REGIONS" in rows and "GPULEDGER_CHROMIUM_PATH" in rows
    readme = (ROOT / "README.md").read_text()
    assert all(name in readme for name in DEVELOPMENT_VARIABLES)


def test_no_variable_name_in_the_package_outside_the_settings_module() -> None:
    found = []
    for folder in PACKAGE_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel == "warehouse/settings.py":
                continue
            found += [f"{rel}: {name}" for name in VARIABLE.findall(path.read_text())]
    assert found == []


def test_the_grep_finds_a_planted_name() -> None:
    assert VARIABLE.findall('x = os.environ.get("GPULEDGER_TASK_RETRIES", "2")') == ["GPULEDGER_TASK_RETRIES"]


def test_environment_over_per_scrape_settings_over_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPULEDGER_VASTAI_MAX_PAGES", raising=False)
    monkeypatch.delenv("GPULEDGER_AWS_REGIONS", raising=False)
    ctx = SourceContext(provider="aws", settings={"aws_regions": "us-east-1", "vastai_max_pages": 2})
    assert ctx.config.aws_regions == "us-east-1" and ctx.config.vastai_max_pages == 2
    assert ctx.config.aws_concurrency == 4 and ctx.config.azure_max_pages == 500
    monkeypatch.setenv("GPULEDGER_AWS_REGIONS", "eu-north-1")  # read when used, not when made
    assert ctx.config.aws_regions == "eu-north-1"


def test_settings_are_read_when_used_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuledger.flows import refresh

    assert not hasattr(refresh, "TASK_TIMEOUT_S") and not hasattr(refresh, "LIVE_TASK_RETRIES")
    monkeypatch.setenv("GPULEDGER_TASK_RETRIES", "0")
    assert load_settings().task_retries == 0
    monkeypatch.setenv("GPULEDGER_TASK_TIMEOUT_S", "7.5")
    assert load_settings().task_timeout_s == 7.5
    monkeypatch.setenv("GPULEDGER_DB", "/srv/ledger.duckdb")
    from gpuledger.warehouse.store import AnomalyPolicy, db_path

    assert db_path() == Path("/srv/ledger.duckdb")
    monkeypatch.setenv("GPULEDGER_ACCEPT_ANOMALY", " aws, vastai ,")
    assert AnomalyPolicy.from_env(["gcp"]).accept == {"aws", "vastai", "gcp"}


def test_an_invalid_value_fails_the_provider_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_AWS_CONCURRENCY", "many")
    with pytest.raises(SourceError, match=r"^aws: invalid settings: GPULEDGER_AWS_CONCURRENCY='many': Input should be a valid integer"):
        SourceContext(provider="aws").config
    monkeypatch.setenv("GPULEDGER_AWS_CONCURRENCY", "4")
    monkeypatch.setenv("GPULEDGER_AWS_PRICE_SOURCE", "csv")
    with pytest.raises(SourceError, match=r"GPULEDGER_AWS_PRICE_SOURCE='csv': Input should be 'auto', 'bulk' or 'api'"):
        SourceContext(provider="aws").config


def test_an_unknown_per_scrape_setting_is_refused() -> None:
    with pytest.raises(SourceError, match=r"invalid settings: aws_region='us-east-1': Extra inputs are not permitted"):
        SourceContext(provider="aws", settings={"aws_region": "us-east-1"}).config


def test_an_unknown_variable_warns_once_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.setenv("GPULEDGER_AWS_REGION", "us-east-1")  # the typo of GPULEDGER_AWS_REGIONS
    monkeypatch.setenv("GPULEDGER_CHROMIUM", "/usr/bin/chromium")  # not a setting: GPULEDGER_CHROMIUM_PATH is
    with caplog.at_level(logging.WARNING, logger="gpuledger.settings"):
        first = load_settings()
        load_settings()
    lines = [r.getMessage() for r in caplog.records if r.name == "gpuledger.settings"]
    assert lines == ["ignoring unknown settings: GPULEDGER_AWS_REGION (did you mean GPULEDGER_AWS_REGIONS?), "
                     "GPULEDGER_CHROMIUM (did you mean GPULEDGER_CHROMIUM_PATH?); README's settings table "
                     "lists them all"]
    assert first.aws_regions is None and first.chromium_path is None


def test_a_fetch_child_leaves_the_warning_to_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    # `refresh -p lambda -p runpod -p vultr` with a typo printed the warning once per fetch worker too.
    monkeypatch.setattr(settings_module, "_warned", set())
    child = {"GPULEDGER_AWS_REGION": "us-east-1", settings_module.PARENT_PID_VARIABLE: "4242"}
    assert settings_module.warn_unknown_variables(child) == []
    assert settings_module.warn_unknown_variables({"GPULEDGER_AWS_REGION": "us-east-1"}) == ["GPULEDGER_AWS_REGION"]


def test_development_variables_do_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings_module, "_warned", set())
    monkeypatch.setenv("GPULEDGER_FUZZ_EXAMPLES", "10")
    assert settings_module.warn_unknown_variables({"GPULEDGER_FUZZ_EXAMPLES": "10", "PATH": "/bin"}) == []


def test_the_api_key_setting_is_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULEDGER_GCP_API_KEY", "AIzaCanaryCanaryCanary")
    s = load_settings()
    assert s.gcp_api_key is not None and s.gcp_api_key.get_secret_value() == "AIzaCanaryCanaryCanary"
    assert "AIzaCanary" not in repr(s) and "AIzaCanary" not in str(s.model_dump())


def test_env_name() -> None:
    assert env_name("aws_regions") == "GPULEDGER_AWS_REGIONS"
    with pytest.raises(KeyError):
        env_name("aws_region")


def test_a_variable_removed_while_the_environment_is_read_is_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread may unset a variable while pydantic-settings walks os.environ.items()."""
    from pydantic_settings import EnvSettingsSource

    real = EnvSettingsSource._load_env_vars
    calls = []

    def racing(self):
        calls.append(1)
        if len(calls) == 1:
            raise KeyError("PYTEST_CURRENT_TEST")
        return real(self)

    monkeypatch.setattr(EnvSettingsSource, "_load_env_vars", racing)
    monkeypatch.setenv("GPULEDGER_AWS_CONCURRENCY", "6")
    assert load_settings().aws_concurrency == 6 and len(calls) == 2
