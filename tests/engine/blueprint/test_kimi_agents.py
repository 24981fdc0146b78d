"""kimi-cli agent files (seed 004) load unchanged as codeact agents, with kimi-cli's rules.

Files are written the way the seed's examples are (sections 7.1, 7.2, 7.3); every fail-fast
error of section 8 (and the two gotchas codeact turns into errors) is checked through
``codeact validate``, and a kimi agent runs end to end against the local OpenAI-compatible server.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from codeact.engine.blueprint import load_path, validate_blueprint
from codeact.engine.blueprint.kimi import KIMI_TOOLS
from codeact.engine.cli import app
from codeact.engine.errors import BlueprintLoadError
from tests.engine.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[3]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def minimal(tmp_path: Path) -> Path:  # seed 7.1
    write(tmp_path / "system.md", "You are ${ROLE}. Now: ${KIMI_NOW}.\n")
    return write(
        tmp_path / "agent.yaml",
        """
        version: 1
        agent:
          name: "assistant"
          system_prompt_path: ./system.md
          system_prompt_args:
            ROLE: a helpful assistant
          tools:
            - "kimi_cli.tools.shell:Shell"
        """,
    )


def test_minimal_agent_loads_and_validates(tmp_path: Path) -> None:
    bp = load_path(minimal(tmp_path))
    assert (bp.version, bp.id, bp.name) == ("codeact.agent/v1", "assistant", "assistant")
    assert bp.instructions is not None and bp.instructions.system is not None
    assert bp.instructions.system == "You are ${ROLE}. Now: ${KIMI_NOW}."  # kimi's template, rendered at build
    assert bp.kimi_prompt is not None and dict(bp.kimi_prompt.args) == {"ROLE": "a helpful assistant"}
    assert [t.ref for t in bp.toolkits if t is not None] == ["system"]  # Shell is the model's own code
    assert bp.workflow is not None and bp.workflow.mode == "codeact"  # extends codeact-base
    assert validate_blueprint(bp).valid
    assert cli("validate", str(tmp_path / "agent.yaml")) == (
        0,
        f"Blueprint {tmp_path / 'agent.yaml'} is valid (0 errors, 0 warnings).\n",
        "",
    )


def test_extend_default_merges_args_and_overrides_the_rest(tmp_path: Path) -> None:  # seed 7.2
    path = write(
        tmp_path / "agent.yaml",
        """
        version: 1
        agent:
          extend: default
          name: "team_lead"
          system_prompt_args:
            ROLE_ADDITIONAL: "Focus on architecture trade-offs."
          exclude_tools:
            - "kimi_cli.tools.think:Think"
        """,
    )
    bp = load_path(path)
    assert bp.name == "team_lead"
    assert bp.instructions is not None and bp.kimi_prompt is not None
    assert dict(bp.kimi_prompt.args)["ROLE_ADDITIONAL"] == "Focus on architecture trade-offs."
    assert "${ROLE_ADDITIONAL}" in (bp.instructions.system or "")
    # default grants Think as system.think; excluded here, so system stays whole (from codeact-base)
    assert [(t.ref, t.operations) for t in bp.toolkits if t is not None] == [("system", None)]
    assert cli("validate", str(path))[0] == 0


def test_prompt_args_merge_key_by_key_and_tools_are_replaced(tmp_path: Path) -> None:
    write(tmp_path / "base" / "system.md", "${A} ${B}\n")
    write(
        tmp_path / "base" / "agent.yaml",
        """
        version: 1
        agent:
          name: base
          system_prompt_path: ./system.md
          system_prompt_args: {A: from-base, B: from-base}
          tools: [devops, "kimi_cli.tools.think:Think"]
        """,
    )
    child = write(
        tmp_path / "child.yaml",
        """
        version: 1
        agent:
          extend: ./base/agent.yaml
          system_prompt_args: {B: from-child}
          tools: [devops]
        """,
    )
    bp = load_path(child)
    assert bp.name == "base"  # inherited
    assert bp.kimi_prompt is not None
    assert dict(bp.kimi_prompt.args) == {"A": "from-base", "B": "from-child"}
    assert [t.ref for t in bp.toolkits if t is not None] == ["system", "devops"]  # Think is gone: replaced


def test_explicit_null_differs_from_inherit(tmp_path: Path) -> None:
    write(tmp_path / "base" / "system.md", "base\n")
    write(
        tmp_path / "base" / "helper.yaml",
        "version: 1\nagent: {name: helper, system_prompt_path: ./system.md, tools: []}\n",
    )
    write(
        tmp_path / "base" / "agent.yaml",
        """
        version: 1
        agent:
          name: base
          system_prompt_path: ./system.md
          tools: [devops]
          subagents:
            helper: {path: ./helper.yaml, description: Helps.}
        """,
    )
    inherits = write(tmp_path / "inherits.yaml", "version: 1\nagent: {extend: ./base/agent.yaml}\n")
    nulls = write(
        tmp_path / "nulls.yaml", "version: 1\nagent: {extend: ./base/agent.yaml, tools: null, subagents: null}\n"
    )
    bp = load_path(inherits)
    assert [t.ref for t in bp.toolkits if t is not None] == ["system", "devops"]
    # the inherited sub-agent path is relative to the base file that declared it, not to inherits.yaml
    assert bp.subagents["helper"] is not None and bp.subagents["helper"].path == str(tmp_path / "base" / "helper.yaml")
    assert bp.subagent_blueprints["helper"].name == "helper"
    bp = load_path(nulls)
    assert [t.ref for t in bp.toolkits if t is not None] == ["system"]
    assert bp.subagents == {}


def test_subagents_paths_are_relative_to_the_declaring_file(tmp_path: Path) -> None:  # seed 7.3
    write(tmp_path / "team" / "system.md", "Orchestrate.\n")
    write(tmp_path / "team" / "coder" / "system.md", "Code.\n")
    write(
        tmp_path / "team" / "coder" / "agent.yaml",
        'version: 1\nagent: {name: coder, system_prompt_path: ./system.md, tools: ["kimi_cli.tools.file:ReadFile"]}\n',
    )
    path = write(
        tmp_path / "team" / "agent.yaml",
        """
        version: 1
        agent:
          name: "orchestrator"
          system_prompt_path: ./system.md
          tools:
            - "kimi_cli.tools.multiagent:Task"
          subagents:
            coder:
              path: ./coder/agent.yaml
              description: "Good at implementation and refactoring."
        """,
    )
    code, out, err = cli("validate", str(path))
    assert (code, err) == (0, "")
    bp = load_path(path)
    entry = bp.subagents["coder"]
    assert entry is not None and entry.description == "Good at implementation and refactoring."
    assert bp.subagent_blueprints["coder"].instructions is not None
    assert bp.subagent_blueprints["coder"].instructions.system == "Code."  # stripped, as kimi-cli reads it


FAILURES = [
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {extend: ./missing.yaml}\n"},
        "blueprint.kimi.file",
        "extend './missing.yaml' is not a file",
        id="extend-file-missing",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {extend: ./dir}\n", "dir/x": ""},
        "blueprint.kimi.file",
        "extend './dir' is not a file",
        id="extend-not-a-file",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent:\n  name: [unclosed\n"},
        "blueprint.yaml.invalid",
        "Invalid Agent Blueprint YAML",
        id="yaml-syntax",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {extend: ./base.yaml}\n", "base.yaml": "# nothing here\n"},
        "blueprint.document.required",
        "document in base.yaml is empty",
        id="empty-base",
    ),
    pytest.param(
        {"agent.yaml": "version: 2\nagent: {name: a, system_prompt_path: ./s.md, tools: []}\n", "s.md": "x"},
        "blueprint.version.unsupported",
        "unsupported version 2; supported: 1",
        id="version",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {system_prompt_path: ./s.md, tools: []}\n", "s.md": "x"},
        "blueprint.kimi.required",
        "agent.name is required",
        id="missing-name",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {name: a, tools: []}\n"},
        "blueprint.kimi.required",
        "agent.system_prompt_path is required",
        id="missing-system-prompt-path",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {name: a, system_prompt_path: ./s.md}\n", "s.md": "x"},
        "blueprint.kimi.required",
        "agent.tools is required",
        id="missing-tools",
    ),
    pytest.param(
        {
            "agent.yaml": "version: 1\nagent: {extend: ./b.yaml, name: a}\n",
            "b.yaml": "version: 1\nagent: {extend: ./agent.yaml}\n",
        },
        "blueprint.kimi.extend.cycle",
        "extend cycle agent.yaml -> b.yaml -> agent.yaml",
        id="extend-cycle",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {name: a, system_prompt_path: ./gone.md, tools: []}\n"},
        "blueprint.kimi.file",
        "is not a file; a path is relative to the file that declares it",
        id="prompt-file-missing",
    ),
    pytest.param(
        {
            "agent.yaml": 'version: 1\nagent: {name: a, system_prompt_path: ./s.md, tools: ["my.tools:Thing"]}\n',
            "s.md": "x",
        },
        "blueprint.kimi.tool.unknown",
        "tool 'my.tools:Thing' has no codeact counterpart",
        id="unknown-tool",
    ),
    pytest.param(
        {"agent.yaml": "version: 1\nagent: {name: a, system_prompt_path: ./s.md, tools: []}\n", "s.md": "${WHO}"},
        "blueprint.kimi.prompt.arg",
        "uses ${WHO}, which has no value; add it to agent.system_prompt_args",
        id="prompt-arg-missing",
    ),
    pytest.param(
        {
            "agent.yaml": "version: 1\nagent: {name: a, system_prompt_path: ./s.md, tools: [], colour: red}\n",
            "s.md": "x",
        },
        "blueprint.kimi.field.invalid",
        "unknown field(s) agent.colour",
        id="unknown-field",
    ),
]


@pytest.mark.parametrize(("files", "code", "reason"), FAILURES)
def test_fail_fast_errors(tmp_path: Path, files: dict[str, str], code: str, reason: str) -> None:
    for name, text in files.items():
        write(tmp_path / name, text)
    with pytest.raises(BlueprintLoadError) as info:
        load_path(tmp_path / "agent.yaml")
    assert info.value.code == code
    assert reason in info.value.message
    exit_code, out, err = cli("validate", str(tmp_path / "agent.yaml"))
    assert exit_code == 2
    assert f"[{code}]" in err and reason in err


def test_missing_agent_file_through_the_cli(tmp_path: Path) -> None:
    code, _, err = cli("validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "blueprint.io" in err and "nope.yaml" in err


def test_the_tool_table_is_documented() -> None:
    doc = (REPO / "docs" / "kimi-agents.md").read_text()
    for tool in KIMI_TOOLS:
        assert f"`{tool}`" in doc, tool


def test_kimi_agent_runs_end_to_end(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("CODEACT_MODEL", raising=False)
    path = write(
        tmp_path / "agent.yaml",
        """
        version: 1
        agent:
          extend: default
          name: "team_lead"
          system_prompt_args:
            ROLE_ADDITIONAL: "Focus on architecture trade-offs."
        """,
    )
    openai_server.push("Thought: simple.", "Thought: I answer directly.\n```python\nsystem.finish(f'{6 * 7}')\n```")
    code, out, err = cli(
        "run",
        str(path),
        "--input",
        "answer?",
        "--model",
        "openai/test",
        "--base-url",
        openai_server.base_url,
        "--store",
        f"sqlite:///{tmp_path / 's.db'}",
        "--json",
    )
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "42"
    system_prompt = json.dumps(openai_server.requests[0].body)
    assert "Focus on architecture trade-offs." in system_prompt


def test_the_documented_example_validates(tmp_path: Path) -> None:
    doc = (REPO / "docs" / "kimi-agents.md").read_text()
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    write(tmp_path / "agent.yaml", example)
    write(tmp_path / "system.md", "You lead the team. ${ROLE_ADDITIONAL}\n")
    write(tmp_path / "coder" / "system.md", "You write code.\n")
    write(
        tmp_path / "coder" / "agent.yaml",
        'version: 1\nagent: {name: coder, system_prompt_path: ./system.md, tools: ["kimi_cli.tools.file:ReadFile"]}\n',
    )
    code, out, err = cli("validate", str(tmp_path / "agent.yaml"))
    assert (code, err) == (0, ""), out
    bp = load_path(tmp_path / "agent.yaml")
    assert [t.ref for t in bp.toolkits if t is not None] == ["system", "devops"]
    code, out, _ = cli(
        "validate", str(tmp_path / "agent.yaml"), "--toolkit", f"{REPO}/examples/devops/toolkit.py:DevOps"
    )
    assert code == 0, out


# -- kimi-cli's own bundled agents (issue 27 item 5) ----------------------------------------------
# Written as kimi-cli ships them in kimi_cli/agents/default/: the default agent is nameless
# (name: ""), and its coder/explore/plan sub-agents extend it, replace its prompt arguments' role
# line, exclude the tools a sub-agent must not use and declare no sub-agents of their own.

KIMI_SYSTEM_MD = """\
You are Kimi CLI, an interactive general AI agent running on a user's computer.${ROLE_ADDITIONAL}

