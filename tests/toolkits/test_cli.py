from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from codeact.engine.cli import app
from codeact.toolkits import ToolkitRegistry, render_stubs
from tests.toolkits.sample import Weather

SAMPLE = Path(__file__).with_name("sample.py")


def test_toolkits_list_prints_builtins_and_given_toolkits() -> None:
    result = CliRunner().invoke(app, ["toolkits", "list", "--toolkit", f"{SAMPLE}:Weather"])
    assert result.exit_code == 0, result.output
    expected = render_stubs([*ToolkitRegistry.from_entry_points(), Weather()])
    assert result.stdout == expected


def test_toolkits_list_from_a_module_without_builtins() -> None:
    result = CliRunner().invoke(
        app, ["toolkits", "list", "--no-builtins", "--toolkit", "tests.toolkits.sample:Weather"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == render_stubs([Weather()])


def test_toolkits_list_reports_load_errors() -> None:
    result = CliRunner().invoke(app, ["toolkits", "list", "--toolkit", "tests.toolkits.sample:Nope"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error [toolkit.load]: module 'tests.toolkits.sample' has no attribute 'Nope'; toolkits there: DevOps, "
        "Canary, Weather, devops_instance\n"
    )
