"""Artifacts: files in ``outputs/`` come back with the round; caps refuse with a note; the host checks all."""

from __future__ import annotations

import base64

import pytest

from codeact.sandbox import Limits, SubprocessSandbox
from codeact.sandbox.artifacts import Artifact, artifacts_from_answer, sniff_mime
from codeact.sandbox.policy import Policy

PLAIN = Policy(restricted=False).widen("os")


async def test_new_and_changed_files_come_back_once() -> None:
    async with SubprocessSandbox(policy=PLAIN) as sb:
        first = await sb.execute(
            "import os\n"
            "open('outputs/report.md', 'w').write('# Report\\n')\n"
            "os.makedirs('outputs/tables', exist_ok=True)\n"
            "open('outputs/tables/t.json', 'w').write('[1, 2]')\n"
            "open('scratch.txt', 'w').write('not an artifact')\n"
        )
        unchanged = await sb.execute("x = 1")
        changed = await sb.execute("open('outputs/report.md', 'a').write('more\\n')")
    assert first.status == "ok", first.error
    assert [(a.name, a.mime, a.size, a.data) for a in first.artifacts] == [
        ("report.md", "text/markdown", 9, b"# Report\n"),
        ("tables/t.json", "application/json", 6, b"[1, 2]"),
    ]
    assert unchanged.artifacts == ()
    assert [(a.name, a.data) for a in changed.artifacts] == [("report.md", b"# Report\nmore\n")]
    assert first.to_json()["artifacts"][0] == {"name": "report.md", "mime": "text/markdown", "size": 9, "refused": None}


async def test_over_the_caps_is_refused_with_a_note_never_dropped() -> None:
    limits = Limits(artifact_bytes=1000, round_artifact_bytes=1500)
    async with SubprocessSandbox(policy=PLAIN, limits=limits) as sb:
        result = await sb.execute(
            "open('outputs/a.bin', 'wb').write(b'a' * 800)\n"
            "open('outputs/b.bin', 'wb').write(b'b' * 800)\n"
            "open('outputs/c.bin', 'wb').write(b'c' * 5000)\n"
        )
    assert result.status == "ok", result.error
    got = {a.name: a for a in result.artifacts}
    assert got["a.bin"].refused is None and got["a.bin"].data == b"a" * 800
    assert got["b.bin"].refused == "the round's artifacts would exceed the 1500-byte limit per round"
    assert got["b.bin"].data == b"" and got["b.bin"].size == 800
    assert got["c.bin"].refused == "5000 bytes is over the 1000-byte limit per file"


async def test_symlinks_and_special_files_are_not_artifacts() -> None:
    async with SubprocessSandbox(policy=PLAIN) as sb:
        result = await sb.execute("import os\nos.symlink('/etc/hostname', 'outputs/host')\nos.mkfifo('outputs/fifo')\n")
    assert result.status == "ok", result.error
    assert result.artifacts == ()


def _entry(name: str, data: bytes) -> dict[str, object]:
    return {"name": name, "size": len(data), "data": base64.b64encode(data).decode()}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("../escape.txt", id="parent"),
        pytest.param("/etc/passwd", id="absolute"),
        pytest.param("a/../../b", id="nested-parent"),
        pytest.param("bad\nname", id="control-char"),
        pytest.param("", id="empty"),
    ],
)
def test_the_host_drops_names_outside_outputs(name: str) -> None:
    assert artifacts_from_answer([_entry(name, b"x")], file_bytes=100, round_bytes=100) == ()


def test_the_host_enforces_its_own_caps_and_decides_the_mime_type() -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 10
    got = artifacts_from_answer(
        [
            _entry("chart.txt", png),  # content wins over the name
            _entry("fake.png", b"not a png"),  # a binary type the content does not have
            _entry("big.csv", b"x" * 200),  # the runtime lied about the cap
            {"name": "broken.bin", "size": 3, "data": "%%%"},
            {"name": "over.bin", "size": 10**9, "refused": "over the cap"},
            "garbage",
        ],
        file_bytes=100,
        round_bytes=1000,
    )
    assert [(a.name, a.mime, a.refused) for a in got] == [
        ("chart.txt", "image/png", None),
        ("fake.png", "application/octet-stream", None),
        ("big.csv", "text/csv", "200 bytes is over the 100-byte limit per file"),
        ("broken.bin", "application/octet-stream", "malformed content"),
        ("over.bin", "application/octet-stream", "over the cap"),
    ]


def test_artifact_json_round_trip() -> None:
    art = Artifact(name="a.png", mime="image/png", size=3, data=b"abc")
    assert Artifact.from_json(art.to_json(with_data=True)) == art
    assert sniff_mime("notes.txt", b"hello") == "text/plain"
