"""The package installs under one `gpuledger` namespace and says its version."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import gpuledger
from gpuledger.adapters.base import SourceError
from gpuledger.flows import refresh as pipeline
from gpuledger.flows.cli import app
from gpuledger.spiders import browser
# Imported before the tests below stub browser.find_chromium, so that its own binding of the
# real function is the one the rest of the session uses.
from gpuledger.spiders import hyperstack  # noqa: F401

ROOT = Path(__file__).parents[1]


def test_every_installed_package_is_under_gpuledger() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["packages"] and all(p == "gpuledger" or p.startswith("gpuledger.") for p in config["packages"])
    assert config["package-dir"]["gpuledger.adapters"] == "adapters"
    assert config["package-dir"]["gpuledger.warehouse"] == "warehouse"


def test_the_warehouse_imports_none_of_the_other_folders() -> None:
    """The layout's rule: warehouse/ owns the schema and imports nothing of adapters/, flows/ or spiders/."""
    found = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in sorted((ROOT / "warehouse").rglob("*.py"))
             for line in path.read_text(encoding="utf-8").splitlines()
             if re.match(r"\s*(from|import) gpuledger\.(adapters|flows|spiders)\b", line)]
    assert found == []


def test_version_option() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"gpuledger {gpuledger.__version__}" == "gpuledger 0.2.0"


def stub_machine(monkeypatch, run) -> None:
    """A root Debian machine with no Chromium until `run` (the stand-in for subprocess.run) installs one."""
    found: list[str] = []

    def find(ctx):
        if not found:
            raise SourceError("no Chromium found")
        return found[0]

    def installing(cmd, **kwargs):
        run(cmd)
        if cmd[:2] == ["apt-get", "install"]:
            found.append("/opt/chromium")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(browser, "find_chromium", find)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browser.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr("subprocess.run", installing)


def test_refresh_installs_a_browser_first_when_a_page_source_needs_one(monkeypatch) -> None:
    said: list[str] = []
    installed: list[bool] = []
    stub_machine(monkeypatch, lambda cmd: cmd[:2] == ["apt-get", "install"] and installed.append(True))
    pipeline.ensure_browsers(["lambda", "runpod"], say=said.append)
    assert installed == [] and said == []  # no page source that renders: nothing to do
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert installed == [True]
    assert said[0].startswith("No Chromium found") and said[1] == "chromium: /opt/chromium"
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert installed == [True] and len(said) == 2  # found now: nothing installed, nothing said


def test_a_failed_browser_install_is_one_line(monkeypatch) -> None:
    said: list[str] = []

    def fails(cmd):
        raise OSError("apt-get: not found")

    stub_machine(monkeypatch, fails)
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert len(said) == 2 and "OSError: apt-get: not found" in said[1] and "\n" not in said[1]


def fake_apt_get(folder: Path, exit_code: int) -> None:
    """An `apt-get` that talks the way dpkg does under -qq (progress on stdout even when quiet),
    failing with apt's own error line when exit_code is not 0."""
    script = folder / "apt-get"
    script.write_text("#!/bin/sh\n"
                      'echo "Selecting previously unselected package chromium."\n'
                      'echo "Unpacking chromium (120.0) ..."\n'
                      + (f'echo "E: Unable to locate package chromium" >&2\nexit {exit_code}\n' if exit_code else "exit 0\n"))
    script.chmod(0o755)


def test_the_installers_own_output_stays_off_the_terminal(monkeypatch, tmp_path, capfd) -> None:
    fake_apt_get(tmp_path, 0)
    monkeypatch.setenv("PATH", f"{tmp_path}:{browser.os.environ['PATH']}")
    said: list[str] = []
    installs: list[bool] = []
    real_run = subprocess.run

    def counting_run(cmd, **kwargs):
        installs.append(cmd[:2] == ["apt-get", "install"])
        return real_run(cmd, **kwargs)


    def find(ctx):
        if not any(installs):
            raise SourceError("no Chromium found")
        return "/opt/chromium"

    monkeypatch.setattr(browser, "find_chromium", find)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.setattr("subprocess.run", counting_run)
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    out, err = capfd.readouterr()
    assert installs == [False, True]  # apt-get update, then install, both through the real process
    assert said[1] == "chromium: /opt/chromium"
    assert "Selecting" not in out + err and "Unpacking" not in out + err


