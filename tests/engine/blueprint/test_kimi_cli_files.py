"""kimi-cli's own agent files load and run unchanged (issue 36 item 1).

The files under ``kimi_cli/agents/`` are kimi-cli's, copied byte for byte (``kimi_cli/SOURCE.md``
says from where; ``kimi_cli/LICENSE`` is kimi-cli's Apache-2.0 licence). Each runs one round through
``codeact run`` on the scripted model, and the system prompt the model receives is kimi's template
rendered as kimi-cli renders it: the host's real OS, shell, working directory, its listing and its
``AGENTS.md``, Jinja's blocks applied, nothing of ``${`` or ``{%`` left.
"""

from __future__ import annotations

import json
import platform
import textwrap
from pathlib import Path

import pytest

from codeact.engine.blueprint import AgentFactory, AgentSpec, HostContext, load_path
from codeact.engine.blueprint.models import ModelBlock
from codeact.engine.errors import BlueprintLoadError
from codeact.engine.model.scripted import ScriptedReplies
from tests.engine.cli_support import cli

pytestmark = pytest.mark.usefixtures("cli_home")

KIMI = Path(__file__).parent / "kimi_cli"
AGENTS = KIMI / "agents"
BUILTIN = Path(__file__).resolve().parents[3] / "engine" / "blueprint" / "builtin" / "kimi"
OS_NAME = {"Darwin": "macOS"}.get(platform.system(), platform.system())
SUBAGENT_LINE = "You are now running as a subagent."


