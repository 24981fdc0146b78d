"""A worker's folder of unpacked blueprints does not outlive it, however it ends.

Real processes in a temp dir of the test's own (``TMPDIR``): each unpacks a packed blueprint folder
through the worker's ``_unpacked``, then either ends with ``os._exit`` (no atexit handler runs, as
after a SIGKILL) or stays alive. The next process's first unpack removes the folders of dead owners,
``codeact sandbox gc --json`` reports and removes them too, and neither touches a live process's folder
nor an untagged one of an older version; a normal exit removes the process's own folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from codeact.engine.blueprint import pack_blueprint
from codeact.sandbox.leftovers import BLUEPRINTS_DIR_PREFIX, tag_alive

CODEACT = str(Path(sys.executable).parent / "codeact")
WAIT_S = 60.0

# argv: the pack's JSON file, then "exit" (os._exit once unpacked) or "live" (until stdin closes, then a normal exit).
UNPACK = """
import json, os, sys
from codeact.engine.queue._task import _unpacked
path = _unpacked(json.loads(open(sys.argv[1], encoding="utf-8").read()))
print(path, flush=True)
if sys.argv[2] == "exit":
    os._exit(0)
sys.stdin.read()
"""


def _start(pack: Path, how: str, env: dict[str, str]) -> subprocess.Popen[str]:
    argv = [sys.executable, "-c", UNPACK, str(pack), how]
    return subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _unpack_and_exit(pack: Path, env: dict[str, str]) -> tuple[int, Path]:
    proc = _start(pack, "exit", env)
    out, _ = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 0
    return proc.pid, Path(out.strip())


def _folders(tmp: Path) -> dict[str, Path]:
    """Owner pid ("" without a tag) -> blueprints folder in ``tmp``."""
    found: dict[str, Path] = {}
    for path in tmp.glob(f"{BLUEPRINTS_DIR_PREFIX}*"):
        tag = path.name.removeprefix(BLUEPRINTS_DIR_PREFIX).rpartition("-")[0]
        found[tag.partition(".")[0]] = path
    return found


def test_a_dead_workers_folder_goes_with_the_next_unpack_and_gc_a_live_ones_stays(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "replies.yaml").parent.mkdir()
    (project / "replies.yaml").write_text('["done"]\n')
    (project / "agent.yaml").write_text(
        "version: codeact.agent/v1\nextend: codeact-base\nid: leftover\n"
        "model: {provider: scripted, model: scripted/replies.yaml}\n"
    )
    pack = tmp_path / "pack.json"
    pack.write_text(json.dumps(pack_blueprint(project / "agent.yaml")))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}

    # A process that ends without atexit handlers leaves its folder, named after it, with the blueprint.
    dead_pid, dead_blueprint = _unpack_and_exit(pack, env)
    dead_folder = _folders(tmp)[str(dead_pid)]
    assert dead_blueprint.parent.parent == dead_folder
    assert (dead_blueprint.parent / "replies.yaml").read_text() == '["done"]\n'
    assert not tag_alive(dead_folder.name.removeprefix(BLUEPRINTS_DIR_PREFIX).rpartition("-")[0])

    # (a) The next process's first unpack removes it; it makes its own.
    with _start(pack, "live", env) as live:  # leaving the block closes its stdin: a normal exit
        assert live.stdout is not None
        live_blueprint = Path(live.stdout.readline().strip())
        live_folder = _folders(tmp)[str(live.pid)]
        assert live_blueprint.is_file() and live_blueprint.parent.parent == live_folder
        assert not dead_folder.exists()

        # Another process that dies: its unpack kept the live process's folder.
        gone_pid, _ = _unpack_and_exit(pack, env)
        gone_folder = _folders(tmp)[str(gone_pid)]
        assert set(_folders(tmp)) == {str(live.pid), str(gone_pid)}

        # (b) gc reports and removes the dead owner's folder; it keeps the live one and an untagged one
        # (an older version's worker may still be running with it).
        untagged = tmp / f"{BLUEPRINTS_DIR_PREFIX}02obxkuj"
        untagged.mkdir()
        os.utime(untagged, (0, 0))
        gc = subprocess.run(
            [CODEACT, "sandbox", "gc", "--json"], env=env, capture_output=True, text=True, timeout=WAIT_S, check=False
        )
        assert gc.returncode in (0, 3), gc.stderr  # 3: the Docker engine failed; the directories were collected
        removed = [entry for entry in json.loads(gc.stdout) if entry["kind"] == "blueprints_dir"]
        assert removed == [
            {
                "kind": "blueprints_dir",
                "id": str(gone_folder),
                "name": "",
                "session": "",
                "host_pid": str(gone_pid),
                "status": "stale",
            }
        ]
        assert _folders(tmp) == {str(live.pid): live_folder, "": untagged}
        assert live_blueprint.is_file()
        assert live.stdin is not None
        live.stdin.close()
        live.wait(timeout=WAIT_S)

    # A normal exit removes the process's own folder (atexit).
    assert live.returncode == 0
    assert _folders(tmp) == {"": untagged}
