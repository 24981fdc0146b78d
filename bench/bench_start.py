"""Process start to the first model request of ``codeact run`` (issue 35), this tree against a baseline.

Cases, each a fresh ``codeact run`` process on a one-round blueprint:

* ``scripted``: the scripted model;
* ``url``: an OpenAI-compatible server at ``--base-url`` (the local test server, tests/engine/openai_server.py);
* ``local``: ``local/NAME`` on the embedded llama.cpp server, only when a model is in the cache, measured once
  (CPU heavy; the process is stopped at its first request, before the model generates);
* ``unknown_provider`` and ``missing_key``: configuration errors, start to exit;
* the floors: ``python_start_s`` (an empty interpreter) and ``cli_import_s`` (importing the CLI).

"First model request" is when ``ModelClient._call`` is first entered (after the route is resolved, litellm
imported when the route needs it, the local server started): a probe wraps it and writes the wall time to a
file. The baseline is the tree at ``BASELINE`` (the main of before this work), exported with ``git archive``
into a temporary folder, or the folder in ``CODEACT_BENCH_BASELINE``; both run in this run, with bytecode
caches written (one warm-up each), and the figure is the median of ``REPEAT`` runs. ``*_vs_baseline`` is the
baseline's time over this tree's.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BASELINE = "e50d406e018a473c8386e44b91f9b5e00fb40e79"
REPEAT = 3

_PROBE = """
import os, sys, time
_out = os.environ["CODEACT_BENCH_PROBE"]
from codeact.engine.model import client as _client
_original = _client.ModelClient._call
def _call(self, *args, **kwargs):
    if not os.path.exists(_out):
        with open(_out, "w") as f:
            f.write(repr(time.time()))
    return _original(self, *args, **kwargs)
_client.ModelClient._call = _call
from codeact.engine.cli import main
sys.argv = ["codeact", *sys.argv[1:]]
main()
"""

_REPLY = 'Thought: nothing to look up.\n```python\nsystem.finish("hello")\n```\n'
_BLUEPRINT = """version: codeact.agent/v1
id: start-bench
name: Start bench
model:
{model}
instructions:
  developer: Answer in one round.
toolkits:
  - ref: system
workflow:
  mode: codeact
  maxTurns: 2
  codeact:
    thought: inline
