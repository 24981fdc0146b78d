from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from codeact.toolkits import (
    DuplicateToolkitError,
    ToolkitDefinitionError,
    ToolkitLoadError,
    ToolkitNotFoundError,
    ToolkitRegistry,
    load_toolkit_ref,
    operation,
    toolkit,
)
from codeact.toolkits.builtin.system import SystemToolkit
from tests.toolkits.sample import Canary, DevOps, Weather


def test_registers_both_kinds_and_resolves_by_name() -> None:
    registry = ToolkitRegistry([DevOps, Weather()])
    assert registry.names() == ["devops", "weather"]
    assert registry.resolve("devops").source == "tests.toolkits.sample.DevOps"
    assert registry.resolve("weather").source == "tests.toolkits.sample.Weather"
    assert "weather" in registry
    assert len(registry) == 2


def test_duplicate_names_raise_naming_both() -> None:
    @toolkit(name="devops", description="Another DevOps")
    class OtherDevOps:
        @operation
        def ping(self) -> str:
            """Ping."""
            return "pong"

    registry = ToolkitRegistry([DevOps])
    with pytest.raises(DuplicateToolkitError) as info:
        registry.register(OtherDevOps)
    assert info.value.message == (
        "toolkit name 'devops' is already registered by tests.toolkits.sample.DevOps; cannot register "
        "tests.toolkits.test_registry.test_duplicate_names_raise_naming_both.<locals>.OtherDevOps under the same "
        "name: rename one (@toolkit(name=...)) or unregister the first"
    )
    registry.register(OtherDevOps, replace=True)
    assert list(registry.resolve("devops").operations) == ["ping"]


def test_registering_the_same_instance_twice_is_idempotent() -> None:
    weather = Weather()
    registry = ToolkitRegistry([weather])
    registry.register(weather)
    assert registry.names() == ["weather"]


def test_unregister_and_unknown_names() -> None:
    registry = ToolkitRegistry([DevOps, Canary])
    registry.unregister("canary")
    assert registry.names() == ["devops"]
    with pytest.raises(ToolkitNotFoundError) as info:
        registry.resolve("devop")
    assert info.value.message == "no toolkit named 'devop' is registered; did you mean 'devops'?"
    with pytest.raises(ToolkitNotFoundError) as info:
        registry.unregister("zzz")
    assert info.value.message == "no toolkit named 'zzz' is registered; registered: devops"


def test_not_a_toolkit() -> None:
    with pytest.raises(ToolkitDefinitionError) as info:
        ToolkitRegistry([dict])
    assert info.value.message == (
        "dict is not a toolkit: decorate the class with @toolkit(name=...), or subclass DynamicToolkit"
    )


def test_entry_points_register_the_builtins() -> None:
    registry = ToolkitRegistry.from_entry_points()
    assert "system" in registry
    assert isinstance(registry.resolve("system").target, SystemToolkit)


def test_entry_point_group_without_entries_is_empty() -> None:
    assert ToolkitRegistry.from_entry_points(group="codeact.toolkits.none").names() == []


@pytest.mark.parametrize(
    ("ref", "name", "kind"),
    [
        pytest.param("tests.toolkits.sample:DevOps", "devops", "DevOps", id="class"),
        pytest.param("tests.toolkits.sample:devops_instance", "devops", "DevOps", id="instance"),
        pytest.param("tests.toolkits.sample:Weather", "weather", "Weather", id="dynamic-class"),
        pytest.param("codeact.toolkits.builtin.system:SystemToolkit", "system", "SystemToolkit", id="builtin"),
    ],
)
def test_load_toolkit_ref_from_module(ref: str, name: str, kind: str) -> None:
    bound = load_toolkit_ref(ref)
    assert bound.name == name
    assert type(bound.target).__name__ == kind


def test_load_toolkit_ref_from_py_path(tmp_path: Path) -> None:
    path = tmp_path / "my_tools.py"
    path.write_text(
        textwrap.dedent(
            '''
            from __future__ import annotations
            from dataclasses import dataclass
            from codeact.toolkits import toolkit, operation

            @dataclass
            class Point:
                x: int
                y: int

            @toolkit(name="geo", description="Geometry")
            class Geo:
                @operation
                def norm(self, p: Point) -> float:
                    """Length of a vector."""
                    return (p.x ** 2 + p.y ** 2) ** 0.5
            '''
        )
    )
    bound = load_toolkit_ref(f"{path}:Geo")
    assert bound.name == "geo"
    assert bound.validate("norm", {"p": {"x": 3, "y": 4}})["p"].x == 3
    assert load_toolkit_ref(f"{path}:Geo").name == "geo"  # loading twice reuses the module


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        pytest.param(
            "tests.toolkits.sample",
            "toolkit reference 'tests.toolkits.sample' must look like MODULE:OBJECT (for example mypkg.tools:DevOps "
            "or ./tools.py:DevOps)",
            id="no-colon",
        ),
        pytest.param(
            "no_such_module_xyz:Thing",
            "toolkit reference 'no_such_module_xyz:Thing': cannot import module 'no_such_module_xyz' (No module "
            "named 'no_such_module_xyz'); check it is installed and spelled right, or pass a path to a .py file",
            id="module-not-found",
        ),
        pytest.param(
            "tests.toolkits.sample:DevOpz",
            "module 'tests.toolkits.sample' has no attribute 'DevOpz'; did you mean 'DevOps'?",
            id="attribute-missing",
        ),
        pytest.param(
            "tests.toolkits.sample:not_a_toolkit",
            "toolkit reference 'tests.toolkits.sample:not_a_toolkit': a int object is not a toolkit: decorate the "
            "class with @toolkit(name=...), or subclass DynamicToolkit",
            id="not-a-toolkit",
        ),
        pytest.param(
            "./does/not/exist.py:X",
            "toolkit reference './does/not/exist.py:X': file './does/not/exist.py' does not exist",
            id="file-missing",
        ),
    ],
)
def test_load_toolkit_ref_errors(ref: str, message: str) -> None:
    with pytest.raises(ToolkitLoadError) as info:
        load_toolkit_ref(ref)
    assert info.value.message == message


def test_load_toolkit_ref_reports_import_failures(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(ToolkitLoadError) as info:
        load_toolkit_ref(f"{path}:X")
    assert info.value.message == f"toolkit reference '{path}:X': executing '{path}' failed: RuntimeError: boom"
    assert not any(name.startswith("_codeact_toolkit_broken") for name in sys.modules)


def test_load_toolkit_ref_needs_no_arg_constructor(tmp_path: Path) -> None:
    path = tmp_path / "needs_args.py"
    path.write_text(
        textwrap.dedent(
            '''
            from codeact.toolkits import toolkit, operation

            @toolkit(name="needs", description="Needs args")
            class Needs:
                def __init__(self, token: str) -> None:
                    self.token = token

                @operation
                def op(self) -> str:
                    """Doc."""
                    return self.token
            '''
        )
    )
    with pytest.raises(ToolkitLoadError) as info:
        load_toolkit_ref(f"{path}:Needs")
    assert info.value.message == (
        f"toolkit reference '{path}:Needs': toolkit class Needs could not be instantiated without arguments "
        "(TypeError: Needs.__init__() missing 1 required positional argument: 'token'); pass an instance instead"
    )
