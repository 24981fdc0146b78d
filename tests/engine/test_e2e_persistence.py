"""Everything a round defines persists: next round, a resume in a new process, and a replay (issue 10).

Through the installed ``codeact`` script in subprocesses, with litellm's real HTTP path to the local
OpenAI-compatible server, on both protocols and both sandbox backends. The model writes its code the
way models write it: definitions in the frame's ``try:`` body (chat: a fenced block the frame
indents; completion: the raw middle, continuing after ``try:\\n    ``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.engine.openai_server import OpenAIServer

CODEACT = str(Path(sys.executable).parent / "codeact")

ROUND_1 = textwrap.dedent(
    '''\
    import statistics as st
    from dataclasses import dataclass, field

    def total_qty(items):
        """Sum the quantities."""
        return sum(i["qty"] for i in items)

    def fmt_qty(n, unit="pcs"):
        return f"{n} {unit}"

    class Inventory:
        unit = "pcs"

        def __init__(self, items):
            self.items = items

        def total(self):
            return total_qty(self.items)

    @dataclass
    class Order:
        id: str
        lines: list = field(default_factory=list)

    order = Order("O-1", [{"qty": 2}, {"qty": 5}])
    print("defined", order.id)
    '''
)
ROUND_2 = "print('lines:', len(order.lines))\n"
ROUND_3 = textwrap.dedent(
    """\
    inv = Inventory(order.lines)
    print(fmt_qty(inv.total()), st.mean([total_qty(order.lines), 1]), Inventory.unit)
    system.finish(fmt_qty(total_qty(order.lines)))
    """
)
ROUND_4 = textwrap.dedent(
    """\
    again = Inventory(order.lines).total()
    system.finish(fmt_qty(again, unit="u") + " " + str(isinstance(order, Order)) + " " + str(st.median([1, again])))
    """
)


def as_reply(code: str, protocol: str) -> str:
    """What a model sends: a fenced block (chat) or the raw middle after ``try:\\n    `` (completion)."""
    if protocol == "chat":
        return f"I will do this step.\n```python\n{code}```\n"
    first, _, rest = code.partition("\n")
    return first + "\n" + "".join(f"    {line}\n" if line.strip() else "\n" for line in rest.splitlines())


def blueprint(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: persist\n"
        "workflow: {maxTurns: 6, codeact: {thought: 'off'}}\n"
    )
    return path


def run_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CODEACT_HOME": str(tmp_path / "home"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-test",
        "COLUMNS": "100",
    }
    for name in ("CODEACT_MODEL", "CODEACT_STORE", "CODEACT_PROFILE"):
        env.pop(name, None)
    return subprocess.run(
        [CODEACT, *args], capture_output=True, text=True, env=env, check=False, timeout=240, cwd=tmp_path
    )


def json_events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def persist_then_resume_then_replay(tmp_path: Path, server: OpenAIServer, *, protocol: str, backend: str) -> None:
    store = f"sqlite:///{tmp_path / 'sessions.db'}"
    model = "openai/qwen2.5-coder" if protocol == "completion" else "openai/test-model"
    common = ["--store", store, "--session", "S", "--model", model, "--base-url", server.base_url]
    common += ["--protocol", protocol, "--sandbox", backend, "--json"]
    server.push(*(as_reply(code, protocol) for code in (ROUND_1, ROUND_2, ROUND_3)))

    first = run_cli("run", str(blueprint(tmp_path)), "--input", "total the order", *common, tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr
    stream = json_events(first.stdout)
    done = [e for e in stream if e["type"] == "code.completed"]
    assert [e["status"] for e in done] == ["ok", "ok", "ok"], done
    assert done[0]["stdout"] == "defined O-1\n"
    assert done[2]["stdout"] == "7 pcs 4 pcs\n"
    states = [e for e in stream if e["type"] == "state.updated"]
    assert [e["uncaptured"] for e in states][:2] == [[], []]
    # an instance of a plain class is not data: the model is told what to do instead
    assert [u["name"] for u in states[2]["uncaptured"]] == ["inv"]
    assert states[2]["uncaptured"][0]["reason"].startswith("an instance of Inventory, a class the code defined")
    assert {"total_qty", "fmt_qty", "Inventory", "Order", "order", "st"} <= set(states[0]["changed"])
    assert stream[-1]["type"] == "run.completed" and stream[-1]["answer"] == "7 pcs"
    paths = {r.path for r in server.requests if r.method == "POST"}
    assert paths == {"/v1/completions" if protocol == "completion" else "/v1/chat/completions"}

    server.push(as_reply(ROUND_4, protocol))  # a new process resumes the session
    second = run_cli("run", str(blueprint(tmp_path)), "--input", "once more, in u", *common, tmp_path=tmp_path)
    assert second.returncode == 0, second.stderr
    last = json_events(second.stdout)[-1]
    assert last["type"] == "run.completed" and last["answer"] == "7 u True 4.0", last
    # the resumed prompt carries round 3's evaluation: what was not kept, and what to do instead
    resumed_prompt = json.dumps(server.requests[-1].body)
    assert "Not kept for the next round:" in resumed_prompt
    assert "- inv: an instance of Inventory, a class the code defined" in resumed_prompt

    replay = run_cli("replay", "S", "--store", store, tmp_path=tmp_path)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert replay.stdout.splitlines()[-1] == "replayed 4 round(s) of S: 4 match, 0 mismatch", replay.stdout


@pytest.mark.parametrize("protocol", ["chat", "completion"])
def test_definitions_in_the_frame_persist_resume_and_replay_subprocess(
    tmp_path: Path, openai_server: OpenAIServer, protocol: str
) -> None:
    persist_then_resume_then_replay(tmp_path, openai_server, protocol=protocol, backend="subprocess")


@pytest.mark.integration
@pytest.mark.docker
@pytest.mark.parametrize("protocol", ["chat", "completion"])
def test_definitions_in_the_frame_persist_resume_and_replay_docker(
    tmp_path: Path, openai_server: OpenAIServer, protocol: str, docker_client: Any
) -> None:
    from codeact.sandbox.image import ensure_image

    ensure_image(docker_client)
    persist_then_resume_then_replay(tmp_path, openai_server, protocol=protocol, backend="docker")
