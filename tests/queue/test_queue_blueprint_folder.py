"""Queued runs carry the blueprint's folder (issue 27 item 7).

A real ``codeact worker`` started in another working directory builds agents whose blueprints name
files relative to themselves (a scripted reply file, an ``extend`` base, a sub-agent, a kimi agent's
``system_prompt_path`` and base): each resolves as it did for the submitter. Real Redis, real worker
process, the scripted model.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeact.engine.blueprint import MAX_BUNDLE_BYTES, pack_blueprint, unpack_blueprint
from codeact.engine.errors import BlueprintLoadError
from codeact.engine.queue import submit

CODEACT = str(Path(sys.executable).parent / "codeact")
QUEUE = "qfolder"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def code(source: str, prose: str = "I run this.") -> str:
    return f"{prose}\n```python\n{source}\n```"


@pytest.fixture(scope="module")
def queue_url(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/11"
    redis.Redis.from_url(url).flushdb()
    tmp = tmp_path_factory.mktemp("worker")
    elsewhere = tmp / "elsewhere"  # the worker's cwd: none of the blueprints' files are here
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    env["CODEACT_HOME"] = str(tmp / "home")
    argv = [CODEACT, "worker", "--queue", url, "--concurrency", "1", "--queues", QUEUE, "--name", "folder-worker"]
    with (tmp / "worker.log").open("wb") as log:
        worker = subprocess.Popen(
            argv, env=env, cwd=elsewhere, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 60
    while not client.smembers(f"_kombu.binding.{QUEUE}"):
        assert worker.poll() is None, (tmp / "worker.log").read_text()
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    try:
        yield url
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def test_relative_files_resolve_on_a_worker_in_another_directory(queue_url: str, tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(
        project / "base.yaml",
        """
        version: codeact.agent/v1
        extend: codeact-base
        id: base
        instructions: {system: "You keep the ledger of the {{ team }} team.", variables: {team: blue}}
        """,
    )
    write(
        project / "agents" / "helper.yaml",
        """
        version: codeact.agent/v1
        extend: codeact-base
        id: helper
        model: {provider: scripted, model: scripted/unused.yaml}
        workflow: {maxTurns: 3, codeact: {thought: 'off'}}
        """,
    )
    write(project / "agents" / "unused.yaml", "[]\n")
    write(
        project / "replies.yaml",
        json.dumps(
            [
                code("helped = await agents.helper(task='count to 3')\nprint(helped)", "I ask the helper."),
                code("system.finish('1 2 3')", "Counting."),
                code("system.finish(f'helper said {helped}')", "Done."),
            ]
        ),
    )
    path = write(
        project / "agent.yaml",
        """
        version: codeact.agent/v1
        extend: ./base.yaml
        id: folder-agent
        model: {provider: scripted, model: scripted/replies.yaml}
        subagents:
          helper: {path: ./agents/helper.yaml, description: Counts.}
        workflow: {maxTurns: 4, codeact: {thought: 'off'}}
        """,
    )
    handle = submit(path, "count", queue=queue_url, queue_name=QUEUE, store=queue_url)
    result = handle.result(timeout=120)
    assert result.status == "completed", result
    assert result.answer == "helper said 1 2 3"


def test_a_kimi_agent_and_a_model_given_on_submit(queue_url: str, tmp_path: Path) -> None:
    team = tmp_path / "team"
    write(team / "prompts" / "base.md", "You are ${ROLE}.\n")
    write(
        team / "base.yaml",
        """
        version: 1
        agent:
          name: base
          system_prompt_path: ./prompts/base.md
          system_prompt_args: {ROLE: a careful assistant}
          tools: ["kimi_cli.tools.think:Think"]
        """,
    )
    path = write(team / "agent.yaml", 'version: 1\nagent: {extend: ./base.yaml, name: "lead"}\n')
    write(team / "script.yaml", json.dumps(["I know it.", code("system.finish('kimi ok')")]))
    # --model scripted/script.yaml names a file next to the blueprint, as `codeact run` resolves it.
    handle = submit(path, "hello", queue=queue_url, queue_name=QUEUE, store=queue_url, model="scripted/script.yaml")
    result = handle.result(timeout=120)
    assert result.status == "completed", result
    assert result.answer == "kimi ok"


def test_a_base_edited_between_two_submits_reaches_the_worker(queue_url: str, tmp_path: Path) -> None:
    # submit() packs the blueprint on every call (its parsed YAML is remembered by text): the second
    # run is built from the edited base, not from what the first submit packed or the worker cached.
    write(tmp_path / "first.yaml", json.dumps([code("system.finish('first base')")]))
    write(tmp_path / "second.yaml", json.dumps([code("system.finish('second base')")]))
    base = tmp_path / "base.yaml"
    template = (
        "version: codeact.agent/v1\nextend: codeact-base\nid: base\n"
        "model: {{provider: scripted, model: scripted/{replies}}}\n"
    )
    write(base, template.format(replies="first.yaml"))
    path = write(
        tmp_path / "agent.yaml",
        "version: codeact.agent/v1\nextend: ./base.yaml\nid: edited\n"
        "workflow: {maxTurns: 2, codeact: {thought: 'off'}}\n",
    )
    answers = []
    for replies in ("first.yaml", "second.yaml"):
        write(base, template.format(replies=replies))
        result = submit(path, "which base?", queue=queue_url, queue_name=QUEUE, store=queue_url).result(timeout=120)
        assert result.status == "completed", result
        answers.append(result.answer)
    assert answers == ["first base", "second base"]


def test_the_pack_holds_the_referenced_files_only_and_unpacks_inside(tmp_path: Path) -> None:
    write(tmp_path / "shared" / "base.yaml", "version: codeact.agent/v1\nid: base\nextend: codeact-base\n")
    write(tmp_path / "shared" / "notes.txt", "not referenced\n")
    path = write(
        tmp_path / "app" / "agent.yaml",
        "version: codeact.agent/v1\nextend: ../shared/base.yaml\nid: a\nmodel: {provider: openai, model: m}\n",
    )
    pack = pack_blueprint(path)
    assert pack["root"] == "app/agent.yaml"
    assert sorted(pack["files"]) == ["app/agent.yaml", "shared/base.yaml"]  # codeact-base ships with codeact
    unpacked = unpack_blueprint(pack, tmp_path / "out")
    assert unpacked == tmp_path / "out" / "app" / "agent.yaml"
    assert (tmp_path / "out" / "shared" / "base.yaml").read_text() == (tmp_path / "shared" / "base.yaml").read_text()
    with pytest.raises(BlueprintLoadError) as caught:
        unpack_blueprint({"root": "a.yaml", "files": {"a.yaml": "", "../evil": "x"}}, tmp_path / "out2")
    assert caught.value.code == "blueprint.bundle.invalid"
    assert not (tmp_path / "evil").exists()


def test_a_file_too_big_to_carry_is_refused_by_name(tmp_path: Path, redis_url: str) -> None:
    big = write(tmp_path / "replies.yaml", "- " + "x" * MAX_BUNDLE_BYTES + "\n")
    path = write(
        tmp_path / "agent.yaml",
        "version: codeact.agent/v1\nextend: codeact-base\nid: big\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n",
    )
    with pytest.raises(BlueprintLoadError) as caught:
        submit(path, "hi", queue=redis_url, queue_name=QUEUE)
    assert caught.value.code == "blueprint.bundle.tooLarge"
    assert str(big) in caught.value.message
    assert f"{MAX_BUNDLE_BYTES} bytes" in caught.value.message