"""


def _baseline_tree(work: Path) -> Path | None:
    given = os.environ.get("CODEACT_BENCH_BASELINE")
    if given:
        return Path(given)
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", BASELINE], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    tree = work / "baseline"
    tree.mkdir()
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="tar")
    return tree


def _write(work: Path) -> dict[str, Path]:
    (work / "replies.yaml").write_text("- |\n" + "".join(f"  {line}\n" for line in _REPLY.splitlines()))
    models = {
        "scripted": "  provider: scripted\n  model: scripted/replies.yaml",
        "url": "  provider: openai-compatible\n  model: qwen2.5-coder",
        "unknown_provider": "  provider: opnai\n  model: gpt-4.1-mini",
        "missing_key": "  provider: openai\n  model: gpt-4.1-mini",
    }
    files = {}
    for name, model in models.items():
        files[name] = work / f"{name}.yaml"
        files[name].write_text(_BLUEPRINT.format(model=model))
    return files


def _env(tree: Path, probe_out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode cached
    env["PYTHONPATH"] = str(tree)
    env["CODEACT_BENCH_PROBE"] = str(probe_out)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def _once(tree: Path, work: Path, args: list[str], *, until_request: bool = False) -> tuple[float, float | None, int]:
    """One process: (seconds to exit, seconds to the first model request or None, exit code)."""
    probe_out = work / "probe.txt"
    probe_out.unlink(missing_ok=True)
    probe = work / "probe.py"
    probe.write_text(_PROBE)
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, str(probe), "run", *args, "--store", f"sqlite:///{work}/sessions.db", "--input", "hi"],
        env=_env(tree, probe_out), cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    if until_request:
        while process.poll() is None and not probe_out.exists():
            time.sleep(0.01)
        time.sleep(0.05)
        with_interrupt = process.poll() is None
        if with_interrupt:
            os.killpg(process.pid, signal.SIGINT)  # the CLI's Ctrl-C path stops the local server it started
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    else:
        process.wait(timeout=600)
    ended = time.time()
    first = float(probe_out.read_text()) - started if probe_out.exists() else None
    return ended - started, first, process.returncode


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _measure(trees: dict[str, Path], work: Path, files: dict[str, Path], url: str) -> dict[str, Any]:
    cases: dict[str, tuple[list[str], bool]] = {
        "scripted": ([str(files["scripted"])], True),
        "url": ([str(files["url"]), "--base-url", url], True),
        "unknown_provider": ([str(files["unknown_provider"])], False),
        "missing_key": ([str(files["missing_key"])], False),
    }
    figures: dict[str, Any] = {}
    for label, tree in trees.items():
        suffix = "" if label == "this" else "_baseline"
        _once(tree, work, cases["scripted"][0])  # warm-up: bytecode caches
        for case, (args, wants_request) in cases.items():
            runs = [_once(tree, work, args) for _ in range(REPEAT)]
            if wants_request:
                firsts = [first for _, first, _ in runs if first is not None]
                figures[f"{case}_first_request_s{suffix}"] = _median(firsts) if firsts else None
                figures[f"{case}_exit_code{suffix}"] = runs[-1][2]
            else:
                figures[f"{case}_exit_s{suffix}"] = _median([total for total, _, _ in runs])
                figures[f"{case}_exit_code{suffix}"] = runs[-1][2]
    return figures


def _floors(work: Path) -> dict[str, Any]:
    """What any ``codeact`` command pays in this tree: the interpreter, and the interpreter importing the CLI."""
    env = _env(REPO, work / "unused.txt")
    figures: dict[str, Any] = {}
    for key, code in (("python_start_s", "pass"), ("cli_import_s", "import codeact.engine.cli")):
        times = []
        for _ in range(REPEAT):
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            times.append(time.perf_counter() - started)
        figures[key] = _median(times)
    return figures


def _local(tree: Path, work: Path) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))
    from codeact.engine.model.local.cache import cached_models

    models = cached_models()
    if not models:
        return {"local_first_request_s": "skipped: no model in the cache (codeact models pull NAME)"}
    name = models[0].name
    blueprint = work / "local.yaml"
    blueprint.write_text(_BLUEPRINT.format(model=f"  provider: local\n  model: local/{name}"))
    _, first, _ = _once(tree, work, [str(blueprint)], until_request=True)
    return {"local_model": name, "local_first_request_s": round(first, 3) if first is not None else None}


def _ratios(figures: dict[str, Any]) -> None:
    for key in [k for k in figures if k.endswith("_s_baseline")]:
        mine, theirs = figures.get(key.removesuffix("_baseline")), figures[key]
        if isinstance(mine, float) and isinstance(theirs, float) and mine > 0:
            figures[key.removesuffix("_s_baseline") + "_vs_baseline"] = round(theirs / mine, 1)


def run() -> dict[str, Any]:
    """Measure and return the figures."""
    sys.path.insert(0, str(REPO))
    from tests.engine.openai_server import serve

    load = os.getloadavg()[0]  # the figures scale with it: 2 cores shared with other jobs give 3-6x idle times
    with tempfile.TemporaryDirectory(prefix="codeact-bench-start-") as folder:
        work = Path(folder)
        files = _write(work)
        trees = {"this": REPO}
        baseline = _baseline_tree(work)
        if baseline is not None:
            trees["baseline"] = baseline
        responder: Callable[[dict[str, Any]], str] = lambda body: _REPLY  # noqa: E731
        with serve() as server:
            server.responder = responder
            figures = _measure(trees, work, files, server.base_url)
        figures.update(_floors(work))
        figures.update(_local(REPO, work))
    figures["baseline_commit"] = (
        BASELINE if baseline is not None and "CODEACT_BENCH_BASELINE" not in os.environ else None
    )
    figures["load_average_1min"] = round((load + os.getloadavg()[0]) / 2, 1)
    _ratios(figures)
    return figures


if __name__ == "__main__":
    print(run())
