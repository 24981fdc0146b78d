"""Prompt building speed and prompt size: FIM-chat vs FIM-completion vs OpenAI function calling.

* build time of a code prompt over a 50-round history (target <= 2 ms), also as a ratio to the
  plain join of the same segments (baseline measured in the same run);
* tokens per prompt for the same toolkits and the same 3-round task written three ways: the FIM
  chat prompt, the raw FIM completion text, and an OpenAI function-calling request (JSON-schema
  tools built here from the same toolkit description; rounds as tool calls and tool results).
  Counted with litellm's counter (cl100k for gpt-4o) when it loads, and with the fallback counter.
"""

from __future__ import annotations

import json
import time
from typing import Any

from codeact.segments import ApproxTokenCounter, PromptConfig, SegmentBuilder, SegmentHistory, format_evaluation

TARGET_MS = 2.0

# One toolkit description, rendered both as Python stubs (FIM) and as JSON-schema tools (function calling).
TOOLKITS: dict[str, dict[str, Any]] = {
    "example_toolkit": {
        "description": "DevOps project operations.",
        "operations": {
            "get_project_info": ("Get a project's basic information.", {"project_id": "str"}),
            "search_requirements": ("Search the requirements of a project.", {"project_id": "str", "query": "str"}),
            "create_requirement": (
                "Create a requirement.",
                {"project_id": "str", "title": "str", "description": "str"},
            ),
        },
    },
    "normandy_toolkit": {
        "description": "Application deployment.",
        "operations": {
            "get_app_list": ("List the applications of a project.", {"project_id": "str"}),
            "deploy_app": ("Deploy an application version.", {"app_id": "str", "version": "str"}),
            "get_deploy_status": ("Get a deployment's status.", {"deploy_id": "str"}),
        },
    },
}

TASK = 'Find the requirements of project 123 about "login" and deploy app 42 version 1.2.'
ROUNDS: list[dict[str, Any]] = [
    {
        "thought": "Search the login requirements of project 123 first.",
        "calls": [("example_toolkit", "search_requirements", {"project_id": "123", "query": "login"})],
        "code": 'reqs = await example_toolkit.search_requirements(project_id="123", query="login")\n'
        "print([r['name'] for r in reqs])",
        "result": '[{"id": 7, "name": "Login page"}, {"id": 8, "name": "SSO login"}, {"id": 9, "name": "Login audit"}]',
        "output": "['Login page', 'SSO login', 'Login audit']",
    },
    {
        "thought": "Now deploy app 42 version 1.2.",
        "calls": [("normandy_toolkit", "deploy_app", {"app_id": "42", "version": "1.2"})],
        "code": 'dep = await normandy_toolkit.deploy_app(app_id="42", version="1.2")\nprint(dep["deploy_id"])',
        "result": '{"deploy_id": "d-981", "status": "running"}',
        "output": "d-981",
    },
    {
        "thought": "Check the deployment status.",
        "calls": [("normandy_toolkit", "get_deploy_status", {"deploy_id": "d-981"})],
        "code": 'status = await normandy_toolkit.get_deploy_status(deploy_id=dep["deploy_id"])\nprint(status)',
        "result": '{"status": "succeeded"}',
        "output": "{'status': 'succeeded'}",
    },
]


def _stubs() -> str:
    classes = []
    for name, toolkit in TOOLKITS.items():
        lines = [f"class {name}:", f'    """{toolkit["description"]}"""']
        for op, (doc, params) in toolkit["operations"].items():
            signature = ", ".join(f"{p}: {t}" for p, t in params.items())
            lines += ["", f"    async def {op}(self, {signature}) -> dict:", f'        """{doc}"""']
        classes.append("\n".join(lines))
    return "\n\n\n".join(classes)


def _tools() -> list[dict[str, Any]]:
    tools = []
    for name, toolkit in TOOLKITS.items():
        for op, (doc, params) in toolkit["operations"].items():
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": f"{name}__{op}",
                        "description": f"{toolkit['description']} {doc}",
                        "parameters": {
                            "type": "object",
                            "properties": {p: {"type": "string", "description": p.replace("_", " ")} for p in params},
                            "required": list(params),
                        },
                    },
                }
            )
    return tools


def _history(rounds: int) -> tuple[SegmentHistory, dict[str, tuple[str, str]]]:
    history = SegmentHistory()
    history.add("User", TASK)
    history.add("Context", "The user is on https://example.com/project/123.")
    for i in range(rounds):
        spec = ROUNDS[i % len(ROUNDS)]
        history.add_round(
            thought=spec["thought"],
            code=spec["code"],
            evaluation=format_evaluation(stdout=spec["output"]),
            next_goal="continue",
        )
    variables = {"reqs": ("list", "[{'id': 7, 'name': 'Login page'}, ...] (3 items)"), "dep": ("dict", "{...}")}
    return history, variables


