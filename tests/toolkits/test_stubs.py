from __future__ import annotations

import ast
from pathlib import Path

from codeact.toolkits import ToolkitRegistry, openai_tools, operation, render_stubs, toolkit
from tests.toolkits.sample import DevOps, Weather

GRANTS = {
    "devops": ["get_project_info", "search_requirements", "create_requirement", "deploy_app", "drop_database"],
    "weather": "*",
}

SNAPSHOT = Path(__file__).parent / "snapshots" / "stubs.py.txt"


def test_stubs_snapshot() -> None:
    # drop_database is granted but approval="deny": it can never run, so the model never sees it.
    assert render_stubs([DevOps, Weather()], grants=GRANTS) == SNAPSHOT.read_text()


def test_stubs_are_valid_python() -> None:
    tree = ast.parse(render_stubs(ToolkitRegistry.from_entry_points()) + render_stubs([DevOps, Weather()]))
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    assert classes == ["system", "Requirement", "devops", "weather"]


def test_stubs_escape_docstring_quotes() -> None:
    @toolkit(name="quotes", description='Says """hi""" \\o/')
    class Quotes:
        @operation
        def op(self) -> None:
            """Has a backslash \\d and triple quotes ''' here."""

    source = render_stubs([Quotes])
    ast.parse(source)
    assert 'Says \\"\\"\\"hi\\"\\"\\" \\\\o/' in source


def test_openai_tools_form() -> None:
    tools = openai_tools([Weather()])
    assert tools == [
        {
            "type": "function",
            "function": {
                "name": "weather__forecast",
                "description": "The forecast for a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string", "description": "City name."},
                        "days": {"type": "integer", "description": "How many days.", "default": 1},
                        "unit": {"enum": ["C", "F"]},
                    },
                    "required": ["city"],
                },
            },
        }
    ]
    names = [t["function"]["name"] for t in openai_tools([DevOps], grants={"devops": ["echo", "drop_database"]})]
    assert names == ["devops__echo"]
