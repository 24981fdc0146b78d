from __future__ import annotations

import io
from pathlib import Path

import pytest

from codeact.engine.blueprint import Blueprint, load_path, load_stream, load_text
from codeact.engine.errors import BlueprintError, BlueprintLoadError

from ._helpers import FIXTURES, fixture


@pytest.mark.parametrize(
    ("name", "code", "path", "message"),
    [
        pytest.param(
            "yaml_invalid.yaml",
            "blueprint.yaml.invalid",
            None,
            "Invalid Agent Blueprint YAML in yaml_invalid.yaml: "
            "while parsing a flow sequence; expected ',' or ']', but got "
            "'<stream end>' at line 6, column 1. Fix the YAML syntax there.",
            id="yaml.invalid-syntax",
        ),
        pytest.param(
            "duplicate_key.yaml",
            "blueprint.yaml.invalid",
            None,
            "Invalid Agent Blueprint YAML in duplicate_key.yaml: "
            "found duplicate key 'id' (first defined on line 2) at line 6, column 1. "
            "Remove or rename one of the two keys.",
            id="yaml.invalid-duplicate-key",
        ),
        pytest.param(
            "duplicate_nested_key.yaml",
            "blueprint.yaml.invalid",
            None,
            "Invalid Agent Blueprint YAML in duplicate_nested_key.yaml: "
            "found duplicate key 'model' (first defined on line 5) at line 6, "
            "column 3. Remove or rename one of the two keys.",
            id="yaml.invalid-duplicate-nested-key",
        ),
        pytest.param(
            "two_documents.yaml",
            "blueprint.yaml.invalid",
            None,
            "Invalid Agent Blueprint YAML in two_documents.yaml: "
            "expected a single document in the stream; but found another document "
            "at line 3, column 1. Fix the YAML syntax there.",
            id="yaml.invalid-two-documents",
        ),
        pytest.param(
            "empty.yaml",
            "blueprint.document.required",
            None,
            "Agent Blueprint document in empty.yaml is empty. Write at least version, id and model.",
            id="document.required",
        ),
        pytest.param("not_a_map.yaml", "blueprint.type.map", "$", "$ must be a map, got a list.", id="type.map-top"),
        pytest.param(
            "type_map.yaml",
            "blueprint.type.map",
            "$.model",
            "$.model must be a map, got the string 'gpt-4.1-mini'.",
            id="type.map",
        ),
        pytest.param(
            "type_map_item.yaml",
            "blueprint.type.map",
            "$.tools[1]",
            "$.tools[1] must be a map, got the string 'coding.shell'.",
            id="type.map-list-item",
        ),
        pytest.param(
            "type_key.yaml",
            "blueprint.type.key",
            "$.model.options",
            "$.model.options contains a non-string key 1; quote the key to make it a string.",
            id="type.key",
        ),
        pytest.param(
            "type_list.yaml", "blueprint.type.list", "$.plugins", "$.plugins must be a list, got a map.", id="type.list"
        ),
        pytest.param(
            "type_boolean.yaml",
            "blueprint.type.boolean",
            "$.sandbox.enabled",
            "$.sandbox.enabled must be a boolean (true or false), got the string 'yes'.",
            id="type.boolean",
        ),
        pytest.param(
            "type_number.yaml",
            "blueprint.type.number",
            "$.session.compact.trigger.contextRatio",
            "$.session.compact.trigger.contextRatio must be a number, got the string 'high'.",
            id="type.number",
        ),
        pytest.param(
            "type_integer.yaml",
            "blueprint.type.integer",
            "$.workflow.maxTurns",
            "$.workflow.maxTurns must be an integer, got the number 1.5.",
            id="type.integer",
        ),
        pytest.param(
            "type_string.yaml",
            "blueprint.type.string",
            "$.id",
            "$.id must be a string, got a list.",
            id="type.string",
        ),
        pytest.param(
            "type_codeact_integer.yaml",
            "blueprint.type.integer",
            "$.sandbox.limits.memoryMb",
            "$.sandbox.limits.memoryMb must be an integer, got the string 'lots'.",
            id="type.integer-codeact-field",
        ),
    ],
)
def test_load_errors_have_code_location_and_message(name: str, code: str, path: str | None, message: str) -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(fixture(f"load/{name}"))
    assert (caught.value.code, caught.value.path, caught.value.message) == (code, path, message)
    assert isinstance(caught.value, BlueprintError)


