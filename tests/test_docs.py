"""Documentation keeps up with the code (sqlite-utils style): every command has help and is in the README."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

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
