"""Building an environment: pip on the host, and (docker) an image on top of the base sandbox image.

Subprocess backend: ``pip install --target <tmp>/site`` with the host's interpreter and index
configuration; the directory is later mounted read-only into bubblewrap at ``/opt/codeact/env``.

Docker backend: the running container has no network and the base image has no pip, so the host
installs the wheels for the IMAGE's interpreter and platform (``pip install --target --platform
... --python-version ... --only-binary=:all:``) and ``docker build`` copies the directory into an
image ``codeact-sandbox-env:<key>`` built ``FROM`` the base sandbox image.

Either way the entry is assembled in ``<cache>/.build-<key>-*`` and renamed into place only when
complete; a failure removes it, so nothing half-built is cached.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Final

from codeact.sandbox.env._cache import ENV_FILE, SITE_DIR, USED_FILE, cache_root
from codeact.sandbox.env._recipe import Recipe
from codeact.sandbox.errors import EnvironmentBuildError

__all__ = ["ENV_IMAGE_REPOSITORY", "MOUNT_POINT", "build_entry", "docker_base_info", "host_base_info"]

Progress = Callable[[str], None]

MOUNT_POINT: Final = "/opt/codeact/env"
ENV_IMAGE_REPOSITORY: Final = "codeact-sandbox-env"
_PIP_TIMEOUT_S: Final = 1800
_PROGRESS_PREFIXES: Final = ("Collecting", "Downloading", "Installing", "Successfully", "Processing", "Building")
_PROBE: Final = (
    "import os, platform, sys; "
    "libc = os.confstr('CS_GNU_LIBC_VERSION') or ''; "
    'print(f\'{sys.version_info[0]}.{sys.version_info[1]} {platform.machine()} {libc.replace(" ", "")}\')'
)


def _platform_tag(machine: str, libc: str) -> str:
    return f"linux-{machine}-{libc or 'unknown'}"


@cache
def host_base_info() -> tuple[str, str]:
    """``(python MAJOR.MINOR, platform)`` of the host interpreter the subprocess sandbox runs."""
    libc = (os.confstr("CS_GNU_LIBC_VERSION") or "").replace(" ", "")
    return f"{sys.version_info[0]}.{sys.version_info[1]}", _platform_tag(platform.machine(), libc)


_docker_bases: dict[str, tuple[str, str]] = {}


def docker_base_info(image: str) -> tuple[str, str]:
    """``(python MAJOR.MINOR, platform)`` of the base image's interpreter (asked once, then cached on disk).

    Raises:
        EnvironmentBuildError: The image cannot be run (not built, Docker unreachable).
    """
    if image in _docker_bases:
        return _docker_bases[image]
    note = cache_root() / f".base-{image.replace(':', '_').replace('/', '_')}.json"
    with contextlib.suppress(OSError, ValueError, TypeError):
        python, plat = json.loads(note.read_text(encoding="utf-8"))
        _docker_bases[image] = (str(python), str(plat))
        return _docker_bases[image]
    try:
        out = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", image, "python3", "-I", "-S", "-c", _PROBE],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentBuildError(
            f"cannot ask the Docker base image {image!r} for its Python version: {exc}; is Docker running?"
        ) from None
    fields = out.stdout.split()
    if out.returncode != 0 or len(fields) != 3:
        raise EnvironmentBuildError(
            f"cannot ask the Docker base image {image!r} for its Python version: "
            f"{(out.stderr or out.stdout).strip()[-300:] or 'no output'}; build it with `codeact sandbox image build`"
        )
    info = (fields[0], _platform_tag(fields[1], fields[2]))
    with contextlib.suppress(OSError):
        note.write_text(json.dumps(list(info)), encoding="utf-8")
    _docker_bases[image] = info
    return info


def _wheel_platforms(plat: str) -> list[str]:
    """The pip ``--platform`` values a ``linux-<machine>-glibcX.Y`` interpreter accepts (newest first)."""
    match = re.fullmatch(r"linux-(?P<machine>[A-Za-z0-9_]+)-glibc(?P<major>\d+)\.(?P<minor>\d+)", plat)
    if match is None:
        raise EnvironmentBuildError(
            f"cannot tell which wheels fit the Docker image's platform {plat!r} (a glibc Linux is needed)"
        )
    machine, minor = match["machine"], int(match["minor"])
    tags = [f"manylinux_2_{v}_{machine}" for v in range(minor, 4, -1)]
    tags += [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return tags


def _pip_command(recipe: Recipe, site: Path, *, index_url: str | None) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--target",
        str(site),
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--progress-bar",
        "off",
    ]
    if index_url is not None:
        # An explicit index replaces the host's configuration (find-links, extra indexes) entirely.
        argv += ["--isolated", "--index-url", index_url, "--retries", "1", "--timeout", "10"]
    if recipe.backend == "docker":
        argv += ["--only-binary=:all:", "--implementation", "cp", "--python-version", recipe.python]
        argv += ["--abi", "cp" + recipe.python.replace(".", "")]
        for tag in _wheel_platforms(recipe.platform):
            argv += ["--platform", tag]
    argv += ["--", *recipe.requirements]
    return argv


def _pip_failure(recipe: Recipe, returncode: int, lines: list[str]) -> EnvironmentBuildError:
    text = "\n".join(lines)
    package = ""
    for pattern in (
        r"No matching distribution found for (\S+)",
        r"satisfies the requirement (\S+)",
        r"Failed building wheel for (\S+)",
        r"Failed to build (\S+)",
        r"Invalid requirement: '?([^'\s]+)",
    ):
        found = re.search(pattern, text)
        if found:
            package = found.group(1).rstrip(",;")
            break
    errors = [line.strip() for line in lines if line.lstrip().startswith(("ERROR:", "error:", "×"))]
    network = [line.strip() for line in lines if re.search(r"(?i)connection|network|resolve|timed out", line)]
    shown = list(dict.fromkeys(network[-2:] + errors[-4:])) or [line.strip() for line in lines[-4:]]
    pip_message = " | ".join(shown)[-1500:] or f"pip exited with status {returncode}"
    where = "the host" if recipe.backend == "subprocess" else f"the Docker image (Python {recipe.python})"
    subject = f"package {package!r}" if package else f"the packages {', '.join(recipe.requirements)}"
    unreachable = "the package index could not be reached; " if network else ""
    return EnvironmentBuildError(
        f"cannot install {subject} into the sandbox environment for {where}: {unreachable}pip says: {pip_message}. "
        "Check the name and version in the blueprint's sandbox.packages, and that the package index is "
        "reachable from the host; nothing was cached.",
        package=package or ", ".join(recipe.requirements),
        pip_message=pip_message,
    )


def _run_pip(recipe: Recipe, site: Path, *, index_url: str | None, progress: Progress) -> None:
    argv = _pip_command(recipe, site, index_url=index_url)
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise EnvironmentBuildError(f"cannot run pip ({sys.executable} -m pip): {exc}") from None
    lines: list[str] = []
    assert proc.stdout is not None  # noqa: S101 - stdout=PIPE
    with proc:
        for raw in proc.stdout:
            line = raw.rstrip()
            lines.append(line)
            if len(lines) > 400:
                del lines[:100]
            if line.startswith(_PROGRESS_PREFIXES):
                progress(f"  pip: {line[:160]}")
        try:
            returncode = proc.wait(timeout=_PIP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            returncode = -9
    if returncode != 0:
        raise _pip_failure(recipe, returncode, lines)


def _modules(site: Path) -> list[str]:
    """Top-level importable names in ``site`` (packages, modules, extension modules)."""
    names: set[str] = set()
    for child in site.iterdir():
        name = child.name
        if name.startswith((".", "_")) or name in ("bin", "share", "include"):
            continue
        if child.is_dir():
            if name.endswith((".dist-info", ".egg-info", ".data", ".libs")):
                continue
            if (child / "__init__.py").exists() or any(p.suffix in (".py", ".so") for p in child.iterdir()):
                names.add(name)
        elif name.endswith(".py"):
            names.add(name[:-3])
        elif name.endswith(".so"):
            names.add(name.split(".", 1)[0])
    return sorted(n for n in names if n.isidentifier())


MPLCONFIG_DIR: Final = ".codeact-mplconfig"
_FONT_CACHE: Final = (
    "import sys; sys.path.append(sys.argv[1]); import matplotlib; matplotlib.use('Agg'); import matplotlib.font_manager"
)


def _prebuild_font_cache(site: Path, progress: Progress) -> None:
    """Build matplotlib's font list once, so the first chart of every sandbox does not scan the fonts.

    matplotlib writes ``fontlist-*.json`` into ``MPLCONFIGDIR``; its paths are rewritten to the
    mount point the sandboxes see (``/opt/codeact/env``), and the runtime copies the file into its
    own writable config directory. Best effort: without it the first chart is only slower.
    """
    if not (site / "matplotlib").is_dir():
        return
    config = site / MPLCONFIG_DIR
    config.mkdir(exist_ok=True)
    env = {"MPLCONFIGDIR": str(config), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(config)}
    progress("  matplotlib: building the font list once")
    try:
        subprocess.run(
            [sys.executable, "-I", "-S", "-c", _FONT_CACHE, str(site)],
            env=env,
            capture_output=True,
            check=True,
            timeout=300,
        )
    except (OSError, subprocess.SubprocessError):
        shutil.rmtree(config, ignore_errors=True)
        return
    for fontlist in config.glob("fontlist-*.json"):
        text = fontlist.read_text(encoding="utf-8")
        fontlist.write_text(text.replace(str(site), MOUNT_POINT), encoding="utf-8")
    for other in config.iterdir():
        if not other.name.startswith("fontlist-"):
            shutil.rmtree(other, ignore_errors=True) if other.is_dir() else other.unlink(missing_ok=True)


def _docker_build(recipe: Recipe, work: Path, tag: str, progress: Progress) -> None:
    dockerfile = f"FROM {recipe.base}\nCOPY {SITE_DIR} {MOUNT_POINT}\nLABEL org.codeact.env={recipe.key}\n"
    (work / "Dockerfile").write_text(dockerfile, encoding="utf-8")
    (work / ".dockerignore").write_text(f"{ENV_FILE}\n", encoding="utf-8")
    progress(f"  docker: building image {tag} from {recipe.base}")
    try:
        out = subprocess.run(
            ["docker", "build", "--quiet", "--tag", tag, str(work)],
            capture_output=True,
            text=True,
            check=False,
            timeout=_PIP_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentBuildError(f"cannot build the sandbox environment image {tag!r}: {exc}") from None
    if out.returncode != 0:
        raise EnvironmentBuildError(
            f"cannot build the sandbox environment image {tag!r}: docker build says: "
            f"{(out.stderr or out.stdout).strip()[-800:]}; check `docker info` and that the base image "
            f"{recipe.base!r} exists (`codeact sandbox image build`)"
        )


def build_entry(recipe: Recipe, *, index_url: str | None, progress: Progress) -> Path:
    """Build the environment of ``recipe`` and move it into the cache.

    Args:
        recipe: What to build.
        index_url: A package index replacing the host's pip configuration, or None.
        progress: Receives one line per step.

    Returns:
        The entry's directory (``<cache>/<key>``).

    Raises:
        EnvironmentBuildError: pip or docker failed; nothing is left in the cache.
    """
    root = cache_root()
    final = root / recipe.key
    work = Path(tempfile.mkdtemp(prefix=f".build-{recipe.key}-", dir=root))
    started = time.time()
    try:
        site = work / SITE_DIR
        site.mkdir()
        where = "the host" if recipe.backend == "subprocess" else f"Python {recipe.python} in the Docker image"
        progress(f"building sandbox environment {recipe.key} ({recipe.label or 'packages'}) for {where}")
        _run_pip(recipe, site, index_url=index_url, progress=progress)
        modules = _modules(site)
        _prebuild_font_cache(site, progress)
        image: str | None = None
        if recipe.backend == "docker":
            image = f"{ENV_IMAGE_REPOSITORY}:{recipe.key}"
            _docker_build(recipe, work, image, progress)
            shutil.rmtree(site)  # the image holds the packages now
        meta: dict[str, Any] = {
            "backend": recipe.backend,
            "label": recipe.label,
            "requirements": list(recipe.requirements),
            "python": recipe.python,
            "platform": recipe.platform,
            "base": recipe.base,
            "image": image,
            "modules": modules,
            "built_at": started,
            "build_s": round(time.time() - started, 3),
        }
        (work / ENV_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")
        (work / USED_FILE).touch()
        os.chmod(work, 0o755)
        try:
            os.rename(work, final)
        except OSError:
            if not (final / ENV_FILE).exists():
                raise
            shutil.rmtree(work, ignore_errors=True)  # built meanwhile by another process
        progress(f"built sandbox environment {recipe.key} in {time.time() - started:.1f} s")
        return final
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
