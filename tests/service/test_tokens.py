"""API tokens: the format of $CODEACT_API_TOKENS and --tokens-file, scopes, and what a message may show."""

from __future__ import annotations

from pathlib import Path

import pytest

from codeact.engine.service import TOKENS_ENV, ServiceError, Tokens


def test_entries_scope_tokens_to_runners() -> None:
    tokens = Tokens.parse(
        "admin-token-123  # every runner\nalice-token-1=devops,reviewer; bob-token-12=devops\n", source="test"
    )
    assert len(tokens) == 3
    admin, alice, bob = (tokens.check(t) for t in ("admin-token-123", "alice-token-1", "bob-token-12"))
    assert admin is not None and admin.runners is None and admin.allows("anything")
    assert alice is not None and alice.runners == frozenset({"devops", "reviewer"})
    assert bob is not None and bob.allows("devops") and not bob.allows("reviewer")
    assert tokens.check("admin-token-12") is None
    assert tokens.check("") is None


def test_a_token_named_twice_gets_the_union_and_star_means_every_runner() -> None:
    tokens = Tokens.parse("tok-abcdefgh=a\ntok-abcdefgh=b\nother-token=*", source="test")
    first, other = tokens.check("tok-abcdefgh"), tokens.check("other-token")
    assert first is not None and first.runners == frozenset({"a", "b"})
    assert other is not None and other.runners is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("short", id="too-short"),
        pytest.param("tok=en-with-equals=a", id="equals-in-scope"),
        pytest.param("good-token-1=", id="empty-scope"),
        pytest.param("spaces are separators but é-is-not-allowed", id="bad-character"),
    ],
)
def test_a_malformed_entry_is_named_by_position_without_echoing_secrets(text: str) -> None:
    with pytest.raises(ServiceError) as caught:
        Tokens.parse(text, source="$CODEACT_API_TOKENS")
    assert caught.value.code == "service.invalid_token_config"
    assert "of $CODEACT_API_TOKENS is malformed" in caught.value.message
    for word in text.split():
        if len(word) >= 8:
            assert word not in caught.value.message


def test_load_merges_the_environment_and_files(tmp_path: Path) -> None:
    file = tmp_path / "tokens"
    file.write_text("# operators\nfile-token-1=reviewer\nenv-token-12=reviewer\n")
    tokens = Tokens.load(environ={TOKENS_ENV: "env-token-12=devops"}, files=[file])
    scope = tokens.check("env-token-12")
    assert scope is not None and scope.runners == frozenset({"devops", "reviewer"})
    assert tokens.check("file-token-1") is not None
    assert len(Tokens.load(environ={})) == 0


def test_an_unreadable_tokens_file_says_which(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match=r"cannot read tokens file '.*missing': No such file"):
        Tokens.load(environ={}, files=[tmp_path / "missing"])


def test_the_fingerprint_names_a_token_without_revealing_it() -> None:
    scope = Tokens.parse("a-secret-token-value", source="test").check("a-secret-token-value")
    assert scope is not None
    assert scope.fingerprint.startswith("sha256:") and len(scope.fingerprint) == 19
    assert "secret" not in scope.fingerprint
