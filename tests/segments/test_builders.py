"""Prompt builders: whole-prompt snapshots of a 3-round session, byte-stable static part, configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from codeact.prompts.errors import TemplateError
from codeact.segments import (
    FIM_FAMILIES,
    BasePromptBuilder,
    PromptConfig,
    PromptConfigError,
    SegmentBuilder,
    SegmentHistory,
    ToolkitCatalog,
)
from tests.segments._snapshot import check_snapshot

SNAPSHOTS = Path(__file__).parent / "snapshots"

STUBS = '''class example_toolkit:
    """DevOps project operations."""

    async def get_project_info(self, project_id: str) -> dict:
        """Get a project's basic information."""

    async def search_requirements(self, project_id: str, query: str) -> list[dict]:
        """Search the requirements of a project."""


class normandy_toolkit:
    """Application deployment."""

    async def deploy_app(self, app_id: str, version: str) -> dict:
        """Deploy an application version."""'''

ROUNDS = [
    {
        "thought": "The user wants the requirements of project 123 about login.",
        "plan": "1. Search the requirements.\n2. Print how many there are.",
        "code": 'reqs = await example_toolkit.search_requirements(project_id="123", query="login")\nprint(len(reqs))',
        "evaluation": "Output:\n3\nVariables changed: reqs",
        "next_goal": "Print the titles of the 3 requirements.",
        "variables": {"reqs": ("list", "[{'id': 7, 'title': 'Login page'}, ...] (3 items)")},
    },
    {
        "thought": "reqs holds 3 requirements; print their titles.",
        "plan": "1. Print each title.",
        "code": "for r in reqs:\n    print(r['title'])",
        "evaluation": ("Failed with KeyError: 'title' (line 2 of your code: `print(r['title'])`)."),
        "next_goal": "Print the keys of one requirement to find the title field.",
        "variables": {"reqs": ("list", "[{'id': 7, 'name': 'Login page'}, ...] (3 items)"), "r": ("dict", "{...}")},
    },
    {
        "thought": "The field is called name.",
        "plan": "1. Print each name.",
        "code": "for r in reqs:\n    print(r['name'])",
        "evaluation": "Output:\nLogin page\nSSO login\nLogin audit",
        "next_goal": "done",
        "variables": {"reqs": ("list", "[{'id': 7, 'name': 'Login page'}, ...] (3 items)"), "r": ("dict", "{...}")},
    },
]


def _config(**fields: object) -> PromptConfig:
    base: dict[str, object] = {
        "instructions": {
            "system": "You are a professional DevOps assistant for {{ company }}.",
            "developer": "Prefer small, verifiable steps.",
            "variables": {"company": "Example Corp", "language": "English"},
        },
        "platform": "the Example Corp DevOps platform",
        "knowledge": ["A change belongs to exactly one branch."],
        "experiences": [
            {
                "task": "Show project 9",
                "code": "info = await example_toolkit.get_project_info(project_id='9')\nprint(info)",
            }
        ],
    }
    base.update(fields)
    return PromptConfig.model_validate(base)


def _history(rounds: int) -> SegmentHistory:
    history = SegmentHistory()
    history.add("User", 'Find the requirements of project 123 about "login".', timestamp=0.0, id="u")
    history.add("Context", "The user is on https://example.com/project/123 (project overview).", timestamp=0.0, id="c")
    for spec in ROUNDS[:rounds]:
        history.add_round(
            thought=spec["thought"],  # type: ignore[arg-type]
            plan=spec["plan"],  # type: ignore[arg-type]
            code=spec["code"],  # type: ignore[arg-type]
            evaluation=spec["evaluation"],  # type: ignore[arg-type]
            next_goal=spec["next_goal"],  # type: ignore[arg-type]
        )
    return history


def _variables(rounds: int) -> dict[str, tuple[str, str]]:
    return ROUNDS[rounds - 1]["variables"] if rounds else {}  # type: ignore[return-value]


def _dump(prompt_text: str, system: str, user: str) -> str:
    return f"=== SYSTEM ===\n{system}=== USER ===\n{user}\n=== END ===\n" if not prompt_text else prompt_text


@pytest.mark.parametrize("done", [0, 1, 2], ids=["round-1", "round-2", "round-3"])
def test_chat_code_prompt_snapshot(done: int) -> None:
    builder = SegmentBuilder(_config(), stubs=STUBS)
    history = _history(done)
    goal = ROUNDS[done - 1]["next_goal"] if done else None
    prompt = builder.build("code", history, variables=_variables(done), goal=goal)  # type: ignore[arg-type]
    assert prompt.messages[0] == {"role": "system", "content": prompt.system}
    assert prompt.messages[1] == {"role": "user", "content": prompt.user}
    check_snapshot(SNAPSHOTS, f"chat_code_round{done + 1}.txt", _dump("", prompt.system, prompt.user))


@pytest.mark.parametrize("purpose", ["thought", "reflect"])
def test_chat_thought_and_reflect_snapshots(purpose: str) -> None:
    prompt = SegmentBuilder(_config(), stubs=STUBS).build(purpose, _history(2))
    check_snapshot(SNAPSHOTS, f"chat_{purpose}_round3.txt", _dump("", prompt.system, prompt.user))


@pytest.mark.parametrize("model", ["qwen2.5-coder-7b", "codestral-latest"])
def test_completion_code_snapshot(model: str) -> None:
    builder = SegmentBuilder(_config(protocol="completion", model=model), stubs=STUBS)
    prompt = builder.build("code", _history(2), variables=_variables(2))
    assert prompt.text is not None and prompt.messages == ()
    assert prompt.text.startswith(prompt.static)
    assert prompt.completion_prefix is not None and prompt.completion_prefix.endswith("try:\n    ")
    assert prompt.completion_suffix == prompt.frame.suffix if prompt.frame else False
    check_snapshot(SNAPSHOTS, f"completion_code_{model.split('-')[0]}_round3.txt", prompt.text)


@pytest.mark.parametrize(
    ("protocol", "model", "purpose"),
    [
        pytest.param("chat", "", "code", id="chat-code"),
        pytest.param("chat", "", "thought", id="chat-thought"),
        pytest.param("chat", "", "reflect", id="chat-reflect"),
        pytest.param("completion", "qwen2.5-coder", "code", id="completion-qwen"),
        pytest.param("completion", "deepseek-coder", "code", id="completion-deepseek"),
        pytest.param("completion", "codestral", "code", id="completion-codestral-suffix-first"),
        pytest.param("completion", "qwen2.5-coder", "thought", id="completion-thought"),
    ],
)
def test_static_part_is_byte_stable_across_rounds(protocol: str, model: str, purpose: str) -> None:
    builder = SegmentBuilder(_config(protocol=protocol, model=model), stubs=STUBS)
    prompts = [builder.build(purpose, _history(done), variables=_variables(done)) for done in range(3)]
    statics = {p.static.encode("utf-8") for p in prompts}
    assert len(statics) == 1
    assert len({p.static_hash for p in prompts}) == 1
    for prompt in prompts:
        whole = prompt.text if protocol == "completion" else prompt.messages[0]["content"]
        assert whole is not None and whole.startswith(prompt.static)
        assert STUBS in prompt.static
    # a fresh builder (a resumed session) renders the same bytes
    again = SegmentBuilder(_config(protocol=protocol, model=model), stubs=STUBS).build(purpose, _history(1))
    assert again.static_hash == prompts[0].static_hash


def test_round_prompt_contains_all_earlier_segments_in_order() -> None:
    prompt = SegmentBuilder(_config(), stubs=STUBS).build("code", _history(2), variables=_variables(2))
    user = prompt.user
    positions = [user.index(ROUNDS[0]["thought"]), user.index(ROUNDS[0]["next_goal"]), user.index(ROUNDS[1]["thought"])]  # type: ignore[arg-type]
    assert positions == sorted(positions)
    assert "    raise\n```\nReply with only that code, in one ```python block." in user
    assert "#   r: dict = {...}\n" in user


def test_sections_order_and_overrides() -> None:
    config = _config(
        sections=("role", "platform", "toolkits"),
        overrides={"platform": "## Platform\nYou work for {{ company }}."},
    )
    system = SegmentBuilder(config, stubs="").build("code", SegmentHistory()).system
    assert system == (
        "## Role\nYou are a professional DevOps assistant for Example Corp.\n\n"
        "## Platform\nYou work for Example Corp.\n\n"
        "## Toolkits\nNone: use plain Python only.\n"
    )


def test_template_override_per_section() -> None:
    config = _config(sections=("output_format",), templates={"output_format": "system_output_thought.j2"})
    system = SegmentBuilder(config).build("code", SegmentHistory()).system
    assert system.startswith("## Output format\nReply with your reasoning")


def test_empty_sections_are_left_out() -> None:
    config = PromptConfig(sections=("developer", "knowledge", "experience", "role"))
    system = SegmentBuilder(config).build("thought", SegmentHistory()).system
    assert system == (
        "## Role\nYou are a professional assistant that writes code, calls tools and carries tasks through to "
        "completion.\n"
    )


def test_toolkit_catalog_protocol_is_accepted() -> None:
    class Catalog:
        def render_stubs(self) -> str:
            return "class demo:\n    pass"

    assert isinstance(Catalog(), ToolkitCatalog)
    prompt = SegmentBuilder(PromptConfig(sections=("toolkits",)), stubs=Catalog()).build("code", SegmentHistory())
    assert prompt.system.endswith("class demo:\n    pass\n")


def test_missing_instruction_variable_names_it() -> None:
    with pytest.raises(TemplateError) as caught:
        PromptConfig.from_blueprint(instructions={"system": "Answer in {{ language }}."})
    assert str(caught.value) == (
        "instructions.system uses undefined variable 'language': define it under instructions.variables"
    )
    assert (caught.value.template, caught.value.variable) == ("instructions.system", "language")


def test_instruction_text_is_not_jinja() -> None:
    config = PromptConfig.from_blueprint(
        instructions={"system": "{{ x }} {% for i in range(3) %}{{ ''.__class__ }}{% endfor %}", "variables": {"x": 1}},
        sections=("role",),
    )
    assert SegmentBuilder(config).build("code", SegmentHistory()).system == (
        "## Role\n1 {% for i in range(3) %}{{ ''.__class__ }}{% endfor %}\n"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param({"sections": ("role", "nope")}, "unknown system section(s) ['nope']", id="unknown-section"),
        pytest.param({"sections": ("role", "role")}, "repeat a name", id="duplicate-section"),
        pytest.param(
            {"templates": {"role": "missing.j2"}}, "template 'missing.j2' does not exist", id="missing-template"
        ),
        pytest.param({"overrides": {"intro": "x"}}, "overrides.intro: unknown section", id="unknown-override"),
        pytest.param({"fim": "gpt"}, "unknown FIM family 'gpt'", id="unknown-family"),
        pytest.param({"imports": ["import os; os.system('x')"]}, "is not one import statement", id="bad-import"),
        pytest.param({"protocol": "responses"}, "Input should be 'chat' or 'completion'", id="bad-protocol"),
    ],
)
def test_config_errors(fields: dict[str, object], message: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        PromptConfig.model_validate(fields)
    assert message in str(caught.value)


def test_unknown_purpose() -> None:
    with pytest.raises(PromptConfigError) as caught:
        SegmentBuilder(PromptConfig()).build("plan", SegmentHistory())
    assert str(caught.value) == (
        "no prompt builder for purpose 'plan': use one of ['code', 'reflect', 'thought'] or register one with "
        "SegmentBuilder(builders={...})"
    )


def test_custom_builder_without_template_is_a_config_error() -> None:
    class PlanBuilder(BasePromptBuilder):
        purpose = "plan"

    with pytest.raises(PromptConfigError) as caught:
        SegmentBuilder(PromptConfig(), builders={"plan": PlanBuilder}).build("plan", SegmentHistory())
    assert str(caught.value).startswith("no template 'system_output_plan.j2' for section 'output_format'")


def test_custom_builder_with_override_works() -> None:
    class PlanBuilder(BasePromptBuilder):
        purpose = "thought"  # reuses the thought cue; the output section comes from overrides

    config = PromptConfig(sections=("output_format",), overrides={"output_format": "## Output format\nPlan only."})
    prompt = SegmentBuilder(config, builders={"plan": PlanBuilder}).build("plan", SegmentHistory())
    assert prompt.system == "## Output format\nPlan only.\n"


def test_chat_fim_family_and_override() -> None:
    assert SegmentBuilder(PromptConfig(model="deepseek-coder")).builder("code").tokens.family == "qwen"
    assert SegmentBuilder(PromptConfig(model="x", fim="starcoder")).builder("code").tokens.family == "starcoder"
    custom = PromptConfig.model_validate({"fim_tokens": {"prefix": "<P>", "suffix": "<S>", "middle": "<M>"}})
    prompt = SegmentBuilder(custom).build("code", SegmentHistory())
    assert "<P>" not in prompt.user  # chat: the frame is a plain code block; markers are for raw completion only
    raw = SegmentBuilder(custom.model_copy(update={"protocol": "completion"})).build("code", SegmentHistory())
    assert raw.text is not None and "<P>" in raw.text and raw.text.endswith("<M>")


@pytest.mark.parametrize("model", ["qwen2.5-coder-1.5b-instruct", "deepseek-coder", "starcoder2", "codestral"])
def test_chat_code_prompt_reads_as_a_normal_chat_request(model: str) -> None:
    prompt = SegmentBuilder(_config(model=model), stubs=STUBS).build("code", _history(1), variables=_variables(1))
    text = "\n".join(m["content"] for m in prompt.messages)
    markers = {m for family in FIM_FAMILIES.values() for m in family.markers}
    assert [m for m in markers if m in text] == []
    assert "Fill-in-the-Middle" not in text
    assert prompt.user.endswith(
        'try:\n    # <your code for this round>\nexcept Exception as e:\n    print(f"Error: {e!r}")\n    raise\n```\n'
        "Reply with only that code, in one ```python block. The toolkits are objects already defined there: call "
        "them as `await normandy_toolkit.<operation>(...)` (example_toolkit, normandy_toolkit)."
    )
    # the reply ends before a turn the model would invent; OpenAI takes at most 4 stop strings
    assert prompt.stop == ("\nOutput:", "\nObservation:", "\nEvaluation:", "\nUser:")


def test_completion_code_prompt_stops_before_an_invented_turn() -> None:
    prompt = SegmentBuilder(_config(protocol="completion", model="qwen2.5-coder")).build("code", _history(1))
    assert {"<|fim_prefix|>", "\nexcept Exception as e:", "\nOutput:", "\nObservation:", "\nUser:"} <= set(prompt.stop)
    assert "\n# Evaluation:" in prompt.stop  # the raw prompt's own history comment, echoed after the code
    assert "\n    # Evaluation:" in prompt.stop  # and inside the frame's try: body (the 1.5B did both)


def test_prompt_to_dict_is_json() -> None:
    prompt = SegmentBuilder(_config(), stubs=STUBS).build("code", _history(1), variables=_variables(1))
    record = json.loads(json.dumps(prompt.to_dict()))
    assert record["static_hash"] == prompt.static_hash
    assert record["fim_family"] == "qwen"
    assert record["frame"]["suffix"].startswith("except Exception as e:")