def test_yaml_invalid_message_never_contains_the_local_path(tmp_path: Path) -> None:
    secret_dir = tmp_path / "home-of-alice" / "secret-project"
    secret_dir.mkdir(parents=True)
    target = secret_dir / "agent.yaml"
    target.write_text("version: ai4j.agent/v1\nid: [x\n", encoding="utf-8")
    messages = []
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(target)
    messages.append(caught.value.message)
    for mode in ("rb", "r"):
        with target.open(mode) as stream, pytest.raises(BlueprintLoadError) as caught:
            load_stream(stream)
        messages.append(caught.value.message)
    for message in messages:
        assert message.startswith(("Invalid Agent Blueprint YAML in agent.yaml: ", "Invalid Agent Blueprint YAML: "))
        assert "alice" not in message and str(tmp_path) not in message


def test_ai4j_coercions_are_accepted() -> None:
    blueprint = load_path(fixture("load/coercions.yaml"))
    assert blueprint.id == "2024" and blueprint.name == "true"
    plugin = blueprint.plugins[0]
    assert plugin is not None and plugin.enabled is False
    assert blueprint.session is not None and blueprint.session.memory is not None
    assert blueprint.session.memory.enabled is True
    assert blueprint.session.compact is not None and blueprint.session.compact.trigger is not None
    assert blueprint.session.compact.trigger.context_ratio == 0.75
    assert blueprint.session.compact.trigger.max_turns == 3
    assert blueprint.workflow is not None and blueprint.workflow.max_turns == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("3", 3, id="string"),
        pytest.param("' 7 '", 7, id="padded-string"),
        pytest.param("4.0", 4, id="integral-float"),
        pytest.param("'+5'", 5, id="signed-string"),
    ],
)
def test_integer_coercion_accepts(value: str, expected: int) -> None:
    blueprint = load_text(f"version: ai4j.agent/v1\nworkflow: {{maxTurns: {value}}}\n")
    assert blueprint.workflow is not None and blueprint.workflow.max_turns == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1.5", id="fraction"),
        pytest.param("'1.0'", id="decimal-string"),
        pytest.param("true", id="boolean"),
        pytest.param("'1_000'", id="underscore"),
        pytest.param("99999999999", id="out-of-int32"),
        pytest.param("[1]", id="list"),
    ],
)
def test_integer_coercion_rejects(value: str) -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_text(f"version: ai4j.agent/v1\nworkflow: {{maxTurns: {value}}}\n")
    assert (caught.value.code, caught.value.path) == ("blueprint.type.integer", "$.workflow.maxTurns")


@pytest.mark.parametrize(
    ("value", "code"),
    [
        pytest.param("'.nan'", None, id="nan-string-is-not-a-number"),
        pytest.param(".nan", None, id="nan"),
        pytest.param(".inf", None, id="inf"),
        pytest.param("false", None, id="boolean"),
        pytest.param("'1e-1'", 0.1, id="exponent-string"),
        pytest.param("1", 1.0, id="integer"),
    ],
)
def test_number_coercion(value: str, code: float | None) -> None:
    text = f"version: ai4j.agent/v1\nsession: {{compact: {{trigger: {{contextRatio: {value}}}}}}}\n"
    if code is None:
        with pytest.raises(BlueprintLoadError) as caught:
            load_text(text)
        assert (caught.value.code, caught.value.path) == (
            "blueprint.type.number",
            "$.session.compact.trigger.contextRatio",
        )
    else:
        trigger = load_text(text).session.compact.trigger  # type: ignore[union-attr]
        assert trigger is not None and trigger.context_ratio == code


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("true", True, id="bool"),
        pytest.param("'TRUE'", True, id="upper-string"),
        pytest.param("'false'", False, id="string"),
    ],
)
def test_boolean_coercion_accepts(value: str, expected: bool) -> None:
    blueprint = load_text(f"version: ai4j.agent/v1\nsandbox: {{enabled: {value}}}\n")
    assert blueprint.sandbox is not None and blueprint.sandbox.enabled is expected