def build(path: Path, work_dir: Path) -> AgentSpec:
    """The agent as a host builds it (a kimi file names no model: the host gives one)."""
    bp = load_path(path)
    bp = bp.model_copy(update={"model": ModelBlock(provider="openai", model="gpt-4.1-mini")})
    return AgentFactory().create(bp, HostContext(work_dir=work_dir, model_client=object()))


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with files and an AGENTS.md, as a kimi user runs in."""
    work = tmp_path / "project"
    write(work / "AGENTS.md", "Run the tests with `make test` before you say done.\n")
    write(work / "src" / "app.py", "print('hi')\n")
    write(work / "README.md", "# app\n")
    monkeypatch.chdir(work)
    return work


def test_the_fixtures_ship_unchanged_as_kimis_built_in_agents() -> None:
    shipped = sorted(p.relative_to(BUILTIN).as_posix() for p in BUILTIN.rglob("*") if p.is_file())
    assert shipped == [
        "LICENSE",
        "default/agent.yaml",
        "default/coder.yaml",
        "default/explore.yaml",
        "default/plan.yaml",
        "default/system.md",
        "okabe/agent.yaml",
    ]
    for name in shipped:
        source = KIMI / name if name == "LICENSE" else AGENTS / name
        assert (BUILTIN / name).read_bytes() == source.read_bytes(), name
    assert "Copyright 2025 Moonshot AI" in (KIMI / "LICENSE").read_text()


@pytest.mark.parametrize(
    ("name", "subagent"),
    [
        pytest.param("default/agent.yaml", False, id="default"),
        pytest.param("default/coder.yaml", True, id="coder"),
        pytest.param("default/explore.yaml", True, id="explore"),
        pytest.param("default/plan.yaml", True, id="plan"),
        pytest.param("okabe/agent.yaml", False, id="okabe"),
    ],
)
def test_kimis_own_file_runs_one_round_with_the_hosts_real_values(
    project: Path, tmp_path: Path, name: str, subagent: bool
) -> None:
    replies = ScriptedReplies(
        [
            "Thought: the product of six and seven answers it; one line of code finishes.",
            "```python\nsystem.finish(f'{6 * 7}')\n```",
        ]
    )
    code, out, err = cli(
        "run", str(AGENTS / name), "--input", "What is six times seven?", "--model", replies.model,
        "--store", f"sqlite:///{tmp_path / 's.db'}", "--json",
    )  # fmt: skip
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[-1]["type"] == "run.completed" and events[-1]["answer"] == "42"
    assert (events[-1]["rounds"], "WARNING" in err) == (1, False)
    system = replies.requests[0].messages[0]
    assert system["role"] == "system"
    prompt = str(system["content"])
    assert "\nYou are Kimi Code CLI, an interactive general AI agent running on a user's computer." in prompt
    assert f"You are running on **{OS_NAME}**. The Shell tool executes commands using **" in prompt
    assert f"The current working directory is `{project}`." in prompt
    assert "src/\n  app.py\n" in prompt and "README.md" in prompt  # the listing of the working directory
    assert "Run the tests with `make test` before you say done." in prompt  # its AGENTS.md
    assert "No skills found." in prompt
    assert "${" not in prompt and "{%" not in prompt and "%}" not in prompt
    assert ("IMPORTANT: You are on Windows." in prompt) == (OS_NAME == "Windows")
    assert "## Additional Directories" not in prompt  # {% if KIMI_ADDITIONAL_DIRS_INFO %}: empty here
    assert (SUBAGENT_LINE in prompt) == subagent


def test_when_to_use_and_the_tools_without_counterpart_reach_the_parent(project: Path) -> None:
    bp = load_path(AGENTS / "default" / "agent.yaml")
    assert bp.description == (
        "kimi-cli tools not available in codeact: TaskList, TaskOutput, TaskStop, ReadMediaFile, SearchWeb, "
        "FetchURL, ExitPlanMode, EnterPlanMode, ArchiveSearch."
    )
    spec = build(AGENTS / "default" / "agent.yaml", project)
    described = {sub.name: sub.description for sub in spec.subagents}
    assert described["explore"].startswith(
        "Fast codebase exploration with prompt-enforced read-only behavior.\n"
        "Fast agent specialized for exploring codebases."
    )
    assert described["plan"].endswith(
        "before code changes are made.\nkimi-cli tools not available in codeact: ReadMediaFile, SearchWeb, FetchURL."
    )
    assert described["coder"].startswith(
        "Good at general software engineering tasks.\nUse this agent for non-trivial software engineering work"
    )
    # A sub-agent's prompt: kimi's, with its own ROLE_ADDITIONAL and the same host values.
    coder = next(sub for sub in spec.subagents if sub.name == "coder").spec
    assert SUBAGENT_LINE in (coder.instructions.system or "")
    assert not coder.subagents  # `subagents:` (null) in coder.yaml: no sub-agents of its own


@pytest.mark.parametrize(
    ("base", "missing"),
    [
        pytest.param("default", "TaskList", id="default"),
        pytest.param("okabe", "SendDMail", id="okabe"),
    ],
)
def test_extend_default_and_okabe_give_kimis_built_in_agents(tmp_path: Path, base: str, missing: str) -> None:
    path = write(tmp_path / "agent.yaml", f'version: 1\nagent:\n  extend: {base}\n  name: "team_lead"\n')
    bp = load_path(path)
    assert (bp.id, sorted(bp.subagents)) == ("team_lead", ["coder", "explore", "plan"])
    assert missing in (bp.description or "")
    code, out, err = cli("validate", str(path))
    assert (code, err) == (0, ""), out


def test_allowed_tools_and_exclude_tools_decide_the_grants(tmp_path: Path) -> None:
    write(tmp_path / "system.md", "You help.\n")
    path = write(
        tmp_path / "agent.yaml",
        """
        version: 1
        agent:
          name: helper
          system_prompt_path: ./system.md
          tools: [devops, billing, "kimi_cli.tools.web:SearchWeb", "kimi_cli.tools.think:Think"]
          allowed_tools: [devops, billing, "kimi_cli.tools.web:SearchWeb"]
          exclude_tools: [billing]
        """,
    )
    bp = load_path(path)
    assert [t.ref for t in bp.toolkits if t is not None] == ["system", "devops"]
    assert bp.description == "kimi-cli tools not available in codeact: SearchWeb."


def test_model_is_the_agents_model_route(tmp_path: Path) -> None:
    write(tmp_path / "system.md", "You help.\n")
    write(
        tmp_path / "fast.yaml",
        'version: 1\nagent: {name: fast, system_prompt_path: ./system.md, tools: [], model: "openai/gpt-4.1-mini"}\n',
    )
    path = write(
        tmp_path / "agent.yaml",
        """
        version: 1
        agent:
          name: lead
          system_prompt_path: ./system.md
          model: kimi-k2
          tools: ["kimi_cli.tools.agent:Agent"]
          subagents:
            fast: {path: ./fast.yaml, description: Quick answers.}
        """,
    )
    bp = load_path(path)
    assert bp.model is not None and (bp.model.profile, bp.model.provider) == ("kimi-k2", None)
    fast = bp.subagent_blueprints["fast"].model
    assert fast is not None and (fast.provider, fast.model) == ("openai", "gpt-4.1-mini")
    code, out, err = cli("validate", str(path))
    assert (code, err) == (0, ""), out


def test_kimis_template_rules(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "agent"
    write(folder / "extra.md", "Included: ${WHO} on ${KIMI_OS}.\n")
    write(
        folder / "system.md",
        """
        Price is $100, path $PATH, work in ${KIMI_WORK_DIR}.
        {% include "extra.md" %}
        OS line.{% if KIMI_OS == "Plan9" %} Never shown.{% endif +%}
        After.
        """,
    )
    path = write(
        folder / "agent.yaml",
        "version: 1\nagent: {name: t, system_prompt_path: ./system.md, system_prompt_args: {WHO: me}, tools: []}\n",
    )
    spec = build(path, project)
    assert spec.instructions.system == (
        f"Price is $100, path $PATH, work in {project}.\nIncluded: me on {OS_NAME}.\nOS line.\nAfter."
    )


@pytest.mark.parametrize(
    ("prompt", "code", "reason"),
    [
        pytest.param("Hi ${NOBODY}.", "blueprint.kimi.prompt.arg", "uses ${NOBODY}, which has no value", id="arg"),
        pytest.param("{% if KIMI_OS %}open", "blueprint.kimi.prompt.template", "is not a valid template", id="syntax"),
        pytest.param('{% include "../secret.md" %}', "blueprint.kimi.file", "stays inside it", id="include-outside"),
        pytest.param('{% include "gone.md" %}', "blueprint.kimi.file", "includes 'gone.md'", id="include-missing"),
    ],
)
def test_a_broken_prompt_stops_validate(tmp_path: Path, prompt: str, code: str, reason: str) -> None:
    write(tmp_path / "secret.md", "top secret\n")
    write(tmp_path / "agent" / "system.md", prompt)
    path = write(
        tmp_path / "agent" / "agent.yaml", "version: 1\nagent: {name: t, system_prompt_path: ./system.md, tools: []}\n"
    )
    with pytest.raises(BlueprintLoadError) as info:
        load_path(path)
    assert info.value.code == code and reason in info.value.message
    exit_code, _, err = cli("validate", str(path))
    assert exit_code == 2 and f"[{code}]" in err
