"""A run's input files and images through the Python API (``codeact.Agent``): issue 28, item 2.

A message with a CSV file part and an image part: the code opens the CSV by name in the sandbox's
working directory and the answer holds a value computed from it; a vision model (``model.options.vision:
true``) gets the image as an image part of the user message, a text-only model does not. Bad parts get
a clear error before anything runs. Real subprocess sandbox, SQLite store, the local OpenAI-compatible server.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from codeact.engine import CodeactError
from codeact.engine.replay import replay_session
from tests.engine.openai_server import OpenAIServer
from tests.engine.test_agent_api import BLUEPRINT, make_agent, model_env  # noqa: F401 - the autouse fixture

CSV = "region,amount\nnorth,120\nsouth,80\neast,45\n"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
READ_CSV = (
    "I'll add up the amounts in the attached file.\n"
    "```python\n"
    "import csv\n"
    "with open('sales.csv', newline='') as f:\n"
    "    rows = list(csv.DictReader(f))\n"
    "total = sum(int(r['amount']) for r in rows)\n"
    "with open('image-1.png', 'rb') as f:\n"
    "    png_bytes = len(f.read())\n"
    "system.finish(f'The total is {total} over {len(rows)} regions (image: {png_bytes} bytes).')\n"
    "```\n"
)


def message(text: str = "What is the total amount in the attached sales file?") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "file", "file": {"filename": "sales.csv", "file_data": base64.b64encode(CSV.encode()).decode()}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}},
        ],
    }


def image_parts(server: OpenAIServer) -> list[dict[str, Any]]:
    body = server.requests[-1].body
    user = [m for m in body["messages"] if m["role"] == "user"][-1]
    content = user["content"]
    return [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


@pytest.mark.parametrize("vision", [True, False], ids=["vision", "text-only"])
async def test_the_code_reads_the_file_and_a_vision_model_sees_the_image(
    tmp_path: Path, openai_server: OpenAIServer, vision: bool
) -> None:
    text = BLUEPRINT.replace(
        "id: api-agent\n", f"id: api-agent\nmodel:\n  options:\n    vision: {str(vision).lower()}\n"
    )
    openai_server.push(READ_CSV)
    async with make_agent(tmp_path, openai_server, text) as agent:
        result = await agent.invoke(message())
        (first,) = await agent.store.rounds(result.session_id)
        report = await replay_session(agent.store, result.session_id)  # the files are placed again
    assert result.status == "completed", result
    assert report.ok, report.to_json()
    recorded = {a["name"]: a for a in first.artifacts}
    assert recorded["inputs/sales.csv"]["input"] is True and recorded["inputs/sales.csv"]["size"] == len(CSV)
    assert base64.b64decode(recorded["inputs/image-1.png"]["data_b64"]) == PNG
    assert result.answer == f"The total is 245 over 3 regions (image: {len(PNG)} bytes)."
    parts = image_parts(openai_server)
    if vision:
        assert parts == [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
        ]
    else:
        assert parts == []
        assert "vision" not in openai_server.requests[-1].body  # an engine option, never sent
    prompt = "\n".join(
        p["text"] if isinstance(p, dict) else str(p)
        for m in openai_server.requests[-1].body["messages"]
        for p in (m["content"] if isinstance(m["content"], list) else [m["content"]])
        if not isinstance(p, dict) or p.get("type") == "text"
    )
    assert (
        f"- sales.csv (text/csv, {len(CSV)} bytes)" in prompt
        and f"- image-1.png (image/png, {len(PNG)} bytes, image)" in prompt
    )
    assert "iVBOR" not in str(openai_server.requests[-1].body) or vision  # a text-only model gets no image bytes


@pytest.mark.parametrize(
    ("part", "code", "text"),
    [
        pytest.param(
            {"type": "file", "file": {"filename": "../../etc/passwd", "file_data": "eA=="}},
            "input.file_name",
            "message 0, part 1: file name '../../etc/passwd' is refused: it has a folder in it",
            id="traversal",
        ),
        pytest.param(
            {"type": "file", "file": {"filename": "/tmp/x.csv", "file_data": "eA=="}},
            "input.file_name",
            "file name '/tmp/x.csv' is refused",
            id="absolute",
        ),
        pytest.param(
            {"type": "file", "file": {"filename": "big.csv", "file_data": base64.b64encode(b"x" * 3000).decode()}},
            "input.too_large",
            "message 0, part 1: file 'big.csv' is 3000 bytes, over the limit of 2048 bytes; send a smaller file, "
            "or raise the limit with the environment variable CODEACT_INPUT_FILE_BYTES",
            id="oversized",
        ),
        pytest.param(
            {"type": "file", "file": {"filename": "a.csv", "file_data": "not base64!"}},
            "input.invalid",
            "message 0, part 1: file 'a.csv': the content is not valid base64",
            id="not-base64",
        ),
    ],
)
async def test_a_bad_part_is_refused_before_anything_runs(
    tmp_path: Path,
    openai_server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
    part: dict[str, Any],
    code: str,
    text: str,
) -> None:
    monkeypatch.setenv("CODEACT_INPUT_FILE_BYTES", "2048")
    async with make_agent(tmp_path, openai_server) as agent:
        with pytest.raises(CodeactError) as caught:
            await agent.invoke({"role": "user", "content": [{"type": "text", "text": "Sum it."}, part]})
    assert caught.value.code == code
    assert text in caught.value.message
    assert openai_server.requests == []


def test_the_documented_example_runs(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/python-api.md's "Images and files" example, as written, with an agent and the two files."""
    import contextlib
    import io
    import re

    docs = (Path(__file__).resolve().parents[2] / "docs" / "python-api.md").read_text()
    (block,) = [m for m in re.findall(r"^```python notest\n(.*?)^```", docs, re.M | re.S) if "import base64" in m]
    (tmp_path / "sales.csv").write_text(CSV)
    (tmp_path / "chart.png").write_bytes(PNG)
    monkeypatch.chdir(tmp_path)
    openai_server.push(READ_CSV)
    agent = make_agent(tmp_path, openai_server)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(block, "python-api.md", "exec"), {"agent": agent})  # noqa: S102 - the docs' example
    finally:
        agent.close()
    assert out.getvalue() == "The total is 245 over 3 regions (image: 70 bytes).\n"
