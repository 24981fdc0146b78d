"""Declared environments: build time (cold), start-up on a cache hit, and ``import numpy`` in a sandbox.

Measured in one run (2-core shared machine: paired measurements alternate and report medians):

* ``cold_build_s``: building a fresh environment of ``sympy`` (sympy + mpmath, ~70 MB installed)
  into an empty cache: host pip for the subprocess backend, and (``docker_cold_build_s``) host pip
  for the image's Python plus ``docker build`` on the base image. ``datascience_build_s`` is the
  recorded build time of the ``datascience`` preset in the stable cache (built by the tests, or now).
* ``hit_lookup_ms``: :func:`codeact.sandbox.env.ensure_environment` on a cache hit (hash, stat, utime).
* ``start_*_ms``: lookup + ``SubprocessSandbox.start()`` (runtime spawned, connected, authenticated)
  with the ``datascience`` environment mounted, against the same start with no packages, alternated
  ``REPEAT`` times; ``start_added_ms`` is the median difference (goal: <= 5 ms), ``start_ratio`` the
  ratio of the medians. ``docker_start_*`` is the same for the Docker backend (the environment's
  image against the base image).
* ``import_numpy_*_ms``: ``import numpy`` timed inside the first round of a warm sandbox (its
  runtime already started) against a fresh plain CPython (``python -I -S`` with the same package
  directory on ``sys.path``), medians of ``REPEAT``.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from codeact.sandbox import DockerSandbox, SubprocessSandbox
from codeact.sandbox.env import MOUNT_POINT, EnvSpec, cache_root, ensure_environment, prune_environments
from codeact.sandbox.policy import Policy

REPEAT = 15
PRESET = EnvSpec(preset="datascience")
_IMPORT = "import time\n_t = time.perf_counter()\nimport numpy\ntook_ms = (time.perf_counter() - _t) * 1000\n"


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _cold_build(backend: str) -> float:
    old = os.environ.get("CODEACT_ENV_CACHE")
    with tempfile.TemporaryDirectory(prefix="codeact-bench-envs-") as tmp:
        os.environ["CODEACT_ENV_CACHE"] = tmp
        try:
            started = time.perf_counter()
            ensure_environment(EnvSpec(packages=("sympy",)), backend=backend, progress=lambda _: None)  # type: ignore[arg-type]
            elapsed = time.perf_counter() - started
            prune_environments()
        finally:
            if old is None:
                os.environ.pop("CODEACT_ENV_CACHE", None)
            else:
                os.environ["CODEACT_ENV_CACHE"] = old
    return round(elapsed, 2)


async def _start_ms(make: Any, *, with_env: bool) -> float:
    started = time.perf_counter()
    env = ensure_environment(PRESET, backend="subprocess") if with_env else None
    box = make(env)
    await box.start()
    elapsed = (time.perf_counter() - started) * 1000
    await box.aclose()
    return elapsed


async def _subprocess_figures() -> dict[str, Any]:
    env = ensure_environment(PRESET, backend="subprocess")
    assert env is not None and env.site is not None  # noqa: S101 - the preset declares packages
    policy = Policy(restricted=False).widen("time", *env.modules)

    def make(e: Any) -> SubprocessSandbox:
        return SubprocessSandbox(policy=policy, env_dir=str(e.site) if e is not None else None)

    lookups = []
    for _ in range(200):
        t = time.perf_counter()
        ensure_environment(PRESET, backend="subprocess")
        lookups.append((time.perf_counter() - t) * 1000)
    await _start_ms(make, with_env=False)  # warm the page cache and the bwrap self-test
    plain, declared, added = [], [], []
    for i in range(REPEAT):
        # Alternate which one goes first, so a drift in the machine's load does not favour either.
        if i % 2:
            b = await _start_ms(make, with_env=True)
            a = await _start_ms(make, with_env=False)
        else:
            a = await _start_ms(make, with_env=False)
            b = await _start_ms(make, with_env=True)
        plain.append(a)
        declared.append(b)
        added.append(b - a)
    in_sandbox = []
    for _ in range(REPEAT):
        async with make(env) as box:
            await box.start()
            result = await box.execute(_IMPORT)
            in_sandbox.append(float(result.variables["took_ms"]))
    return {
        "hit_lookup_ms": _median(lookups),
        "start_no_packages_ms": _median(plain),
        "start_datascience_ms": _median(declared),
        "start_added_ms": _median(added),
        "start_ratio": round(statistics.median(declared) / statistics.median(plain), 3),
        "import_numpy_sandbox_ms": _median(in_sandbox),
        "import_numpy_cpython_ms": _median([_plain_import_ms(str(env.site)) for _ in range(REPEAT)]),
    }


def _plain_import_ms(site: str) -> float:
    code = f"import sys; sys.path.append({site!r})\n{_IMPORT}print(took_ms)"
    out = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


async def _docker_figures() -> dict[str, Any]:
    env = ensure_environment(PRESET, backend="docker")
    assert env is not None and env.image is not None  # noqa: S101 - the preset declares packages
    policy = Policy(restricted=False).widen("time", *env.modules)

    async def start(with_env: bool) -> float:
        started = time.perf_counter()
        if with_env:
            e = ensure_environment(PRESET, backend="docker")
            assert e is not None  # noqa: S101
            box = DockerSandbox(policy=policy, pool_size=0, image=e.image, sys_path=(MOUNT_POINT,))
        else:
            box = DockerSandbox(policy=policy, pool_size=0)
        await box.start()
        elapsed = (time.perf_counter() - started) * 1000
        await box.aclose()
        return elapsed

    await start(False)
    plain, declared = [], []
    for _ in range(5):
        plain.append(await start(False))
        declared.append(await start(True))
    imports = []
    for _ in range(3):
        async with DockerSandbox(policy=policy, pool_size=0, image=env.image, sys_path=(MOUNT_POINT,)) as box:
            await box.start()
            result = await box.execute(_IMPORT)
            imports.append(float(result.variables["took_ms"]))
    return {
        "docker_start_no_packages_ms": _median(plain),
        "docker_start_datascience_ms": _median(declared),
        "docker_start_ratio": round(statistics.median(declared) / statistics.median(plain), 3),
        "docker_import_numpy_ms": _median(imports),
    }


def _recorded_build_s(key: str) -> float | None:
    try:
        data = json.loads((cache_root() / key / "env.json").read_text())
    except (OSError, ValueError):
        return None
    value = data.get("build_s")
    return float(value) if isinstance(value, int | float) else None


def run() -> dict[str, Any]:
    """Every figure of this module (see the module docstring)."""
    figures: dict[str, Any] = {"cold_build_s": _cold_build("subprocess")}
    host = ensure_environment(PRESET, backend="subprocess")
    figures["datascience_build_s"] = _recorded_build_s(host.key) if host is not None else None
    figures.update(asyncio.run(_subprocess_figures()))
    try:
        figures["docker_cold_build_s"] = _cold_build("docker")
        docker_env = ensure_environment(PRESET, backend="docker")
        figures["datascience_docker_build_s"] = _recorded_build_s(docker_env.key) if docker_env is not None else None
        figures.update(asyncio.run(_docker_figures()))
    except Exception as exc:  # no Docker engine: the subprocess figures still count
        figures["docker_error"] = f"{type(exc).__name__}: {exc}"
    return figures


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
    sys.exit(0)