def _function_calling_messages(system: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": TASK}]
    for i, spec in enumerate(ROUNDS):
        calls = [
            {
                "id": f"call_{i}_{j}",
                "type": "function",
                "function": {"name": f"{tk}__{op}", "arguments": json.dumps(args)},
            }
            for j, (tk, op, args) in enumerate(spec["calls"])
        ]
        messages.append({"role": "assistant", "content": spec["thought"], "tool_calls": calls})
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": spec["result"]} for c in calls]
    return messages


def _time_ms(fn: Any, iterations: int) -> float:
    fn()  # warm
    started = time.perf_counter()
    for _ in range(iterations):
        fn()
    return (time.perf_counter() - started) * 1000 / iterations


def _litellm_counter() -> Any:
    try:
        import litellm  # heavy: only the benchmark pays it

        return litellm.token_counter
    except Exception:  # litellm missing or broken: the fallback counter still reports
        return None


def run() -> dict[str, Any]:
    stubs = _stubs()
    builder = SegmentBuilder(PromptConfig(), stubs=stubs)
    history, variables = _history(50)
    builder.build("code", history, variables=variables)  # static part rendered once per builder

    build_ms = _time_ms(lambda: builder.build("code", history, variables=variables), 300)
    baseline_ms = _time_ms(lambda: "\n".join(s.render() for s in history), 300)
    figures: dict[str, Any] = {
        "build_ms_50_rounds": round(build_ms, 4),
        "target_ms": TARGET_MS,
        "build_ratio_to_target": round(build_ms / TARGET_MS, 3),
        "baseline_join_ms": round(baseline_ms, 4),
        "build_ratio_to_baseline_join": round(build_ms / baseline_ms, 2),
    }

    small, small_vars = _history(3)
    chat = SegmentBuilder(PromptConfig(), stubs=stubs).build("code", small, variables=small_vars)
    completion = SegmentBuilder(PromptConfig(protocol="completion", model="qwen2.5-coder"), stubs=stubs).build(
        "code", small, variables=small_vars
    )
    # function calling gets the same system sections, minus the two that FIM replaces (tools go in `tools`)
    fc_sections = tuple(x for x in PromptConfig().sections if x not in ("toolkits", "output_format"))
    fc_system = SegmentBuilder(PromptConfig(sections=fc_sections)).builder("thought").system
    fc_messages = _function_calling_messages(fc_system)
    tools = _tools()
    history_fim = chat.user
    history_fc = fc_messages[1:]

    approx = ApproxTokenCounter()
    counts: dict[str, dict[str, int]] = {
        "fallback": {
            "fim_chat": approx.count(chat.system) + approx.count(chat.user),
            "fim_completion": approx.count(completion.text or ""),
            "function_calling": approx.count(json.dumps(fc_messages)) + approx.count(json.dumps(tools)),
            "toolkits_as_stubs": approx.count(stubs),
            "toolkits_as_json_schema": approx.count(json.dumps(tools)),
            "history_fim": approx.count(history_fim),
            "history_function_calling": approx.count(json.dumps(history_fc)),
        }
    }
    token_counter = _litellm_counter()
    if token_counter is not None:
        counts["litellm_gpt4o"] = {
            "fim_chat": token_counter(model="gpt-4o", messages=list(chat.messages)),
            "fim_completion": token_counter(model="gpt-4o", text=completion.text or ""),
            "function_calling": token_counter(model="gpt-4o", messages=fc_messages, tools=tools),
            "toolkits_as_stubs": token_counter(model="gpt-4o", text=stubs),
            "toolkits_as_json_schema": token_counter(model="gpt-4o", text=json.dumps(tools)),
            "history_fim": token_counter(model="gpt-4o", text=history_fim),
            "history_function_calling": token_counter(model="gpt-4o", messages=history_fc),
        }
    for name, c in counts.items():
        figures[f"tokens_{name}"] = c
        fc = c["function_calling"]
        figures[f"ratio_{name}_fim_chat_to_function_calling"] = round(c["fim_chat"] / fc, 3)
        figures[f"ratio_{name}_fim_completion_to_function_calling"] = round(c["fim_completion"] / fc, 3)
        figures[f"ratio_{name}_stubs_to_json_schema"] = round(c["toolkits_as_stubs"] / c["toolkits_as_json_schema"], 3)
        figures[f"ratio_{name}_history_fim_to_function_calling"] = round(
            c["history_fim"] / c["history_function_calling"], 3
        )
    if "litellm_gpt4o" in counts:
        exact, guess = counts["litellm_gpt4o"]["fim_chat"], counts["fallback"]["fim_chat"]
        figures["fallback_counter_ratio_to_litellm"] = round(guess / exact, 3)
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
