"""The host-kill test of issue 34, shared by the suite (test_durable_calls.py) and ``make bench`` (bench_durable.py).

One trial: a real ``codeact run`` whose round 1 makes five side-effecting calls in sequence
(``ledger.append``, tests/engine/ledger_toolkit.py) and then blocks, is SIGKILLed (at a random instant
in that window, or at a chosen point by the toolkit itself); the session is then resumed the documented
way (``codeact run --session`` again) by a model that does what the resumed prompt says
(:func:`follow_the_prompt`): it skips the calls listed as completed, checks the ones in flight
(``ledger.has``) before repeating them, and makes the rest. Counted: completed calls missing from the
resumed prompt (an effect in the ledger before the resume whose call the prompt lists neither as
completed nor as in flight), side effects done twice, and resumes that failed or left an item undone.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.engine.openai_server import OpenAIServer, serve

CODEACT = str(Path(sys.executable).parent / "codeact")
TOOLKIT = f"{Path(__file__).parent / 'ledger_toolkit.py'}:Ledger"
ITEMS = tuple(f"i{n}" for n in range(5))
ROUND_1 = (
    "I record the five entries, then wait for the warehouse.\n"
    "```python\nfor n in range(5):\n    ledger.append(item=f'i{n}')\nledger.wait()\n```"
)
BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: durable-agent
toolkits:
  - ref: system
  - ref: ledger
workflow: {maxTurns: 3, codeact: {thought: 'off'}}
"""
_COMPLETED = re.compile(r'^- ledger\.append\(item="(i\d)"\) -> ', re.M)
_IN_FLIGHT = re.compile(r'^- ledger\.append\(item="(i\d)"\) \[call id ([^\]]+)\]', re.M)


@dataclass(frozen=True, kw_only=True)
class Resumed:
    """What the resumed prompt said about round 1 (None: it reported no interrupted round)."""

    completed: tuple[str, ...]
    in_flight: dict[str, str]  # item -> call id
    interrupted: bool


def read_prompt(text: str) -> Resumed:
    """The three groups of the resumed prompt's interrupted round, as items."""
    return Resumed(
        completed=tuple(_COMPLETED.findall(text)),
        in_flight=dict(_IN_FLIGHT.findall(text)),
        interrupted="Round 1 was interrupted" in text,
    )


def prompt_text(body: Mapping[str, Any]) -> str:
    """The whole prompt of a chat request."""
    return "\n".join(str(m.get("content")) for m in body.get("messages", []))


def follow_the_prompt(body: Mapping[str, Any]) -> str:
    """The reply of a model that does what the resumed prompt says (skip completed, check in flight, do the rest)."""
    said = read_prompt(prompt_text(body))
    lines = []
    for item in ITEMS:
        if item in said.completed:
            continue
        if item in said.in_flight:
            lines.append(f"if not ledger.has(item='{item}'):\n    ledger.append(item='{item}')")
        else:
            lines.append(f"ledger.append(item='{item}')")
    lines.append("system.finish('resumed')")
    return "I continue from what the interrupted round did.\n```python\n" + "\n".join(lines) + "\n```"