# Working Environment
The current date and time in ISO format is `${KIMI_NOW}`.
The current working directory is `${KIMI_WORK_DIR}`. The directory listing:
```
${KIMI_WORK_DIR_LS}
```
${KIMI_AGENTS_MD}
"""
KIMI_DEFAULT = """\
version: 1
agent:
  name: ""
  system_prompt_path: ./system.md
  system_prompt_args:
    ROLE_ADDITIONAL: ""
  tools:
    - "kimi_cli.tools.multiagent:Task"
    # - "kimi_cli.tools.multiagent:CreateSubagent"
    # - "kimi_cli.tools.dmail:SendDMail"
    - "kimi_cli.tools.think:Think"
    - "kimi_cli.tools.todo:SetTodoList"
    - "kimi_cli.tools.shell:Shell"
    - "kimi_cli.tools.file:ReadFile"
    - "kimi_cli.tools.file:ReadMediaFile"
    - "kimi_cli.tools.file:Glob"
    - "kimi_cli.tools.file:Grep"
    - "kimi_cli.tools.file:WriteFile"
    - "kimi_cli.tools.file:StrReplaceFile"
    - "kimi_cli.tools.web:SearchWeb"
    - "kimi_cli.tools.web:FetchURL"
  subagents:
    coder:
      path: ./coder.yaml
      description: "Good at general software engineering tasks."
    explore:
      path: ./explore.yaml
      description: "Fast read-only agent for exploring codebases: finds files, searches code, answers questions."
    plan:
      path: ./plan.yaml
      description: "Read-only agent that investigates and writes an implementation plan."
