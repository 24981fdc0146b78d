"""The loop through real litellm HTTP against a local OpenAI-compatible server: chat and raw FIM completion."""

from __future__ import annotations

from codeact.engine.model import ModelClient, ModelSettings
from tests.engine.openai_server import OpenAIServer, Reply

from .conftest import MakeAgent, code, of_type

HTTP = """\
version: codeact.agent/v1
extend: codeact-base
id: http-agent
model:
  provider: openai-compatible
  model: qwen2.5-coder
toolkits:
  - ref: system
  - ref: devops
workflow:
  maxTurns: 3
  codeact:
    thought: "off"
    protocol: {protocol}
    fim:
      family: qwen
"""


def _client(server: OpenAIServer, protocol: str) -> ModelClient:
    settings = ModelSettings(
        model="openai/qwen2.5-coder",
        api_base=server.base_url,
        protocol=protocol,  # type: ignore[arg-type]
        max_retries=0,
    )
    return ModelClient(settings, env={})


async def test_chat_protocol_over_http_with_streaming(make_agent: MakeAgent, openai_server: OpenAIServer) -> None:
    openai_server.push(
        Reply(text=code('project = devops.get_project_info("P-123")\nprint(project["owner"])')),
        Reply(text=code('system.finish(project["owner"])')),
    )
    client = _client(openai_server, "chat")
    built = make_agent(HTTP.replace("{protocol}", "chat"), model=client, stream=True)
    events = await built.run("Who owns P-123?")

    assert events[-1].type == "run.completed"
    assert events[-1].answer == "lin.wei"  # type: ignore[attr-defined]
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/chat/completions"] * 2
    assert all(r.body["stream"] is True for r in posts)
    assert posts[0].body["model"] == "qwen2.5-coder"
    second = "\n".join(str(m["content"]) for m in posts[1].body["messages"])
    assert "lin.wei" in second  # round 1's output reached the next prompt
    for done in of_type(events, "message.completed"):
        deltas = [e.text for e in of_type(events, "message.delta") if e.round == done.round]  # type: ignore[attr-defined]
        assert "".join(deltas) == done.text  # type: ignore[attr-defined]
        assert done.usage["completion_tokens"] > 0  # type: ignore[attr-defined]


async def test_completion_protocol_sends_the_raw_fim_prompt(make_agent: MakeAgent, openai_server: OpenAIServer) -> None:
    openai_server.push("owner = devops.get_project_info('P-123')['owner']\nsystem.finish(owner)")
    client = _client(openai_server, "completion")
    built = make_agent(HTTP.replace("{protocol}", "completion"), model=client)
    events = await built.run("Who owns P-123?")

    assert events[-1].type == "run.completed", events[-1]
    assert events[-1].answer == "lin.wei"  # type: ignore[attr-defined]
    posts = [r for r in openai_server.requests if r.method == "POST"]
    assert [r.path for r in posts] == ["/v1/completions"]
    prompt = posts[0].body["prompt"]
    assert isinstance(prompt, str)
    assert prompt.startswith("<|fim_prefix|>")
    assert prompt.endswith("<|fim_middle|>")
    assert prompt.count("<|fim_suffix|>") == 1
    assert "Who owns P-123?" in prompt
    assert "def get_project_info" in prompt  # the toolkit stubs are in the frame
    assert "messages" not in posts[0].body
    assert posts[0].body["stop"]