def rerun_the_program(body: Mapping[str, Any]) -> str:
    """The reply of a model that runs round 1's program again (its calls get the same ids: an idempotent toolkit)."""
    code = "for n in range(5):\n    ledger.append(item=f'i{n}')\nsystem.finish('resumed')"
    return f"I run the same program again.\n```python\n{code}\n```"


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One kill-and-resume: what the ledger and the resumed prompt showed."""

    before: tuple[tuple[str, str], ...]  # ledger lines (item, call id) when the host died
    after: tuple[tuple[str, str], ...]  # ledger lines after the resumed run
    said: Resumed
    resume_rc: int
    resume_err: str
    prompt: str

    @property
    def lost(self) -> list[str]:
        """Effects made before the kill whose call the resumed prompt lists neither as completed nor in flight."""
        done = {item for item, _ in self.before}
        return sorted(i for i in done if i not in self.said.completed and i not in self.said.in_flight)

    @property
    def duplicated(self) -> list[str]:
        """Items appended more than once."""
        items = [item for item, _ in self.after]
        return sorted({i for i in items if items.count(i) > 1})

    @property
    def failed(self) -> bool:
        """The resumed run failed, or left an item undone."""
        return self.resume_rc != 0 or {item for item, _ in self.after} != set(ITEMS)


def _lines(path: Path) -> tuple[tuple[str, str], ...]:
    if not path.exists():
        return ()
    return tuple(tuple(line.split("\t", 1)) for line in path.read_text().splitlines())  # type: ignore[misc]


def _env(directory: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("CODEACT_STORE", "CODEACT_MODEL", "CODEACT_PROFILE")}
    return {
        **base,
        "CODEACT_HOME": str(directory / "home"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "OPENAI_API_KEY": "sk-test",
        "LEDGER_FILE": str(directory / "ledger.txt"),
        **extra,
    }


def run_args(directory: Path, server: OpenAIServer, store: str, session: str, text: str, *extra: str) -> list[str]:
    """``codeact run`` of the ledger agent."""
    agent = directory / "agent.yaml"
    agent.write_text(BLUEPRINT)
    return [
        CODEACT, "run", str(agent), "--toolkit", TOOLKIT, "--model", "openai/test-model", "--base-url",
        server.base_url, "--store", store, "--session", session, "--input", text, *extra,
    ]  # fmt: skip


def trial(
    directory: Path,
    server: OpenAIServer,
    store: str,
    *,
    kill: str = "",
    at: float | None = None,
    delay: float = 0.0,
    sandbox: tuple[str, ...] = (),
    rerun: bool = False,
    idempotent: bool | None = None,
    session: str = "D",
) -> Trial:
    """Run round 1, kill the host (``kill``: the toolkit does; ``at``: seconds after the first call), resume.

    ``rerun``: the resumed model runs round 1's program again (else it follows the prompt); ``idempotent``:
    the ledger deduplicates on the call id when resumed (default: when ``rerun``).

    Raises:
        AssertionError: the first run ended on its own, or was not killed.
    """
    ledger = directory / "ledger.txt"
    env = _env(directory, LEDGER_KILL=kill, LEDGER_DELAY=str(delay))
    server.responder = None
    server.push(ROUND_1)
    run = subprocess.Popen(
        run_args(directory, server, store, session, "record the five entries", *sandbox),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        if at is not None:
            begin = Path(f"{ledger}.begin")
            deadline = time.monotonic() + 120
            while not begin.exists() and run.poll() is None:
                if time.monotonic() > deadline:
                    raise AssertionError("the first call never came")
                time.sleep(0.002)
            time.sleep(at)  # not a synchronisation: the random instant of the kill
            run.send_signal(signal.SIGKILL)
        out, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    if run.returncode != -signal.SIGKILL:
        raise AssertionError(f"the first run was not killed ({run.returncode}):\n{out}\n{err}")
    before = _lines(ledger)
    server.responder = rerun_the_program if rerun else follow_the_prompt
    dedupe = rerun if idempotent is None else idempotent
    resume_env = _env(directory, LEDGER_IDEMPOTENT="1" if dedupe else "0")
    resumed = subprocess.run(
        run_args(directory, server, store, session, "continue", *sandbox),
        env=resume_env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    posts = [r for r in server.requests if r.method == "POST"]
    text = prompt_text(posts[-1].body) if posts else ""
    return Trial(
        before=before,
        after=_lines(ledger),
        said=read_prompt(text),
        resume_rc=resumed.returncode,
        resume_err=resumed.stderr,
        prompt=text,
    )


@contextmanager
def _store(kind: str, directory: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{directory / 'sessions.db'}"
        return
    url = os.environ["CODEACT_TEST_REDIS_URL"]
    store = url + ("&" if "?" in url else "?") + f"prefix=durable-{os.getpid()}-{directory.name}"
    try:
        yield store
    finally:
        asyncio.run(_forget(store, "D"))


async def _forget(url: str, session: str) -> None:
    from codeact.engine.store import open_store

    opened = open_store(url)
    try:
        await opened.delete_session(session)
        await opened.clear_pending(session)
    finally:
        await opened.close()


def kill_trials(trials: int, *, kinds: tuple[str, ...] = ("sqlite", "redis"), seed: int = 34) -> dict[str, Any]:
    """``trials`` random-instant kills per store (``make bench``): trials, lost, duplicated, resume failures."""
    rng = random.Random(seed)
    out: dict[str, Any] = {}
    for kind in kinds:
        if kind == "redis" and not os.environ.get("CODEACT_TEST_REDIS_URL"):
            continue
        lost = duplicated = failures = in_flight = 0
        started = time.perf_counter()
        with serve() as server:
            for n in range(trials):
                with tempfile.TemporaryDirectory(prefix="durable-") as tmp, _store(kind, Path(tmp)) as store:
                    # Half the trials at a random instant in the five calls' window, half k ms after the k-th call.
                    if n % 2 == 0:
                        result = trial(Path(tmp), server, store, at=rng.uniform(0, 0.12), delay=0.01)
                    else:
                        k = rng.randrange(5)
                        result = trial(Path(tmp), server, store, kill=f"ms:i{k}:{rng.uniform(0, 20):.1f}")
                    lost += len(result.lost)
                    duplicated += len(result.duplicated)
                    failures += result.failed
                    in_flight += len(result.said.in_flight)
                    if result.lost or result.duplicated or result.failed:
                        print(
                            json.dumps(
                                {
                                    "kind": kind,
                                    "trial": n,
                                    "lost": result.lost,
                                    "duplicated": result.duplicated,
                                    "rc": result.resume_rc,
                                    "err": result.resume_err[-500:],
                                }
                            ),
                            file=sys.stderr,
                        )
        out[kind] = {
            "trials": trials,
            "lost": lost,
            "duplicated": duplicated,
            "resume_failures": failures,
            "in_flight_reported": in_flight,
            "seconds_per_trial": round((time.perf_counter() - started) / max(1, trials), 2),
        }
    return out
