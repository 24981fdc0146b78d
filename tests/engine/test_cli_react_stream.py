"""``workflow.mode: react`` streams like CodeAct: ``codeact run --json`` against the local OpenAI-compatible server.

The server streams tool calls as OpenAI does (a first fragment with index, id and name, then the
arguments a few characters at a time). The streamed run (``--json``) must reach the same tool calls,
answer and record as the unstreamed one (plain ``codeact run``), with its text as ``message.delta``
events; a stream cut off mid tool call, or a reply cut at the token limit, must never run half a call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer, Reply, ToolCallReply

pytestmark = pytest.mark.usefixtures("cli_home")

REPO = Path(__file__).resolve().parents[2]
DEVOPS = f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"
REACT = """\
version: codeact.agent/v1
id: react-stream
instructions:
  system: You are a DevOps assistant. Use the tools, then answer in one sentence.
toolkits:
  - ref: system
  - ref: devops
workflow:
  mode: react
  maxTurns: 4
"""
USAGE = {
    "prompt_tokens": 180,
    "completion_tokens": 41,
    "total_tokens": 221,
    "prompt_tokens_details": {"cached_tokens": 128},
}
LOOKUP = Reply(
    text="I'll look up the project and its apps first.",
    tool_calls=(
        ToolCallReply(id="call_a1", name="devops__get_project_info", arguments={"project_id": "P-123"}),
        ToolCallReply(id="call_a2", name="devops__get_app_list", arguments={"project_id": "P-123"}),
    ),
    usage=USAGE,
    tool_chunk=4,
)
ANSWER = "Project Checkout (P-123) is owned by lin.wei and has 2 apps: checkout-api and checkout-web."


def run(
    tmp_path: Path, server: OpenAIServer, session: str, *flags: str, task: str = "Who owns P-123?"
) -> tuple[int, str, str]:
    path = tmp_path / "react.yaml"
    path.write_text(REACT)
    return cli(
        "run", str(path), "--input", task, "--session", session, "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--toolkit", DEVOPS, "--model", "openai/test-model", "--base-url", server.base_url, *flags,
    )  # fmt: skip


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def rounds(tmp_path: Path, session: str) -> list[dict[str, Any]]:
    rc, out, err = cli("sessions", "show", session, "--store", f"sqlite:///{tmp_path / 's.db'}", "--json")
    assert rc == 0, err
    found: list[dict[str, Any]] = json.loads(out)["rounds"]
    return found


def posts(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests if r.method == "POST"]


def test_react_streams_its_text_and_assembles_the_tool_calls_the_unstreamed_run_gets(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(LOOKUP, ANSWER)
    rc, out, err = run(tmp_path, openai_server, "streamed", "--json")
    assert rc == 0, err
    streamed = events(out)
    streamed_bodies = posts(openai_server)

    openai_server.requests.clear()
    openai_server.push(LOOKUP, ANSWER)
    rc, plain_out, err = run(tmp_path, openai_server, "whole")
    assert rc == 0, err
    whole_bodies = posts(openai_server)

    # the streamed run asked for a stream (with usage), the plain one did not
    assert [b.get("stream") for b in streamed_bodies] == [True, True]
    assert all(b["stream_options"] == {"include_usage": True} for b in streamed_bodies)
    assert [b.get("stream") for b in whole_bodies] == [None, None]

    # the text of both turns arrived as deltas, joined exactly into the completed messages
    completed = [e for e in streamed if e["type"] == "message.completed" and e["purpose"] == "code"]
    assert [e["text"] for e in completed] == [LOOKUP.text, ANSWER]
    # the text beside the tool calls is said to the user too (whole, as codeact's system.send_message)
    said = [e["text"] for e in streamed if e["type"] == "message.completed" and e["purpose"] == "express"]
    assert said == [LOOKUP.text]
    for done in completed:
        pieces = [e["text"] for e in streamed if e["type"] == "message.delta" and e["round"] == done["round"]]
        assert len(pieces) > 3
        assert "".join(pieces) == done["text"]
    first_delta = next(i for i, e in enumerate(streamed) if e["type"] == "message.delta")
    first_call = next(i for i, e in enumerate(streamed) if e["type"] == "tool.call.started")
    assert first_delta < first_call

    # the tool calls assembled from 4-character fragments ran with the right arguments
    started = [(e["toolkit"], e["operation"], e["arguments"]) for e in streamed if e["type"] == "tool.call.started"]
    assert started == [
        ("devops", "get_project_info", {"project_id": "P-123"}),
        ("devops", "get_app_list", {"project_id": "P-123"}),
    ]
    last = streamed[-1]
    assert (last["type"], last["reason"], last["answer"]) == ("run.completed", "answered", ANSWER)
    assert plain_out == ANSWER + "\n"

    # what the model saw next is the same, byte for byte: the assistant's tool calls and the results
    assert streamed_bodies[1]["messages"] == whole_bodies[1]["messages"]
    echoed = streamed_bodies[1]["messages"][2]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in echoed["tool_calls"]] == [
        ("call_a1", "devops__get_project_info", '{"project_id": "P-123"}'),
        ("call_a2", "devops__get_app_list", '{"project_id": "P-123"}'),
    ]

    # the records agree: calls, replies, and the usage the stream's last chunk reported (cached tokens too)
    def essence(record: dict[str, Any]) -> dict[str, Any]:
        calls = [{k: c[k] for k in ("toolkit", "operation", "arguments", "result", "error")} for c in record["calls"]]
        return {**{k: record[k] for k in ("index", "status", "reply", "parse_error")}, "calls": calls}

    streamed_rounds, whole_rounds = rounds(tmp_path, "streamed"), rounds(tmp_path, "whole")
    assert [essence(r) for r in streamed_rounds] == [essence(r) for r in whole_rounds]
    assert [[c["arguments"] for c in r["calls"]] for r in streamed_rounds] == [[{"project_id": "P-123"}] * 2, []]
    for record in (streamed_rounds[0], whole_rounds[0]):
        usage = record["usage"]["code"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["cached_tokens"]) == (180, 41, 128)


def test_a_stream_cut_off_mid_tool_call_fails_the_run_clearly_and_runs_nothing(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    # role, 3 text pieces, the deploy call's first fragment and two argument pieces: then the connection drops
    deploy = ToolCallReply(
        id="call_d", name="devops__deploy_app", arguments={"app_id": "checkout-api", "version": "2.4.0"}
    )
    openai_server.push(Reply(text="Deploying it now.", tool_calls=(deploy,), tool_chunk=6, drop_after=7))
    rc, out, err = run(tmp_path, openai_server, "cut", "--json", task="Deploy 2.4.0 of checkout-api")

    assert rc == 1, err
    seen = events(out)
    assert "".join(e["text"] for e in seen if e["type"] == "message.delta") == "Deploying it now."
    assert not [e for e in seen if e["type"].startswith("tool.call")]
    last = seen[-1]
    assert last["type"] == "run.failed"
    assert last["error"]["code"] == "model.stream_cut"
    message = last["error"]["message"]
    assert message.startswith(
        f"model 'openai/test-model' at {openai_server.base_url}: the streamed reply broke off after 7 chunks "
        "(17 characters of text, tool call 'devops__deploy_app' with 12 characters of arguments received; "
        "nothing of it was used): "
    )
    assert message.endswith(
        "check the server (its logs, a proxy's timeouts) and run again: a session resumes where it stopped"
    )
    assert len(posts(openai_server)) == 1  # its text was streamed already: not asked again
    assert openai_server.pending == 0


def test_a_stream_cut_before_any_text_is_asked_again(tmp_path: Path, openai_server: OpenAIServer) -> None:
    call = ToolCallReply(id="call_p", name="devops__get_project_info", arguments={"project_id": "P-123"})
    openai_server.push(
        Reply(tool_calls=(call,), drop_after=3),  # role, the call's first fragment, one argument piece
        Reply(tool_calls=(call,)),
        "lin.wei owns it.",
    )
    rc, out, err = run(tmp_path, openai_server, "retry", "--json")

    assert rc == 0, err
    seen = events(out)
    assert [e["arguments"] for e in seen if e["type"] == "tool.call.started"] == [{"project_id": "P-123"}]
    assert seen[-1]["answer"] == "lin.wei owns it."
    assert len(posts(openai_server)) == 3


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        pytest.param(
            Reply(
                text="Deploying now.",
                tool_calls=(
                    ToolCallReply(id="c1", name="devops__deploy_app", arguments='{"app_id": "checkout-api", "vers'),
                ),
                finish_reason="length",
            ),
            "your reply was cut off at the token limit during its tool calls ('devops__deploy_app')",
            id="token-limit",
        ),
        pytest.param(
            Reply(
                text="Deploying now.",
                tool_calls=(ToolCallReply(id="c1", name="devops__deploy_app", arguments="{'app_id': 'checkout-api'}"),),
            ),
            "tool call 'devops__deploy_app' has arguments that are not a JSON object: \"{'app_id': 'checkout-api'}\"",
            id="not-json",
        ),
    ],
)
def test_a_tool_call_that_did_not_arrive_whole_is_a_parse_error_round(
    tmp_path: Path, openai_server: OpenAIServer, broken: Reply, said: str
) -> None:
    deploy = ToolCallReply(id="c2", name="devops__deploy_app", arguments={"app_id": "checkout-api", "version": "2.4.0"})
    openai_server.push(broken, Reply(tool_calls=(deploy,)), "Deployed checkout-api 2.4.0.")
    rc, out, err = run(tmp_path, openai_server, "broken", "--json", task="Deploy 2.4.0 of checkout-api")

    assert rc == 0, err
    seen = events(out)
    assert [e["arguments"] for e in seen if e["type"] == "tool.call.started"] == [
        {"app_id": "checkout-api", "version": "2.4.0"}
    ]  # the broken call never ran
    assert seen[-1]["answer"] == "Deployed checkout-api 2.4.0."
    assert "".join(e["text"] for e in seen if e["type"] == "message.delta" and e["round"] == 1) == "Deploying now."
    told = posts(openai_server)[1]["messages"][-2:]
    assert told == [
        {"role": "assistant", "content": "Deploying now."},
        {
            "role": "user",
            "content": f"{said}. Nothing of that reply ran: "
            "send the tool calls again, each with its complete JSON arguments.",
        },
    ]
    first, second, third = rounds(tmp_path, "broken")
    assert (first["status"], first["parse_error"], first["calls"]) == ("parse_error", said, [])
    assert (second["status"], len(second["calls"]), third["status"]) == ("ok", 1, "ok")
