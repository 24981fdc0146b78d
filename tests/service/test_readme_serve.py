"""The README's "Serve it" example runs as written: `codeact serve` started as shown, the shown curl's output.

The commands come from the README's block (only the port differs: a free one instead of 8765); the
output must match the README's text block, where a ``...`` line stands for events left out, and
run ids (fresh for each POST), timestamps and token counts (which follow the prompt templates) may
differ. The curl runs twice, as a reader may: the second is a new run of the same conversation.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.service.helpers import start_server, stop_server

REPO = Path(__file__).resolve().parents[2]
_VARYING = re.compile(r'"(timestamp|at|prompt_tokens|completion_tokens|total_tokens)":[\d.]+')
_RUN_ID = re.compile(r"\brun-[0-9a-f]{32}\b")


def _normal(text: str) -> str:
    return _RUN_ID.sub("run-ID", _VARYING.sub(r'"\1":N', text)).rstrip()


def _section() -> tuple[list[str], str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Serve it", 1)[1].split("\n## ", 1)[0]
    bash = re.search(r"```bash\n(.*?)```", section, re.S)
    shown = re.search(r"```text\n(.*?)```", section, re.S)
    assert bash is not None and shown is not None, "the README's Serve it section lost its example"
    commands = []
    for line in bash.group(1).replace("\\\n", " ").splitlines():
        command = re.split(r"\s{2,}#", line, maxsplit=1)[0].strip()
        if command:
            commands.append(command)
    return commands, shown.group(1)


def test_the_readme_serve_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is missing: apt-get install curl")
    export, serve, curl = _section()[0]
    name, _, token = export.removeprefix("export ").partition("=")
    assert name == "CODEACT_API_TOKENS"
    argv = shlex.split(serve.removesuffix("&").strip())
    assert argv[:2] == ["codeact", "serve"] and "--port" in argv
    port = argv.index("--port")
    del argv[port : port + 2]
    served = start_server(tmp_path, [], *argv[2:], tokens=token, cwd=REPO)
    try:
        command = shlex.split(curl.replace("http://127.0.0.1:8765", served.url))
        out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
        again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    finally:
        assert stop_server(served) == 0, served.stderr.read_text()
    assert out.returncode == 0, out.stderr
    assert again.returncode == 0, again.stderr
    assert "event: run.completed" in again.stdout and "event: run.failed" not in again.stdout, again.stdout
    first, second = (set(_RUN_ID.findall(o.stdout)) for o in (out, again))
    assert len(first) == 1 and len(second) == 1 and first != second
    shown = _section()[1]
    actual, expected = _normal(out.stdout), _normal(shown)
    position = 0
    parts = expected.split("...\n")
    for part in parts:
        found = actual.find(part, position)
        assert found >= 0, f"the README shows:\n{part}\nbut the server sent:\n{out.stdout}"
        position = found + len(part)
    assert actual.startswith(parts[0]) and actual.endswith(parts[-1])
