"""A value the codec cannot keep is restored as its repr string, with a note the model reads (issue 27 item 10).

Through ``codeact run`` against the local OpenAI-compatible server: round 1 makes an object of a
class without a codec form, round 2 reads it back as text; the Evaluation the model got says so. A
resume in a new process (a new sandbox, variables from the store) finds the same string.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: reprs
model: {provider: openai-compatible, model: openai/test-model}
workflow: {maxTurns: 4, codeact: {thought: 'off'}}
"""
ROUND_1 = """I'll keep the connection settings in an object.
```python
class Conn:
    def __init__(self, host, port):
        self.host, self.port = host, port
    def __repr__(self):
        return f"Conn(host={self.host!r}, port={self.port})"
conn = Conn("db.local", 5432)
print(conn)
```"""
ROUND_2 = """Now I use it.
```python
print(type(conn).__name__, conn)
system.finish(conn)
```"""
NOTE = "a resumed session has its repr() as a str instead"


def test_an_object_without_a_codec_form_comes_back_as_its_repr(tmp_path: Path, openai_server: OpenAIServer) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(BLUEPRINT)
    store = f"sqlite:///{tmp_path / 's.db'}"
    openai_server.push(ROUND_1, ROUND_2)
    rc, out, err = cli(
        "run", str(path), "--input", "connect", "--store", store, "--session", "S",
        "--base-url", openai_server.base_url, "--isolation", "process",
    )  # fmt: skip
    assert rc == 0, err
    assert out == "Conn(host='db.local', port=5432)\n"
    # Within the run the warm sandbox keeps the object itself (round 2 prints its type, Conn); the store
    # keeps its repr, and an object system.finish() cannot send is answered as its repr too.
    assert "Conn Conn(host='db.local', port=5432)" in err
    assert "! variable conn (Conn) is kept in this run's sandbox only, not saved: an instance of Conn" in err
    assert NOTE in err
    posts = [r for r in openai_server.requests if r.method == "POST"]
    round_2 = json.dumps(posts[1].body["messages"])
    assert NOTE in round_2  # the model was told, in round 2's prompt
    # A resume in this new process restores it from the store (a fresh sandbox): still the string.
    openai_server.push("```python\nsystem.finish(type(conn).__name__ + ' ' + conn)\n```")
    rc, out, err = cli(
        "run", str(path), "--input", "again", "--store", store, "--session", "S",
        "--base-url", openai_server.base_url, "--isolation", "process",
    )  # fmt: skip
    assert rc == 0, err
    assert out == "str Conn(host='db.local', port=5432)\n"
