"""On a terminal, ``codeact run`` shows how much the model has written while a slow model writes (issue 39).

A local model on a busy CPU writes a few tokens a second: a reply takes a minute, and the terminal showed
only "the model is thinking...". ``codeact run`` in a real pseudo-terminal against the local
OpenAI-compatible server, which streams its reply slowly: the spinner counts the characters as they come.
Off a terminal nothing changes (no spinner; the reply is not streamed).
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.engine.openai_server import OpenAIServer, Reply

BIN = Path(sys.executable).parent
AGENT = """\
version: codeact.agent/v1
extend: codeact-base
id: slow
model: {provider: openai-compatible, model: openai/test-model}
workflow: {maxTurns: 2, codeact: {thought: 'off'}}
"""
REPLY = (
    "```python\nwords = 'a slow local model writes this reply a few tokens at a time'.split()\n"
    "system.finish(len(words))\n```"
)


def test_the_spinner_counts_what_a_slow_model_has_written(tmp_path: Path, openai_server: OpenAIServer) -> None:
    (tmp_path / "agent.yaml").write_text(AGENT)
    pieces = tuple(REPLY[i : i + 6] for i in range(0, len(REPLY), 6))
    openai_server.push(Reply(text=REPLY, chunks=pieces, chunk_delay_s=0.1))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "CODEACT_HOME": str(tmp_path / "home"),
           "OPENAI_API_KEY": "sk-test"}  # fmt: skip
    env.pop("NO_COLOR", None)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(BIN / "codeact"), "run", str(tmp_path / "agent.yaml"), "--input", "Count the words.",
         "--store", f"sqlite:///{tmp_path / 's.db'}", "--base-url", openai_server.base_url, "--isolation", "process"],
        stdin=follower, stdout=follower, stderr=follower, env=env, cwd=tmp_path, close_fds=True,
    )  # fmt: skip
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(leader)
    assert process.wait(timeout=30) == 0, shown.decode(errors="replace")[-2000:]
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode(errors="replace"))
    counts = [int(n.replace(",", "")) for n in re.findall(r"the model is writing\.\.\. ([\d,]+) characters", text)]
    assert counts, text[-2000:]
    assert counts == sorted(counts) and counts[-1] > counts[0]  # it grows as the reply streams
    assert openai_server.requests[0].body.get("stream") is True
    assert re.search(r"(?m)^\s*13\s*$", text), text[-2000:]  # the answer, 13 words, on a line of its own
