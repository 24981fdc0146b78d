"""One registry resolves decorated and dynamic toolkits by name; entry points and ``MODULE:OBJECT`` references."""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from codeact.toolkits.bound import BoundToolkit, bind_toolkit
from codeact.toolkits.decorators import toolkit_spec
from codeact.toolkits.dynamic import DynamicToolkit
from codeact.toolkits.errors import (
    DuplicateToolkitError,
    ToolkitDefinitionError,
    ToolkitLoadError,
    ToolkitNotFoundError,
)

__all__ = ["ENTRY_POINT_GROUP", "ToolkitRegistry", "load_registry", "load_toolkit_ref"]

ENTRY_POINT_GROUP = "codeact.toolkits"


class ToolkitRegistry:
    """Toolkits by name, whichever way they were declared; names are unique.

    Args:
        toolkits: Toolkits to register right away (anything :func:`bind_toolkit` accepts).
    """

    def __init__(self, toolkits: Iterable[object] = ()) -> None:
        self._toolkits: dict[str, BoundToolkit] = {}
        for item in toolkits:
            self.register(item)

    @classmethod
    def from_entry_points(cls, *, group: str = ENTRY_POINT_GROUP) -> ToolkitRegistry:
        """A registry holding every toolkit installed packages declare in the entry-point ``group``.

        The built-in ``system`` toolkit is registered this way too (this package's own entry point).

        Raises:
            ToolkitLoadError: an entry point fails to load, or its name differs from its toolkit's name.
            DuplicateToolkitError: two entry points provide the same toolkit name.
        """
        registry = cls()
        for entry in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
            where = f"entry point {entry.name!r} ({entry.value}) of group {group!r}"
            try:
                obj = entry.load()
            except Exception as exc:
                raise ToolkitLoadError(f"{where} failed to load: {type(exc).__name__}: {exc}") from exc
            try:
                bound = bind_toolkit(obj)
            except ToolkitDefinitionError as exc:
                raise ToolkitLoadError(f"{where}: {exc.message}") from exc
            if bound.name != entry.name:
                raise ToolkitLoadError(
                    f"{where} provides a toolkit named {bound.name!r}; the entry point name must equal the "
                    f"toolkit name: rename the entry point to {bound.name!r}"
                )
            registry.register(bound)
        return registry

    def register(self, toolkit: object, *, replace: bool = False) -> BoundToolkit:
        """Register a toolkit (decorated class or instance, ``DynamicToolkit``, ``BoundToolkit``).

        Args:
            toolkit: The toolkit.
            replace: Replace a toolkit already registered under the same name instead of raising.

        Returns:
            The bound toolkit now registered.

        Raises:
            DuplicateToolkitError: the name is taken (and ``replace`` is false); names both sources.
            ToolkitDefinitionError: ``toolkit`` is not a toolkit.
        """
        bound = bind_toolkit(toolkit)
        existing = self._toolkits.get(bound.name)
        if existing is not None and not replace and existing.target is not bound.target:
            raise DuplicateToolkitError(
                f"toolkit name {bound.name!r} is already registered by {existing.source}; cannot register "
                f"{bound.source} under the same name: rename one (@toolkit(name=...)) or unregister the first"
            )
        self._toolkits[bound.name] = bound
        return bound

    def unregister(self, name: str) -> BoundToolkit:
        """Remove and return the toolkit ``name``; calls to it then fail with ``not_found``.

        Raises:
            ToolkitNotFoundError: no toolkit has that name.
        """
        bound = self.resolve(name)
        del self._toolkits[name]
        return bound

    def resolve(self, name: str) -> BoundToolkit:
        """The toolkit registered as ``name``.

        Raises:
            ToolkitNotFoundError: no toolkit has that name (the message suggests close names).
        """
        try:
            return self._toolkits[name]
        except KeyError:
            raise ToolkitNotFoundError(_unknown(name, list(self._toolkits))) from None

    def get(self, name: str) -> BoundToolkit | None:
        """The toolkit registered as ``name``, or ``None``."""
        return self._toolkits.get(name)

    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._toolkits)

    def __contains__(self, name: object) -> bool:
        return name in self._toolkits

    def __iter__(self) -> Iterator[BoundToolkit]:
        return iter(list(self._toolkits.values()))

    def __len__(self) -> int:
        return len(self._toolkits)

    def __repr__(self) -> str:
        return f"<ToolkitRegistry {self.names()!r}>"


