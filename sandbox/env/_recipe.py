"""What an environment holds: the declared packages, the presets, and the content hash.

An :class:`EnvSpec` is what a blueprint declares (``sandbox.packages`` and/or ``sandbox.preset``).
A :class:`Recipe` is that spec resolved for one backend and one base (the host's interpreter, or
the Docker base image and its interpreter); its :attr:`Recipe.key` is the content hash that names
the cached environment, so a changed package list, base or Python version builds a new one and an
unchanged one is reused.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from codeact.sandbox.errors import EnvironmentBuildError

__all__ = ["EnvSpec", "PRESETS", "Preset", "Recipe", "normalize_requirement"]

EnvBackend = Literal["subprocess", "docker"]


@dataclass(frozen=True, kw_only=True)
class Preset:
    """A named package set a blueprint selects with ``sandbox: {preset: NAME}``.

    Attributes:
        name: The preset's name.
        description: One line for ``docs/sandbox.md`` and ``codeact sandbox list``.
        packages: pip requirement strings (version ranges pinned to a major series).
    """

    name: str
    description: str
    packages: tuple[str, ...]


PRESETS: Final[Mapping[str, Preset]] = {
    "datascience": Preset(
        name="datascience",
        description="numbers, tables, symbols, graphs and charts, as a data/maths code interpreter ships them",
        packages=(
            "numpy>=1.26,<3",
            "pandas>=2.2,<3",
            "scipy>=1.11,<2",
            "sympy>=1.12,<2",
            "networkx>=3.2,<4",
            "matplotlib>=3.8,<4",
            "seaborn>=0.13,<1",
            "scikit-learn>=1.4,<2",
            "tabulate>=0.9,<1",
        ),
    ),
}
"""The presets, by name (``docs/sandbox.md`` lists what each holds)."""

# A PEP 508 requirement without markers or URLs: name, extras, version specifiers.
_REQUIREMENT: Final = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    r"(?P<extras>\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*"
    r"(?P<spec>(?:(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*)$"
)


def normalize_requirement(text: str) -> str:
    """A requirement string in one canonical spelling (PEP 503 name, no blanks).

    Args:
        text: A pip requirement such as ``"NumPy >= 1.26"`` or ``"pandas[excel]"``.

    Returns:
        The canonical form, e.g. ``"numpy>=1.26"``.

    Raises:
        EnvironmentBuildError: The text is not a plain requirement (URLs, paths, options and
            environment markers are refused: a blueprint names packages, not pip arguments).
    """
    match = _REQUIREMENT.match(text) if isinstance(text, str) else None
    if match is None or text.strip().startswith("-"):
        raise EnvironmentBuildError(
            f"sandbox.packages entry {text!r} is not a pip requirement such as 'numpy' or 'pandas>=2.2'; "
            "URLs, paths, options and markers are not accepted",
            package=str(text),
        )
    name = re.sub(r"[-_.]+", "-", match["name"]).lower()
    extras = match["extras"] or ""
    if extras:
        extras = "[" + ",".join(sorted(e.strip().lower() for e in extras[1:-1].split(","))) + "]"
    spec = ",".join(sorted(p.replace(" ", "") for p in re.split(r"\s*,\s*", match["spec"].strip()) if p))
    return f"{name}{extras}{spec}"


@dataclass(frozen=True, kw_only=True)
class EnvSpec:
    """The packages a blueprint declares for its sandbox.

    Attributes:
        packages: pip requirement strings (``sandbox.packages``).
        preset: A preset name (``sandbox.preset``), or None.
    """

    packages: tuple[str, ...] = ()
    preset: str | None = None

    @property
    def empty(self) -> bool:
        """True when nothing is declared (the sandbox runs with the standard library only)."""
        return not self.packages and self.preset is None

    def requirements(self) -> tuple[str, ...]:
        """The preset's packages and the declared ones, canonical, sorted, without duplicates.

        Raises:
            EnvironmentBuildError: An unknown preset, or a malformed requirement.
        """
        items: list[str] = []
        if self.preset is not None:
            preset = PRESETS.get(self.preset)
            if preset is None:
                raise EnvironmentBuildError(
                    f"unknown sandbox preset {self.preset!r}; the presets are: {', '.join(sorted(PRESETS))} "
                    "(docs/sandbox.md says what each holds)",
                    package=self.preset,
                )
            items.extend(preset.packages)
        items.extend(self.packages)
        return tuple(sorted({normalize_requirement(item) for item in items}))

    def describe(self) -> str:
        """A short human label: ``preset datascience + 2 packages``, ``numpy, sympy``."""
        parts = []
        if self.preset is not None:
            parts.append(f"preset {self.preset}")
        if self.packages:
            parts.append(", ".join(self.packages))
        return " + ".join(parts) or "(no packages)"


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """One environment to build: requirements on a base, for one backend.

    Attributes:
        backend: ``subprocess`` (a host directory) or ``docker`` (an image).
        base: What the packages go on top of: ``host`` or the Docker base image tag.
        python: ``MAJOR.MINOR`` of the interpreter that imports the packages.
        platform: The wheel platform, e.g. ``linux-x86_64-glibc2.36``.
        requirements: Canonical requirement strings, sorted.
        label: What the blueprint declared (for listings).
    """

    backend: EnvBackend
    base: str
    python: str
    platform: str
    requirements: tuple[str, ...]
    label: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """The content hash naming the environment (16 hex digits)."""
        payload = json.dumps(
            {
                "v": 2,
                "backend": self.backend,
                "base": self.base,
                "python": self.python,
                "platform": self.platform,
                "requirements": list(self.requirements),
            },
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