"""
KIMI_SUB = """\
version: 1
agent:
  extend: ./agent.yaml
  system_prompt_args:
    ROLE_ADDITIONAL: |

      You are now running as a subagent ({role}). All the `user` messages are sent by the main agent.
      The main agent cannot see your context, it can only see your last message when you finish the task.
  exclude_tools:
    - "kimi_cli.tools.multiagent:Task"
    - "kimi_cli.tools.multiagent:CreateSubagent"
    - "kimi_cli.tools.dmail:SendDMail"
    - "kimi_cli.tools.todo:SetTodoList"{more}
  subagents:  # make sure no subagents are provided
"""
READ_ONLY = '\n    - "kimi_cli.tools.file:WriteFile"\n    - "kimi_cli.tools.file:StrReplaceFile"'


def kimi_default_agent(folder: Path) -> Path:
    write(folder / "system.md", KIMI_SYSTEM_MD)
    write(folder / "coder.yaml", KIMI_SUB.format(role="coder", more=""))
    write(folder / "explore.yaml", KIMI_SUB.format(role="explore", more=READ_ONLY))
    write(folder / "plan.yaml", KIMI_SUB.format(role="plan", more=READ_ONLY + '\n    - "kimi_cli.tools.shell:Shell"'))
    return write(folder / "agent.yaml", KIMI_DEFAULT)


def test_kimi_clis_default_agent_and_its_subagents_load_with_kimis_values(tmp_path: Path) -> None:
    path = kimi_default_agent(tmp_path / "default")
    for name in ("agent", "coder", "explore", "plan"):
        assert cli("validate", str(tmp_path / "default" / f"{name}.yaml"))[0] == 0, name
    bp = load_path(path)
    assert validate_blueprint(bp).issues == ()
    # kimi-cli resolves name "" (a value, not a missing name); codeact's id falls back to the file's stem.
    assert (bp.name, bp.id) == ("", "agent")
    assert bp.kimi_prompt is not None and dict(bp.kimi_prompt.args)["ROLE_ADDITIONAL"] == ""
    assert bp.instructions is not None and (bp.instructions.system or "").startswith(
        "You are Kimi CLI, an interactive general AI agent running on a user's computer.${ROLE_ADDITIONAL}"
    )
    assert [(name, entry.description if entry else None) for name, entry in bp.subagents.items()] == [
        ("coder", "Good at general software engineering tasks."),
        ("explore", "Fast read-only agent for exploring codebases: finds files, searches code, answers questions."),
        ("plan", "Read-only agent that investigates and writes an implementation plan."),
    ]
    assert [t.ref for t in bp.toolkits if t is not None] == ["system"]  # Think -> system.think; Task -> agents
    for role in ("coder", "explore", "plan"):
        child = bp.subagent_blueprints[role]
        assert (child.name, child.id, child.subagents) == ("", role, {})  # name inherited; no sub-agents
        assert child.instructions is not None
        assert child.instructions.system == bp.instructions.system  # the base's system.md (its own folder)
        assert child.kimi_prompt is not None
        assert dict(child.kimi_prompt.args)["ROLE_ADDITIONAL"].startswith(
            f"\nYou are now running as a subagent ({role})."
        )


def test_kimi_clis_default_agent_runs_with_its_subagents(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEACT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("CODEACT_MODEL", raising=False)
    path = kimi_default_agent(tmp_path / "default")
    openai_server.push(
        "I'll ask the explore agent.",
        "Let me delegate.\n```python\nfound = await agents.explore(task='Which file defines main?')\nprint(found)\n```",
        "Quick look.",
        "```python\nsystem.finish('main is in app.py')\n```",
        "Done.",
        "```python\nsystem.finish(f'explore says: {found}')\n```",
    )
    code, out, err = cli(
        "run", str(path), "--input", "where is main?", "--model", "openai/test", "--base-url", openai_server.base_url,
        "--store", f"sqlite:///{tmp_path / 's.db'}", "--isolation", "process",
    )  # fmt: skip
    assert code == 0, err
    assert out == "explore says: main is in app.py\n"
    prompts = [json.dumps(r.body) for r in openai_server.requests if r.method == "POST"]
    assert "running as a subagent (explore)" in prompts[2]
    assert "running as a subagent" not in prompts[0]
