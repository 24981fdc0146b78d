from __future__ import annotations

import ast

from tests.toolkits.sample import DevOps, Weather
from toolkits import ToolkitRegistry, openai_tools, operation, render_stubs, toolkit

GRANTS = {
    "devops": ["get_project_info", "search_requirements", "create_requirement", "deploy_app", "drop_database"],
    "weather": "*",
}

EXPECTED = '''\
class devops:
    """DevOps platform: projects, requirements, deployments"""

    async def get_project_info(self, project_id: str) -> dict[str, Any]:
        """Basic info of a project.

        Args:
            project_id: The project's id, for example "123".

        Returns:
            The project's id, name and status.
        """

    async def search_requirements(self, project_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """Search the requirements of a project.

        Args:
            project_id: The project's id.
            query: Words to look for in titles.
            limit: At most this many results.
        """

    async def create_requirement(self, project_id: str, requirement: dict) -> str:
        """Create a requirement.

        Args:
            project_id: The project's id.
            requirement: Title and priority (1 = highest).
        """

    async def deploy_app(self, app_id: str, version: str, strategy: Literal['rolling', 'blue_green'] = 'rolling') -> dict:
        """Deploy a version of an app.

        Needs the user's approval: the call waits until the user allows it, and raises if denied.

        Args:
            app_id: The app.
            version: The version to deploy, for example "1.4.2".
            strategy: How to roll it out.
        """


class weather:
    """Weather forecasts (dynamic)"""

    async def forecast(self, city: str, days: int = 1, unit: Literal['C', 'F'] | None = None) -> dict:
        """The forecast for a city.

        Args:
            city: City name.
            days: How many days.
        """
'''


def test_stubs_snapshot() -> None:
    # drop_database is granted but approval="deny": it can never run, so the model never sees it.
    assert render_stubs([DevOps, Weather()], grants=GRANTS) == EXPECTED


def test_stubs_are_valid_python() -> None:
    tree = ast.parse(render_stubs(ToolkitRegistry.from_entry_points()) + render_stubs([DevOps, Weather()]))
    classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    assert classes == ["system", "devops", "weather"]


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