def _unknown(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"registered: {', '.join(names) or '(none)'}"
    return f"no toolkit named {name!r} is registered; {hint}"


def load_registry(refs: Iterable[str] = (), *, builtins: bool = True, replace: bool = True) -> ToolkitRegistry:
    """The host's registry: the installed toolkits (entry points) plus ``MODULE:OBJECT`` references.

    Args:
        refs: ``--toolkit`` references, loaded with :func:`load_toolkit_ref`.
        builtins: Start from the entry-point toolkits (``system``, installed packages).
        replace: A reference may replace an installed toolkit of the same name (else that raises).

    Raises:
        ToolkitLoadError: a reference could not be loaded.
        DuplicateToolkitError: two toolkits share a name (and ``replace`` is False).
    """
    registry = ToolkitRegistry.from_entry_points() if builtins else ToolkitRegistry()
    for ref in refs:
        registry.register(load_toolkit_ref(ref), replace=replace)
    return registry


def load_toolkit_ref(ref: str) -> BoundToolkit:
    """Load a toolkit from a ``MODULE:OBJECT`` reference (host configuration, e.g. ``--toolkit``).

    ``MODULE`` is an importable module (``mypkg.tools``) or a path to a ``.py`` file
    (``./tools.py``); ``OBJECT`` (dotted for nested attributes) is a ``@toolkit`` class
    (instantiated with no arguments), an instance of one, or a ``DynamicToolkit``.

    Raises:
        ToolkitLoadError: the reference is malformed, the module or attribute is missing, importing
            fails, or the object is not a toolkit.
    """
    module_ref, sep, attr_path = ref.rpartition(":")
    if not sep or not module_ref or not attr_path:
        raise ToolkitLoadError(
            f"toolkit reference {ref!r} must look like MODULE:OBJECT (for example mypkg.tools:DevOps "
            "or ./tools.py:DevOps)"
        )
    module = _load_module(module_ref, ref)
    obj: object = module
    walked: list[str] = []
    for part in attr_path.split("."):
        walked.append(part)
        if not hasattr(obj, part):
            candidates = [n for n, v in vars(module).items() if _looks_like_toolkit(v)] if len(walked) == 1 else []
            close = difflib.get_close_matches(part, candidates, n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else (f"toolkits there: {', '.join(candidates)}" if candidates else "it defines no toolkit")
            )
            raise ToolkitLoadError(f"module {module_ref!r} has no attribute {'.'.join(walked)!r}; {hint}")
        obj = getattr(obj, part)
    try:
        return bind_toolkit(obj)
    except ToolkitDefinitionError as exc:
        raise ToolkitLoadError(f"toolkit reference {ref!r}: {exc.message}") from exc


def _looks_like_toolkit(value: object) -> bool:
    if isinstance(value, type):
        return toolkit_spec(value) is not None or (issubclass(value, DynamicToolkit) and value is not DynamicToolkit)
    return toolkit_spec(value) is not None or isinstance(value, DynamicToolkit)


def _load_module(module_ref: str, ref: str) -> object:
    if module_ref.endswith(".py") or "/" in module_ref or "\\" in module_ref:
        path = Path(module_ref).expanduser().resolve()
        if not path.is_file():
            raise ToolkitLoadError(f"toolkit reference {ref!r}: file {module_ref!r} does not exist")
        # A stable, unique module name per file so type hints and pickling-free reflection work.
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        name = f"_codeact_toolkit_{path.stem}_{digest}"
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ToolkitLoadError(f"toolkit reference {ref!r}: {module_ref!r} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except ToolkitDefinitionError as exc:
            del sys.modules[name]
            raise ToolkitLoadError(f"toolkit reference {ref!r}: {exc.message}") from exc
        except Exception as exc:
            del sys.modules[name]
            raise ToolkitLoadError(
                f"toolkit reference {ref!r}: executing {module_ref!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return module
    try:
        return _import_with_cwd(module_ref)
    except ModuleNotFoundError as exc:
        raise ToolkitLoadError(
            f"toolkit reference {ref!r}: cannot import module {module_ref!r} ({exc}); check it is installed "
            "and spelled right, or pass a path to a .py file"
        ) from exc
    except ToolkitDefinitionError as exc:
        raise ToolkitLoadError(f"toolkit reference {ref!r}: {exc.message}") from exc
    except Exception as exc:
        raise ToolkitLoadError(
            f"toolkit reference {ref!r}: importing {module_ref!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _import_with_cwd(module_ref: str) -> object:
    """Import ``module_ref``; like ``python -m``, modules in the working directory are importable too."""
    try:
        return importlib.import_module(module_ref)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        top = module_ref.split(".", 1)[0]
        if exc.name != top or cwd in sys.path or "" in sys.path:
            raise
        sys.path.insert(0, cwd)
        try:
            return importlib.import_module(module_ref)
        except ModuleNotFoundError:
            sys.path.remove(cwd)
            raise exc from None
