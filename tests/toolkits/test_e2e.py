"""Toolkits through the real sandboxes: generated code -> runtime -> channel -> bridge -> toolkit."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from codeact.sandbox import DockerSandbox, Sandbox, SandboxImageMissingError, SubprocessSandbox
from codeact.sandbox.runtime.proxy import build_proxies
from codeact.toolkits import ApprovalDecision, ApprovalRequest, CallRecord, ToolkitBridge, ToolkitRegistry
from codeact.toolkits.builtin.system import SystemToolkit
from tests.toolkits.sample import Calls, Canary, DevOps

GRANTS = {
    "devops": ["get_project_info", "search_requirements", "slow", "fail", "deploy_app", "echo", "big"],
    "system": "*",
}


class World:
    def __init__(self) -> None:
        self.calls = Calls()
        self.canary = Canary()
        self.denied: list[ApprovalRequest] = []

        async def approve(request: ApprovalRequest) -> ApprovalDecision:
            self.denied.append(request)
            return ApprovalDecision(allow=False, reason="change freeze")

        registry = ToolkitRegistry([DevOps(self.calls), self.canary, SystemToolkit()])
        self.bridge = ToolkitBridge(registry, grants=GRANTS, session_id="e2e", approval=approve)


def _subprocess(bridge: ToolkitBridge) -> Sandbox:
    return SubprocessSandbox(bridge=bridge)


def _docker(bridge: ToolkitBridge) -> Sandbox:
    return DockerSandbox(bridge=bridge, session_id=f"tk-{uuid.uuid4().hex[:8]}")


@pytest.fixture(params=[pytest.param("subprocess", id="subprocess"), pytest.param("docker", id="docker")])
def backend(request: pytest.FixtureRequest) -> Callable[[ToolkitBridge], Sandbox]:
    if request.param == "docker":
        from codeact.sandbox.image import ensure_image

        client = request.getfixturevalue("docker_client")
        try:
            ensure_image(client)
        except SandboxImageMissingError as exc:
            if os.environ.get("CODEACT_REQUIRE_SERVICES") == "1" or os.environ.get("CI") == "true":
                pytest.fail(str(exc), pytrace=False)
            pytest.skip(str(exc))
        return _docker
    return _subprocess


@pytest.fixture
def world() -> World:
    return World()


@pytest_asyncio.fixture
async def box(backend: Callable[[ToolkitBridge], Sandbox], world: World) -> AsyncIterator[Sandbox]:
    async with backend(world.bridge) as sandbox:
        yield sandbox


async def test_await_and_sync_style_calls(box: Sandbox, world: World) -> None:
    result = await box.execute(
        'info = await devops.get_project_info("123")\n'
        'again = devops.get_project_info(project_id="124")\n'
        'found = devops.search_requirements("123", "login", limit=1)\n'
        "def helper(pid):\n"
        "    return devops.get_project_info(pid)['name']\n"
        'name = helper("125")\n'
    )
    assert result.error is None, result.error
    assert result.variables["info"] == {"id": "123", "name": "project 123", "status": "active"}
    assert result.variables["again"]["id"] == "124"
    assert result.variables["found"] == [{"id": "R0", "title": "login #0"}]
    assert result.variables["name"] == "project 125"
    assert result.rpc_count == 4
    records = world.bridge.drain_calls()
    assert [(r.operation, r.arguments) for r in records][:3] == [
        ("get_project_info", {"project_id": "123"}),
        ("get_project_info", {"project_id": "124"}),
        ("search_requirements", {"project_id": "123", "query": "login", "limit": 1}),
    ]


async def test_gather_runs_calls_concurrently_on_the_host(box: Sandbox, world: World) -> None:
    result = await box.execute("import asyncio\nout = await asyncio.gather(*[devops.slow(0.15) for _ in range(4)])\n")
    assert result.error is None, result.error
    assert result.variables["out"] == [0.15] * 4
    starts = [start for start, _ in world.calls.intervals]
    ends = [end for _, end in world.calls.intervals]
    assert len(starts) == 4
    assert max(starts) < min(ends)


async def test_create_task_and_task_group_accept_toolkit_calls(box: Sandbox, world: World) -> None:
    code = (
        "import asyncio\n"
        "task = asyncio.create_task(devops.slow(0.05))\n"
        "async with asyncio.TaskGroup() as tg:\n"
        "    other = tg.create_task(devops.slow(0.05))\n"
        "both = [await task, other.result()]\n"
    )
    result = await box.execute(code)
    assert result.ok, result.error
    assert result.variables["both"] == [0.05, 0.05]


async def test_tool_errors_are_catchable_exceptions(box: Sandbox, world: World) -> None:
    result = await box.execute(
        "try:\n"
        '    devops.fail("project 9 is archived")\n'
        "except Exception as exc:\n"
        "    caught = [type(exc).__name__, str(exc), exc.code]\n"
        "try:\n"
        '    devops.deploy_app("web", "2.0")\n'
        "except PermissionError as exc:\n"
        "    denied = str(exc)\n"
    )
    assert result.error is None, result.error
    assert result.variables["caught"] == ["ToolError", "project 9 is archived", "tool_error"]
    assert result.variables["denied"] == "devops.deploy_app() was not approved: change freeze"
    assert [r.operation for r in world.denied] == ["deploy_app"]
    assert world.calls.names() == ["fail"]


async def test_ungranted_operations_fail_in_the_sandbox(box: Sandbox, world: World) -> None:
    result = await box.execute("devops.drop_database('prod')\n")
    assert result.error is not None
    assert result.error.type == "AttributeError"
    assert result.error.message == (
        "toolkit 'devops' has no operation 'drop_database' granted to this session; granted operations of devops: "
        "big, deploy_app, echo, fail, get_project_info, search_requirements, slow"
    )
    # the engine's own operation written on the toolkit at hand (the 1.5B kept writing `browser.parse`
    # after the error named `system.parse`): it runs as the system toolkit's, and stderr says so
    result = await box.execute("now = devops.get_current_time(tz='UTC')\n")
    assert result.error is None, result.error
    assert result.variables["now"].endswith("+00:00")
    assert result.stderr == (
        "Note: `devops.get_current_time` is `system.get_current_time`; it ran as `system.get_current_time`.\n"
    )
    assert [(c.toolkit, c.operation) for c in world.bridge.drain_calls()] == [("system", "get_current_time")]
    result = await box.execute("canary.trip()\n")
    assert result.error is not None and result.error.type == "NameError"
    assert world.canary.ran == []
    assert world.bridge.drain_calls() == []  # refused in the sandbox: nothing reached the host


async def test_finish_ends_the_round_even_inside_except_exception(box: Sandbox, world: World) -> None:
    result = await box.execute(
        'try:\n    await system.finish("all good")\nexcept Exception:\n    swallowed = True\nafter = True\n'
    )
    assert result.error is None, result.error
    assert result.control == {"kind": "finish", "answer": "all good"}
    assert "swallowed" not in result.variables and "after" not in result.variables


async def test_replay_reproduces_a_round_without_running_tools(
    backend: Callable[[ToolkitBridge], Sandbox], world: World
) -> None:
    code = (
        'a = await devops.get_project_info("1")\ntry:\n    devops.fail("x")\nexcept Exception as e:\n    err = str(e)\n'
    )
    async with backend(world.bridge) as sandbox:
        original = await sandbox.execute(code)
    records = [CallRecord.from_json(r.to_json()) for r in world.bridge.drain_calls()]
    world.calls.log.clear()
    replay = ToolkitBridge.replaying(records, toolkits=[DevOps(world.calls)], grants={"devops": "*"})
    async with backend(replay) as sandbox:
        replayed = await sandbox.execute(code)
    assert replayed.variables == original.variables
    assert world.calls.log == []
    assert replay.replay_remaining == 0 and replay.divergence is None


async def test_payload_caps_on_arguments_and_results(box: Sandbox, world: World) -> None:
    result = await box.execute(
        "try:\n"
        "    devops.echo('x' * (9 * 1024 * 1024))\n"
        "except Exception as exc:\n"
        "    arg_error = [type(exc).__name__, exc.code]\n"
        "try:\n"
        "    devops.big(9 * 1024 * 1024)\n"
        "except Exception as exc:\n"
        "    result_error = [type(exc).__name__, exc.code]\n"
        "ok = len(devops.big(1024 * 1024))\n"
    )
    assert result.error is None, result.error
    # refused in the sandbox (the frame would exceed 8 MiB), as docs/protocol.md says: a ToolError
    assert result.variables["arg_error"] == ["ToolError", "payload_too_large"]
    assert result.variables["result_error"] == ["ToolError", "payload_too_large"]
    assert result.variables["ok"] == 1024 * 1024
    errors = [r.error["name"] for r in world.bridge.drain_calls() if r.error]
    assert errors == ["payload_too_large"]


def test_an_operation_of_another_toolkit_names_its_owner() -> None:
    """`cipher.gc_content` for `dna.gc_content`: the error names the toolkit that has it (no forwarding)."""
    manifest = {"toolkits": {"cipher": {"operations": {"caesar": {"params": ["text", "shift"]}}},
                             "dna": {"operations": {"gc_content": {"params": ["seq"]}}}}}  # fmt: skip
    proxies = build_proxies(manifest, bridge=None, encode=lambda value: value)  # type: ignore[arg-type]
    with pytest.raises(AttributeError) as caught:
        _ = proxies["cipher"].gc_content
    assert str(caught.value) == (
        "toolkit 'cipher' has no operation 'gc_content' granted to this session; it is `dna.gc_content`; "
        "granted operations of cipher: caesar"
    )
