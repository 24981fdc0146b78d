"""Prompt size at round 1 and round 10: CodeAct (FIM chat) vs JSON function calling, same task and toolkits.

Both prompts are built by the product's own renderers from the same toolkits (the bundled
``examples/devops`` toolkit plus the ``system`` toolkit): Python stubs (``render_stubs``) for CodeAct,
JSON-schema tools (``openai_tools``, what the react mode sends) for function calling. The task is run
as the same ten rounds both ways: in CodeAct a round is Thought + code + what the code printed; in
function calling it is the assistant's thought with its tool calls + the tool results (the whole JSON
the toolkit returned - function calling cannot choose what comes back). Tool results are real: the
toolkit's operations are called.

Two function-calling baselines:

* ``fc_same_sections`` - the baseline of issue 18: the function-calling request gets the same system
  sections as CodeAct minus the two that CodeAct's stubs and frame replace (``toolkits``,
  ``output_format``).
* ``fc_minimal`` - what codeact's react mode actually sends: the blueprint's instructions only.

Counted with litellm's gpt-4o counter (tools counted the way litellm prices them).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from codeact.segments import PromptConfig, SegmentBuilder, SegmentHistory, format_evaluation
from codeact.toolkits import ToolkitContext, ToolkitRegistry
from codeact.toolkits.builtin.system import SystemToolkit
from codeact.toolkits.stubs import openai_tools, render_stubs

ROOT = Path(__file__).resolve().parent.parent
TASK = "Project P-123: list the open login requirements, deploy checkout-api 2.4.0 and report its deploy status."
ROLE = "You are the DevOps Assistant, an assistant for projects, requirements, applications and deployments."
DEVELOPER = (
    "Projects are identified by id (e.g. P-123). Read a project's applications before deploying\n"
    "one of them, and report the deploy id you get back."
)

# (thought, calls [(operation, arguments)], code, what the code prints from the results)
ROUNDS: list[tuple[str, list[tuple[str, dict[str, Any]]], str]] = [
    (
        "Read the project first.",
        [("get_project_info", {"project_id": "P-123"})],
        'project = await devops.get_project_info(project_id="P-123")\nprint(project["name"], project["apps"])',
    ),
    (
        "Find the login requirements.",
        [("search_requirements", {"project_id": "P-123", "query": "login"})],
        'reqs = await devops.search_requirements(project_id="P-123", query="login")\n'
        'open_reqs = [r for r in reqs if r["status"] != "done"]\n'
        'print([(r["id"], r["title"]) for r in open_reqs])',
    ),
    (
        "List the applications before deploying.",
        [("get_app_list", {"project_id": "P-123"})],
        'apps = await devops.get_app_list(project_id="P-123")\nprint({a["id"]: a["version"] for a in apps})',
    ),
    (
        "Deploy checkout-api 2.4.0.",
        [("deploy_app", {"app_id": "checkout-api", "version": "2.4.0"})],
        'dep = await devops.deploy_app(app_id="checkout-api", version="2.4.0")\nprint(dep["id"])',
    ),
    (
        "Check the deployment.",
        [("get_deploy_status", {"deploy_id": "D-1001"})],
        'status = await devops.get_deploy_status(deploy_id=dep["id"])\nprint(status["status"])',
    ),
    (
        "Check the other project's requirements too.",
        [("search_requirements", {"project_id": "P-200", "query": ""})],
        'other = await devops.search_requirements(project_id="P-200")\nprint(len(other), other[0]["id"])',
    ),
    (
        "Compare with the identity project.",
        [("get_project_info", {"project_id": "P-200"})],
        'identity = await devops.get_project_info(project_id="P-200")\nprint(identity["owner"])',
    ),
    (
        "Check the identity applications' health.",
        [("get_app_list", {"project_id": "P-200"})],
        'unhealthy = [a["id"] for a in await devops.get_app_list(project_id="P-200") if not a["healthy"]]\n'
        "print(unhealthy)",
    ),
    (
        "Re-read all checkout requirements for the summary.",
        [("search_requirements", {"project_id": "P-123", "query": ""})],
        'all_reqs = await devops.search_requirements(project_id="P-123")\n'
        'print(sum(r["points"] for r in all_reqs if r["status"] != "done"), "open points")',
    ),
]


def _toolkit_module() -> Any:
    path = ROOT / "examples" / "devops" / "toolkit.py"
    spec = importlib.util.spec_from_file_location("_bench_devops_toolkit", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class _Awaitable:
    """The toolkit as sandbox code sees it: every operation awaitable (the bridge's proxy, in-process)."""

    def __init__(self, toolkit: Any) -> None:
        self._toolkit = toolkit

    def __getattr__(self, name: str) -> Any:
        async def call(**kwargs: Any) -> Any:
            return await _call(self._toolkit, name, kwargs)

        return call


async def _call(toolkit: Any, op: str, args: dict[str, Any]) -> Any:
    method = getattr(toolkit, op)
    # an operation that takes the call's ToolkitContext (deploy_app: its call id makes it idempotent) gets one
    wants = [n for n, a in inspect.get_annotations(method, eval_str=True).items() if a is ToolkitContext]
    value = method(**args, **{name: ToolkitContext(session_id="bench") for name in wants})
    return await value if asyncio.iscoroutine(value) else value


def _printer(into: list[str]) -> Any:
    def _print(*args: Any, **_: Any) -> None:
        into.append(" ".join(str(x) for x in args))

    return _print


async def _play(devops: Any) -> list[dict[str, Any]]:
    """Run every round's code for real against the toolkit; record what it printed and the raw results."""
    played: list[dict[str, Any]] = []
    namespace: dict[str, Any] = {"devops": _Awaitable(devops)}
    for thought, calls, code in ROUNDS:
        results = [await _call(devops, op, args) for op, args in calls]
        printed: list[str] = []
        namespace["print"] = _printer(printed)
        body = "\n".join("    " + line for line in code.splitlines())
        exec(compile(f"async def _round():\n{body}\n    return locals()", "<round>", "exec"), namespace)  # noqa: S102
        namespace.update(await namespace["_round"]())
        played.append(
            {"thought": thought, "calls": calls, "code": code, "results": results, "output": "\n".join(printed)}
        )
    return played


_LISTS = {"reqs", "open_reqs", "apps", "other", "unhealthy", "all_reqs"}


def _variables(played: list[dict[str, Any]], upto: int) -> dict[str, tuple[str, str]]:
    names = {"project", "reqs", "open_reqs", "apps", "dep", "status", "other", "identity", "unhealthy", "all_reqs"}
    seen: dict[str, tuple[str, str]] = {}
    for spec in played[:upto]:
        for name in names:
            if f"{name} = " in spec["code"]:
                seen[name] = ("list" if name in _LISTS else "dict", "...")
    return seen


def _codeact_messages(stubs: str, played: list[dict[str, Any]], rounds_before: int) -> list[dict[str, Any]]:
    history = SegmentHistory()
    history.add("User", TASK)
    for spec in played[:rounds_before]:
        history.add_round(
            thought=spec["thought"], code=spec["code"], evaluation=format_evaluation(stdout=spec["output"])
        )
    config = PromptConfig(instructions={"system": ROLE, "developer": DEVELOPER})
    prompt = SegmentBuilder(config, stubs=stubs).build("code", history, variables=_variables(played, rounds_before))
    return list(prompt.messages)


def _fc_messages(system: str, played: list[dict[str, Any]], rounds_before: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": TASK}]
    for i, spec in enumerate(played[:rounds_before]):
        calls = [
            {
                "id": f"call_{i}_{j}",
                "type": "function",
                "function": {"name": f"devops__{op}", "arguments": json.dumps(args)},
            }
            for j, (op, args) in enumerate(spec["calls"])
        ]
        messages.append({"role": "assistant", "content": spec["thought"], "tool_calls": calls})
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "content": json.dumps(r)}
            for c, r in zip(calls, spec["results"], strict=True)
        ]
    return messages


