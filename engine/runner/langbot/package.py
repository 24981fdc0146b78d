"""Write a LangBot plugin that serves a codeact blueprint as a Runner component."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from codeact.engine.runner.entities import RunnerManifest, RunnerPermissions
from codeact.engine.runner.langbot.runner_fields import MODEL_FIELD

__all__ = ["component_manifest", "write_plugin"]

_NAME = re.compile(r"[^a-z0-9_]")


def _i18n(text: dict[str, str] | None, fallback: str) -> dict[str, str]:
    value = (text or {}).get("en_US") or fallback
    return {"en_US": value, "zh_Hans": value}


def _sdk_permissions(permissions: RunnerPermissions) -> dict[str, object]:
    """The permissions as langbot-plugin 0.7 reads them.

    Its strict manifest has no ``artifacts`` or ``platform_api`` kind and no ``binding`` storage area, so those
    stay out of the component's YAML (the runner still holds itself to its whole manifest: its proxy refuses an
    undeclared call before it leaves).
    """
    data: dict[str, object] = permissions.model_dump(mode="json", exclude={"artifacts", "platform_api"})
    storage = data.get("storage")
    data["storage"] = [area for area in storage if area != "binding"] if isinstance(storage, list) else []
    return data


def component_manifest(manifest: RunnerManifest, *, runner_name: str, attr: str) -> dict[str, object]:
    """The Runner component YAML (``kind: Runner``) for a runner manifest."""
    config = [dict(MODEL_FIELD), *(f.model_dump(mode="json", exclude_none=True) for f in manifest.config_schema)]
    return {
        "apiVersion": "langbot/v1",
        "kind": "Runner",
        "metadata": {
            "name": runner_name,
            "label": _i18n(manifest.label, manifest.name),
            "description": _i18n(manifest.description, manifest.name),
        },
        "spec": {
            "usages": list(manifest.usages),
            "capabilities": manifest.capabilities.model_dump(mode="json"),
            "permissions": _sdk_permissions(manifest.permissions),
            "config": config,
        },
        "execution": {"python": {"path": f"./{runner_name}.py", "attr": attr}},
    }


_COMPONENT = '''"""The codeact blueprint {blueprint_id!r} as a LangBot Runner (written by codeact)."""

from __future__ import annotations

from pathlib import Path

from codeact.engine.runner.langbot import CodeactRunner


class {attr}(CodeactRunner):
    """Runs {blueprint_id!r} with codeact."""

    blueprint = Path(__file__).resolve().parents[2] / "blueprint" / {blueprint_file!r}
    toolkits = {toolkits!r}
'''

_MAIN = '''"""Plugin entry (written by codeact)."""

from __future__ import annotations

from langbot_plugin.api.definition.plugin import BasePlugin


class {attr}(BasePlugin):
    """A codeact agent for LangBot."""

    async def initialize(self) -> None:
        """Nothing to set up: the Runner builds its agent on first use."""
'''


def _probe_manifest(source: Path, toolkits: tuple[str, ...]) -> RunnerManifest:
    from codeact.engine.runner.blueprint_runner import BlueprintRunner

    with tempfile.TemporaryDirectory() as tmp:
        runner = BlueprintRunner.from_blueprint(
            source, toolkits=list(toolkits), store=f"sqlite:///{Path(tmp) / 'probe.db'}"
        )
        try:
            return runner.manifest
        finally:
            runner.agent.close()


def write_plugin(
    dest: str | Path,
    blueprint: str | Path,
    *,
    author: str,
    name: str | None = None,
    version: str = "0.1.0",
    toolkits: Sequence[str] = (),
) -> Path:
    """Write a LangBot plugin directory serving ``blueprint`` as its Runner component.

    The directory holds ``manifest.yaml`` (the plugin), ``main.py``, ``components/runner/``
    (the Runner's YAML, with capabilities, permissions and config from the runner manifest, and
    its module subclassing :class:`~codeact.engine.runner.langbot.CodeactRunner`), the blueprint under
    ``blueprint/`` and ``requirements.txt`` (``codeact[langbot]``).

    Args:
        dest: The plugin directory to write (created).
        blueprint: The blueprint file (copied; a blueprint that ``extend``s a file must be
            self-contained or bring its base along).
        author: The plugin author (LangBot's ``plugin:author/name/runner`` id).
        name: The plugin name (default: the blueprint id).
        version: The plugin version.
        toolkits: The blueprint's host toolkits as ``MODULE:OBJECT`` strings (importable where the
            plugin runs).

    Returns:
        The plugin directory.
    """
    source = Path(blueprint)
    # The probe opens (and closes) a model client and a store: in a thread of its own, so this
    # works from sync code and from inside a running event loop alike.
    with ThreadPoolExecutor(max_workers=1) as pool:
        manifest = pool.submit(_probe_manifest, source, tuple(toolkits)).result()
    plugin = _NAME.sub("_", (name or manifest.id).lower()).strip("_") or "codeact_agent"
    runner_name = "agent"
    attr = "".join(part.capitalize() for part in plugin.split("_")) or "Codeact"
    root = Path(dest)
    (root / "components" / "runner").mkdir(parents=True, exist_ok=True)
    (root / "blueprint").mkdir(exist_ok=True)
    (root / "assets").mkdir(exist_ok=True)
    shutil.copyfile(source, root / "blueprint" / source.name)
    label = (manifest.label or {}).get("en_US", manifest.name)
    plugin_manifest = {
        "apiVersion": "v1",
        "kind": "Plugin",
        "metadata": {
            "author": author,
            "name": plugin,
            "repository": "",
            "version": version,
            "description": _i18n(manifest.description, label),
            "label": _i18n(manifest.label, label),
        },
        "spec": {"config": [], "components": {"Runner": {"fromDirs": [{"path": "components/runner/"}]}}},
        "execution": {"python": {"path": "main.py", "attr": f"{attr}Plugin"}},
    }

    def dump(data: dict[str, Any]) -> str:
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)

    (root / "manifest.yaml").write_text(dump(plugin_manifest))
    (root / "main.py").write_text(_MAIN.format(attr=f"{attr}Plugin"))
    (root / "requirements.txt").write_text("codeact[langbot]\n")
    (root / "components" / "__init__.py").write_text("")
    (root / "components" / "runner" / "__init__.py").write_text("")
    component = component_manifest(manifest, runner_name=runner_name, attr=f"{attr}Runner")
    (root / "components" / "runner" / f"{runner_name}.yaml").write_text(dump(component))
    (root / "components" / "runner" / f"{runner_name}.py").write_text(
        _COMPONENT.format(
            attr=f"{attr}Runner", blueprint_id=manifest.id, blueprint_file=source.name, toolkits=tuple(toolkits)
        )
    )
    return root