@pytest.mark.parametrize("value", [pytest.param("1", id="one"), pytest.param("'on'", id="on")])
def test_boolean_coercion_rejects(value: str) -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_text(f"version: ai4j.agent/v1\nsandbox: {{enabled: {value}}}\n")
    assert (caught.value.code, caught.value.path) == ("blueprint.type.boolean", "$.sandbox.enabled")


def test_nested_free_form_keys_become_strings_but_first_level_must_be_strings() -> None:
    blueprint = load_text("version: ai4j.agent/v1\ntools:\n  - ref: net\n    config: {ports: {80: http, true: yes}}\n")
    tool = blueprint.tools[0]
    assert tool is not None and tool.config == {"ports": {"80": "http", "true": True}}


def test_unreadable_file_is_blueprint_io(tmp_path: Path) -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(tmp_path / "missing.yaml")
    assert caught.value.code == "blueprint.io"
    assert caught.value.message == (
        f"Unable to read Agent Blueprint file '{tmp_path / 'missing.yaml'}': No such file or directory. "
        "Check the path and its permissions."
    )
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(tmp_path)
    assert caught.value.code == "blueprint.io"


def test_non_utf8_file_is_blueprint_io(tmp_path: Path) -> None:
    target = tmp_path / "latin1.yaml"
    target.write_bytes("id: caf\xe9\n".encode("latin-1"))
    with pytest.raises(BlueprintLoadError) as caught:
        load_path(target)
    assert caught.value.code == "blueprint.io"
    assert caught.value.message.endswith("it is not UTF-8 text. Save it as UTF-8.")


def test_text_stream_and_path_give_the_same_blueprint() -> None:
    path = fixture("validate/valid_ai4j_full.yaml")
    text = path.read_text(encoding="utf-8")
    from_path = load_path(path)
    assert load_text(text) == from_path.model_copy(update={"source_path": None})
    assert load_stream(io.StringIO(text)) == load_text(text)
    assert load_stream(io.BytesIO(text.encode())) == load_text(text)
    assert Blueprint.from_file(path) == from_path
    assert Blueprint.from_text(text) == load_text(text)
    assert Blueprint.from_stream(io.StringIO(text)) == load_text(text)
    assert from_path.source_path == path


def test_yaml_tags_that_build_python_objects_are_refused() -> None:
    with pytest.raises(BlueprintLoadError) as caught:
        load_text("version: !!python/object/apply:os.system ['echo pwned']\n")
    assert caught.value.code == "blueprint.yaml.invalid"


def test_merge_keys_are_not_duplicates() -> None:
    text = (
        "version: ai4j.agent/v1\nid: merged\nshared: &model {provider: openai-compatible, model: a}\n"
        "model:\n  <<: *model\n  model: b\n"
    )
    blueprint = load_text(text)
    assert blueprint.model is not None and (blueprint.model.provider, blueprint.model.model) == (
        "openai-compatible",
        "b",
    )


def test_fixtures_directory_exists() -> None:
    assert (FIXTURES / "load").is_dir()


def test_a_text_loaded_again_gives_the_same_blueprint_and_a_broken_one_fails_again() -> None:
    # Parsed documents are remembered by their text (engine/blueprint/_yaml.py): the second load
    # of a text is a copy of the first parse, and a text that does not parse is never remembered.
    text = "version: codeact.agent/v1\nextend: codeact-base\nid: again\nworkflow: {maxTurns: 3}\n"
    first, second = load_text(text), load_text(text)
    assert first.model_dump() == second.model_dump()
    assert first.workflow.max_turns == 3
    broken = "version: codeact.agent/v1\nid: [unclosed\n"
    for _ in range(2):
        with pytest.raises(BlueprintLoadError) as caught:
            load_text(broken)
        assert caught.value.code == "blueprint.yaml.invalid"


def test_each_parse_of_a_text_is_the_callers_own() -> None:
    from codeact.engine.blueprint._yaml import parse_yaml

    text = "version: codeact.agent/v1\nid: own\nlist: [1, 2]\nmap: {a: {b: 1}}\n"
    first = parse_yaml(text)
    first["list"].append(3)
    first["map"]["a"]["b"] = 2
    first["id"] = "changed"
    assert parse_yaml(text) == {"version": "codeact.agent/v1", "id": "own", "list": [1, 2], "map": {"a": {"b": 1}}}