def run() -> dict[str, Any]:
    import litellm  # heavy: only the benchmark pays it

    module = _toolkit_module()
    registry = ToolkitRegistry([module.DevOps(), SystemToolkit()])
    stubs = render_stubs(registry)
    tools = openai_tools(registry)
    played = asyncio.run(_play(module.DevOps()))

    count = litellm.token_counter
    config = PromptConfig(instructions={"system": ROLE, "developer": DEVELOPER})
    same_sections = tuple(s for s in config.sections if s not in ("toolkits", "output_format"))
    fc_same_system = SegmentBuilder(config.model_copy(update={"sections": same_sections})).builder("thought").system
    fc_minimal_system = f"{ROLE}\n\n{DEVELOPER}"

    figures: dict[str, Any] = {
        "toolkit_operations": len(tools),
        "tokens_stubs": count(model="gpt-4o", text=stubs),
        "tokens_tools_as_priced": count(model="gpt-4o", messages=[{"role": "user", "content": ""}], tools=tools)
        - count(model="gpt-4o", messages=[{"role": "user", "content": ""}]),
    }
    for label, before in (("round_1", 0), ("round_10", 9)):
        codeact = count(model="gpt-4o", messages=_codeact_messages(stubs, played, before))
        fc_same = count(model="gpt-4o", messages=_fc_messages(fc_same_system, played, before), tools=tools)
        fc_min = count(model="gpt-4o", messages=_fc_messages(fc_minimal_system, played, before), tools=tools)
        figures[label] = {
            "codeact_fim_chat": codeact,
            "fc_same_sections": fc_same,
            "fc_minimal": fc_min,
            "ratio_codeact_to_fc_same_sections": round(codeact / fc_same, 3),
            "ratio_codeact_to_fc_minimal": round(codeact / fc_min, 3),
        }
    figures["goal_ratio"] = 0.7
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
