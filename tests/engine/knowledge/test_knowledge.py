"""The ``knowledge`` block's checks (exact messages) and the chunking and selection rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.blueprint import load_path, validate_blueprint
from codeact.engine.blueprint.factory import knowledge_settings
from codeact.engine.knowledge import KnowledgeBase, KnowledgeChunk, chunk_text

HEAD = "version: codeact.agent/v1\nid: kb\nmodel: {provider: openai, model: gpt-4.1-mini}\nworkflow: {mode: codeact}\n"


def issues(tmp_path: Path, knowledge: str, *, head: str = HEAD) -> list[str]:
    (tmp_path / "notes.md").write_text("# Notes\n\nDeploys happen on Tuesdays.\n")
    (tmp_path / "empty").mkdir(exist_ok=True)
    path = tmp_path / "agent.yaml"
    path.write_text(head + knowledge)
    return [issue.format() for issue in validate_blueprint(load_path(path)).issues]


@pytest.mark.parametrize(
    ("knowledge", "expected"),
    [
        pytest.param("knowledge: [{text: Be brief., kind: constraint}, {file: notes.md}]\n", [], id="valid-shorthand"),
        pytest.param(
            "knowledge: [{text: Be brief., file: notes.md}]\n",
            [
                "ERROR $.knowledge.sources[0] blueprint.knowledge.source.invalid: knowledge.sources[0] needs exactly "
                "one of text, file or folder (got text and file)."
            ],
            id="two-of-text-file-folder",
        ),
        pytest.param(
            "knowledge: [{text: Be brief., kind: constraints}]\n",
            [
                "ERROR $.knowledge.sources[0].kind blueprint.knowledge.kind.invalid: knowledge.sources[0].kind must "
                "be one of: domain, constraint (got 'constraints'); did you mean 'constraint'?"
            ],
            id="kind-did-you-mean",
        ),
        pytest.param(
            "knowledge: [{fiel: notes.md}]\n",
            [
                "ERROR $.knowledge.sources[0] blueprint.knowledge.source.invalid: knowledge.sources[0] needs exactly "
                "one of text, file or folder (got none).",
                "WARNING $.knowledge.sources[0].fiel blueprint.field.unknown: Unknown field: "
                "knowledge.sources[0].fiel; did you mean 'file'?",
            ],
            id="unknown-key-did-you-mean",
        ),
        pytest.param(
            "knowledge: {budgt: 10, sources: [{folder: notes.md}]}\n",
            [
                "ERROR $.knowledge.sources[0].folder blueprint.knowledge.notAFolder: knowledge.sources[0]: "
                "'notes.md' is a file; write file: 'notes.md' instead of folder:.",
                "WARNING $.knowledge.budgt blueprint.field.unknown: Unknown field: knowledge.budgt; "
                "did you mean 'budget'?",
            ],
            id="folder-is-a-file",
        ),
        pytest.param(
            "knowledge: [{folder: empty}]\n",
            [
                "WARNING $.knowledge.sources[0].folder blueprint.knowledge.empty: knowledge.sources[0]: folder 'empty' "
                "has no file matching *.md, *.markdown, *.txt, *.rst; add files or set glob."
            ],
            id="empty-folder",
        ),
    ],
)
def test_knowledge_checks(tmp_path: Path, knowledge: str, expected: list[str]) -> None:
    assert issues(tmp_path, knowledge) == expected


def test_knowledge_outside_codeact_and_react_modes_is_reported(tmp_path: Path) -> None:
    assert (
        issues(tmp_path, "knowledge: [{file: notes.md}]\n", head=HEAD.replace("{mode: codeact}", "{mode: react}")) == []
    )
    head = HEAD.replace("{mode: codeact}", "{mode: flow}")
    assert (
        "WARNING $.knowledge blueprint.knowledge.ignored: knowledge is retrieved into the prompt of "
        "workflow.mode codeact and react only (got 'flow'); give the knowledge to the flow's agents."
    ) in issues(tmp_path, "knowledge: [{file: notes.md}]\n", head=head)


def test_chunks_follow_headings_and_stay_bounded() -> None:
    text = "Intro line.\n# Deploys\n\nOn Tuesdays.\n\nNever on Fridays.\n## Rollback\n" + "step " * 60 + "\n"
    chunks = chunk_text(text, title="runbook", chunk_chars=120)
    assert chunks[:3] == [
        ("runbook", "Intro line."),
        ("Deploys", "On Tuesdays.\n\nNever on Fridays."),
        ("Rollback", ("step " * 24).strip()),
    ]
    assert all(len(chunk) <= 120 for _, chunk in chunks)
    assert "".join(chunk.replace(" ", "") for title, chunk in chunks if title == "Rollback") == "step" * 60


def test_selection_constraints_always_domain_when_relevant_within_budget() -> None:
    base = KnowledgeBase(
        [
            KnowledgeChunk(source="text[0]", kind="constraint", title="", text="Always answer in English."),
            KnowledgeChunk(source="a.md", kind="domain", title="Deploys", text="Deploys happen on Tuesdays."),
            KnowledgeChunk(source="b.md", kind="domain", title="Billing", text="Invoices go out monthly."),
        ],
        budget=20,
    )
    chosen = base.select("When do deploys happen?")
    assert [c.text for c in chosen.constraints] == ["Always answer in English."]
    assert [c.source for c, _ in chosen.domain] == ["a.md"]
    assert chosen.tokens == 7 + 10 and chosen.dropped == 0  # 25 and 37 characters, 4 per token
    unrelated = base.select("What's the weather?")
    assert unrelated.domain == () and [c.text for c in unrelated.constraints] == ["Always answer in English."]
    tight = KnowledgeBase(base.chunks, budget=10).select("When do deploys happen?")
    assert tight.domain == () and tight.dropped == 1


def test_settings_resolve_paths_against_the_declaring_file(tmp_path: Path) -> None:
    (tmp_path / "kb").mkdir()
    path = tmp_path / "agent.yaml"
    path.write_text(HEAD + "knowledge: [{folder: kb, glob: '*.yaml'}]\n")
    settings = knowledge_settings(load_path(path))
    assert settings is not None
    (source,) = settings.sources
    assert source.path == tmp_path / "kb" and source.folder and source.label == "kb/" and source.glob == "*.yaml"
    assert settings.budget == 1000 and settings.chunk_chars == 1200