def test_a_failed_install_says_the_installers_last_line(monkeypatch, tmp_path, capfd) -> None:
    fake_apt_get(tmp_path, 100)
    monkeypatch.setenv("PATH", f"{tmp_path}:{browser.os.environ['PATH']}")

    def find(ctx):
        raise SourceError("no Chromium found")

    monkeypatch.setattr(browser, "find_chromium", find)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    said: list[str] = []
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    out, err = capfd.readouterr()
    assert len(said) == 2 and "\n" not in said[1]
    assert said[1] == ("could not install a Chromium (RuntimeError: `apt-get update` exited 100: "
                       "E: Unable to locate package chromium); the page sources that need it will fail")
    assert "Selecting" not in out + err


def test_debian_without_the_headless_shell_package_gets_the_full_browser(monkeypatch) -> None:
    """Debian's headless shell first (the lighter browser); a release without that package gets its
    `chromium`, and the refresh says which one it found."""
    asked: list[str] = []

    def find(ctx):
        if "chromium" not in asked:
            raise SourceError("no Chromium found")
        return "/usr/bin/chromium"

    def apt(cmd, **kwargs):
        if cmd[:2] == ["apt-get", "install"]:
            asked.append(cmd[-1])
            if cmd[-1] == "chromium-headless-shell":
                return subprocess.CompletedProcess(cmd, 100, "", "E: Unable to locate package chromium-headless-shell\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(browser, "find_chromium", find)
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browser.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr("subprocess.run", apt)
    said: list[str] = []
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert asked == ["chromium-headless-shell", "chromium"]
    assert said[1] == "chromium: /usr/bin/chromium"


def test_both_debian_packages_failing_is_one_line_naming_the_last(monkeypatch) -> None:
    def apt(cmd, **kwargs):
        if cmd[:2] == ["apt-get", "install"]:
            return subprocess.CompletedProcess(cmd, 100, "", f"E: Unable to locate package {cmd[-1]}\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(browser, "find_chromium", lambda ctx: (_ for _ in ()).throw(SourceError("none")))
    monkeypatch.setattr(browser.os, "geteuid", lambda: 0)
    monkeypatch.setattr(browser.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr("subprocess.run", apt)
    said: list[str] = []
    pipeline.ensure_browsers(["hyperstack"], say=said.append)
    assert said[1] == ("could not install a Chromium (RuntimeError: `apt-get install chromium` exited 100: "
                       "E: Unable to locate package chromium); the page sources that need it will fail")


# A developer's machine in a file: a shared folder, a home directory, a virtualenv's interpreter.
# (Written in pieces so that this line does not match itself.)
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home/\w+|Users/\w+)" + "/|/venv" + "/bin/python")
LOCAL_DIRS = {".git", ".venv", ".hypothesis", ".pytest_cache", "__pycache__", "build", "dist"}


def project_files() -> list[Path]:
    """The files git tracks; outside a git checkout, every file but local caches and builds."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        return [ROOT / name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file()]
    return [p for p in ROOT.rglob("*") if p.is_file() and not LOCAL_DIRS & set(p.relative_to(ROOT).parts)
            and not any(part.endswith(".egg-info") for part in p.relative_to(ROOT).parts)]


def test_no_file_names_a_path_of_a_developers_machine() -> None:
    found = []
    for path in project_files():
        data = path.read_bytes()
        if path.suffix == ".gz" or b"\0" in data[:4096]:
            continue
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE_PATH.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "machine paths in project files:\n" + "\n".join(found[:20])
