"""The package installs under one `gpuledger` namespace and says its version."""

from __future__ import annotations

import tomllib
from pathlib import Path

from typer.testing import CliRunner

import gpuledger
from gpuledger.adapters.base import SourceError
from gpuledger.flows import pipeline
from gpuledger.flows.cli import app
from gpuledger.spiders import browser

ROOT = Path(__file__).parents[1]


def test_every_installed_package_is_under_gpuledger() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"] and all(p == "gpuledger" or p.startswith("gpuledger.") for p in config["packages"])
    assert config["package-dir"]["gpuledger.adapters"] == "adapters"
    assert config["package-dir"]["gpuledger.warehouse"] == "warehouse"


def test_version_option() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gpuledger {gpuledger.__version__}" == "gpuledger 0.2.0"


def test_refresh_installs_a_browser_first_when_a_page_source_needs_one(monkeypatch) -> None:
    said: list[str] = []
    installed: list[bool] = []

    def none_found(ctx):
        raise SourceError("no Chromium found")

    monkeypatch.setattr(browser, "find_chromium", none_found)
    monkeypatch.setattr(browser, "ensure_browser", lambda: installed.append(True) or "/opt/chromium")
    pipeline.ensure_browsers(["lambda", "runpod"], say=said.append)
    assert installed == [] and said == []  # no page source that renders: nothing to do
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert installed == [True]
    assert said[0].startswith("No Chromium found") and said[1] == "chromium: /opt/chromium"


def test_a_failed_browser_install_is_one_line(monkeypatch) -> None:
    said: list[str] = []

    def none_found(ctx):
        raise SourceError("no Chromium found")

    def fails():
        raise OSError("apt-get: not found")

    monkeypatch.setattr(browser, "find_chromium", none_found)
    monkeypatch.setattr(browser, "ensure_browser", fails)
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert len(said) == 2 and "OSError: apt-get: not found" in said[1] and "\n" not in said[1]
