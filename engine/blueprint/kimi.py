"""kimi-cli agent files (``version: 1`` with an ``agent:`` block), loaded unchanged as codeact agents.

The rules are kimi-cli's (``kimi_cli/agentspec.py``, seed ``004``):

* ``extend`` names a base agent file, relative to the declaring file; ``extend: default`` is the
  built-in default agent. Bases are resolved first, then the child is laid over them:
  ``name``, ``system_prompt_path``, ``tools``, ``exclude_tools`` and ``subagents`` are replaced
  when the child sets them (an explicit ``null`` counts as set: ``tools: null`` means no tools,
  a missing key inherits); ``system_prompt_args`` is merged key by key.
* ``system_prompt_path`` and ``subagents.<name>.path`` are relative to the file that declares
  them (so an inherited prompt stays next to its base).
* Fail fast, each with its own code: a file that is missing or not a file
  (``blueprint.kimi.file``), invalid YAML (``blueprint.yaml.invalid``), an empty document
  (``blueprint.document.required``), an unsupported ``version`` (``blueprint.version.unsupported``),
  a ``name``, ``system_prompt_path`` or ``tools`` still unset after inheritance
  (``blueprint.kimi.required``; ``name: ""`` is a value, as in kimi-cli's own default agent),
  an ``extend`` cycle (``blueprint.kimi.extend.cycle``, where kimi-cli recurses until ``RecursionError``),
  a field of the wrong type (``blueprint.kimi.field.invalid``), a tool with no codeact counterpart that is not a toolkit
  name (``blueprint.kimi.tool.unknown``), a prompt placeholder without a value
  (``blueprint.kimi.prompt.arg``).

The resolved agent becomes a ``codeact.agent/v1`` document that extends ``codeact-base``; kimi's
tool names map to toolkits through :data:`KIMI_TOOLS` (docs/kimi-agents.md has the table).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.inheritance import read_blueprint_text
from codeact.engine.errors import BlueprintLoadError

__all__ = ["KIMI_BUILTIN_ARGS", "KIMI_TOOLS", "KIMI_VERSIONS", "is_kimi_document", "kimi_to_codeact"]

KIMI_VERSIONS: Final = ("1",)
_BUILTIN_DIR: Final = Path(__file__).parent / "builtin"
_ALIASES: Final = {"default": _BUILTIN_DIR / "kimi" / "default.yaml"}
_FIELDS: Final = ("extend", "name", "system_prompt_path", "system_prompt_args", "tools", "exclude_tools", "subagents")

# kimi-cli tool -> (codeact toolkit ref or None, operations or None, how the agent does it in codeact).
KIMI_TOOLS: Final[dict[str, tuple[str | None, tuple[str, ...] | None, str]]] = {
    "kimi_cli.tools.multiagent:Task": ("agents", None, "the `agents` toolkit: one operation per sub-agent"),
    "kimi_cli.tools.multiagent:CreateSubagent": (None, None, "not available: sub-agents are declared in the file"),
    "kimi_cli.tools.think:Think": ("system", ("think",), "`system.think()`"),
    "kimi_cli.tools.todo:SetTodoList": (None, None, "the model keeps its plan in a variable of its code"),
    "kimi_cli.tools.shell:Shell": (None, None, "the model's code itself, inside the sandbox policy"),
    "kimi_cli.tools.bash:Bash": (None, None, "the model's code itself, inside the sandbox policy"),
    "kimi_cli.tools.file:ReadFile": (None, None, "the model's code (`open`, `pathlib`) inside the sandbox"),
    "kimi_cli.tools.file:WriteFile": (None, None, "the model's code (`open`, `pathlib`) inside the sandbox"),
    "kimi_cli.tools.file:StrReplaceFile": (None, None, "the model's code (`str.replace`) inside the sandbox"),
    "kimi_cli.tools.file:Glob": (None, None, "the model's code (`pathlib.Path.glob`) inside the sandbox"),
    "kimi_cli.tools.file:Grep": (None, None, "the model's code (`re`) inside the sandbox"),
    "kimi_cli.tools.file:ReadMediaFile": (None, None, "not available"),
    "kimi_cli.tools.web:SearchWeb": (None, None, "not available: register a search toolkit and name it in tools"),
    "kimi_cli.tools.web:FetchURL": (None, None, "not available: register a fetch toolkit and name it in tools"),
    "kimi_cli.tools.dmail:SendDMail": (None, None, "not available"),
}

# kimi-cli's built-in prompt arguments -> codeact's built-in template variables ("" = not provided).
KIMI_BUILTIN_ARGS: Final = {
    "KIMI_NOW": "now",
    "KIMI_WORK_DIR": "work_dir",
    "KIMI_OS": "os",
    "KIMI_WORK_DIR_LS": "",
    "KIMI_AGENTS_MD": "",
    "KIMI_SKILLS": "",
}
_PLACEHOLDER = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}")
_INHERIT: Final = object()  # kimi-cli's Inherit sentinel: "this file does not set the field"


@dataclass
class _Spec:
    name: Any = _INHERIT
    system_prompt_path: Any = _INHERIT
    system_prompt_args: dict[str, str] = field(default_factory=dict)
    tools: Any = _INHERIT
    exclude_tools: Any = _INHERIT
    subagents: Any = _INHERIT


def is_kimi_document(document: Any) -> bool:
    """True for a kimi-cli agent file: a mapping with an ``agent:`` block and no codeact/ai4j version."""
    if not isinstance(document, dict) or "agent" not in document:
        return False
    version = document.get("version")
    return not (isinstance(version, str) and version.strip().startswith(("codeact.", "ai4j.")))


def kimi_to_codeact(document: dict[str, Any], *, source: Path | None, base_dir: Path, label: str) -> dict[str, Any]:
    """Resolve a kimi-cli agent document (inheritance, paths, checks) into a ``codeact.agent/v1`` document.

    Raises:
        BlueprintLoadError: One of the fail-fast errors listed in the module docstring.
    """
    stack = (source,) if source is not None else ()
    spec = _resolve(document, base_dir=base_dir, label=label, stack=stack)
    missing = [f"agent.{key}" for key in ("name", "system_prompt_path", "tools") if getattr(spec, key) is _INHERIT]
    if missing:
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: {', '.join(missing)} is required (set it in this file or in the file it "
            "extends, e.g. `extend: default`)",
            code="blueprint.kimi.required",
        )
    name = str(spec.name)
    # The id: the name, else (kimi's default agent is nameless) the file's stem: coder.yaml -> coder.
    ident = _slug(name) or _slug(Path(label).stem) or "kimi-agent"
    tools = [str(t) for t in spec.tools or ()]
    excluded = {str(t) for t in (spec.exclude_tools if spec.exclude_tools is not _INHERIT else None) or ()}
    subagents = spec.subagents if spec.subagents is not _INHERIT else None
    prompt, variables = _prompt(Path(spec.system_prompt_path), spec.system_prompt_args, label)
    return {
        "version": "codeact.agent/v1",
        "extend": "codeact-base",
        "id": ident,
        "name": name,
        "instructions": {"system": prompt, "variables": variables},
        "toolkits": _toolkits([t for t in tools if t not in excluded], label),
        "subagents": {
            key: {"path": str(entry["path"]), "description": entry.get("description")}
            for key, entry in (subagents or {}).items()
        },
    }


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


def _resolve(document: Any, *, base_dir: Path, label: str, stack: tuple[Path, ...]) -> _Spec:
    version = document.get("version", "1") if isinstance(document, dict) else None
    if str(version).strip() not in KIMI_VERSIONS:
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: unsupported version {version!r}; supported: {', '.join(KIMI_VERSIONS)} "
            "(or use version: codeact.agent/v1)",
            code="blueprint.version.unsupported",
        )
    agent = document.get("agent") if isinstance(document, dict) else None
    if agent is None:
        agent = {}
    if not isinstance(agent, dict):
        raise _invalid(label, "agent", "a mapping")
    unknown = sorted(set(agent) - set(_FIELDS))
    if unknown:
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: unknown field(s) {', '.join('agent.' + k for k in unknown)}; "
            f"allowed: {', '.join(_FIELDS)}",
            code="blueprint.kimi.field.invalid",
        )
    own = _own_fields(agent, base_dir=base_dir, label=label)
    extend = agent.get("extend")
    if extend is None:
        return own
    if not isinstance(extend, str) or not extend.strip():
        raise _invalid(label, "extend", "a file path or 'default'")
    base_path = _ALIASES.get(extend.strip()) or (base_dir / extend.strip())
    resolved = base_path.resolve()
    if resolved in stack:
        chain = " -> ".join([p.name for p in stack] + [base_path.name])
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: extend cycle {chain}; remove one of the extend lines",
            code="blueprint.kimi.extend.cycle",
        )
    if not resolved.is_file():
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: extend {extend!r} is not a file ({resolved}); "
            "a path is relative to the file that declares it, or use 'default'",
            code="blueprint.kimi.file",
        )
    base_doc = parse_yaml(read_blueprint_text(resolved, str(resolved)), source=resolved.name)
    base = _resolve(base_doc, base_dir=resolved.parent, label=base_path.name, stack=(*stack, resolved))
    return _Spec(
        name=base.name if own.name is _INHERIT else own.name,
        system_prompt_path=base.system_prompt_path if own.system_prompt_path is _INHERIT else own.system_prompt_path,
        system_prompt_args={**base.system_prompt_args, **own.system_prompt_args},
        tools=base.tools if own.tools is _INHERIT else own.tools,
        exclude_tools=base.exclude_tools if own.exclude_tools is _INHERIT else own.exclude_tools,
        subagents=base.subagents if own.subagents is _INHERIT else own.subagents,
    )


def _own_fields(agent: Mapping[str, Any], *, base_dir: Path, label: str) -> _Spec:
    spec = _Spec()
    if "name" in agent:
        # kimi-cli: ``name: str | Inherit``; an empty string is a value (its own default agent has
        # ``name: ""``): only a name still unset after ``extend`` is missing.
        if not isinstance(agent["name"], str):
            raise _invalid(label, "name", "a string")
        spec.name = agent["name"].strip()
    if "system_prompt_path" in agent:
        if not isinstance(agent["system_prompt_path"], str) or not agent["system_prompt_path"].strip():
            raise _invalid(label, "system_prompt_path", "a file path")
        spec.system_prompt_path = (base_dir / agent["system_prompt_path"].strip()).resolve()
    args = agent.get("system_prompt_args")
    if args is not None:
        if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
            raise _invalid(label, "system_prompt_args", "a mapping of names to strings")
        spec.system_prompt_args = {k: "" if v is None else str(v) for k, v in args.items()}
    for key in ("tools", "exclude_tools"):
        if key in agent:
            value = agent[key]
            if value is not None and (not isinstance(value, list) or not all(isinstance(t, str) for t in value)):
                raise _invalid(label, key, "a list of tool names, or null")
            setattr(spec, key, value)
    if "subagents" in agent:
        value = agent["subagents"]
        if value is not None and not isinstance(value, dict):
            raise _invalid(label, "subagents", "a mapping of names to {path, description}, or null")
        resolved: dict[str, dict[str, Any]] = {}
        for key, entry in (value or {}).items():
            if not isinstance(entry, dict) or not isinstance(entry.get("path"), str) or not entry["path"].strip():
                raise _invalid(label, f"subagents.{key}", "{path, description} with a path")
            if not isinstance(entry.get("description"), str):
                raise _invalid(label, f"subagents.{key}.description", "a string (required)")
            resolved[str(key)] = {"path": (base_dir / entry["path"].strip()).resolve(), **_without(entry, "path")}
        spec.subagents = None if value is None else resolved
    return spec


def _without(entry: Mapping[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != key}


def _invalid(label: str, key: str, expected: str) -> BlueprintLoadError:
    return BlueprintLoadError(
        f"kimi agent file {label!r}: agent.{key} must be {expected}", code="blueprint.kimi.field.invalid"
    )


def _prompt(path: Path, args: Mapping[str, str], label: str) -> tuple[str, dict[str, str]]:
    """The system prompt as a codeact template: ``${NAME}`` placeholders become Jinja variables."""
    if not path.is_file():
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: system_prompt_path {str(path)!r} is not a file; "
            "a path is relative to the file that declares it",
            code="blueprint.kimi.file",
        )
    text = read_blueprint_text(path, str(path))
    pieces: list[str] = []
    variables: dict[str, str] = {}
    last = 0
    for match in _PLACEHOLDER.finditer(text):
        pieces.append(_raw(text[last : match.start()]))
        last = match.end()
        key = match.group(1)
        if key in args:
            variables[f"kimi_{key}"] = args[key]
            pieces.append(f"{{{{ kimi_{key} }}}}")
        elif key in KIMI_BUILTIN_ARGS:
            builtin = KIMI_BUILTIN_ARGS[key]
            pieces.append(f"{{{{ {builtin} }}}}" if builtin else "")
        else:
            raise BlueprintLoadError(
                f"kimi agent file {label!r}: the system prompt {path.name!r} uses ${{{key}}}, which has no value; "
                "add it to agent.system_prompt_args",
                code="blueprint.kimi.prompt.arg",
            )
    pieces.append(_raw(text[last:]))
    return "".join(pieces), variables


def _raw(text: str) -> str:
    """Literal prompt text, safe from Jinja syntax."""
    if not any(mark in text for mark in ("{{", "{%", "{#")):
        return text
    return "{% raw %}" + text.replace("{% endraw %}", "{% endraw %}{{ '{% endraw %}' }}{% raw %}") + "{% endraw %}"


def _toolkits(tools: list[str], label: str) -> list[dict[str, Any]]:
    grants: dict[str, list[str] | None] = {"system": None}
    for tool in tools:
        if tool in KIMI_TOOLS:
            ref, operations, _ = KIMI_TOOLS[tool]
            if ref is None or ref == "agents":
                continue  # done by the code itself, or granted with the sub-agents
        elif ":" not in tool and tool.replace("_", "").replace("-", "").isalnum():
            ref, operations = tool, None  # a codeact toolkit name, resolved by the host's registry
        else:
            known = ", ".join(sorted(k.rsplit(":", 1)[1] for k in KIMI_TOOLS))
            raise BlueprintLoadError(
                f"kimi agent file {label!r}: tool {tool!r} has no codeact counterpart; use one of kimi's tools "
                f"({known}) or the name of a codeact toolkit (see docs/kimi-agents.md)",
                code="blueprint.kimi.tool.unknown",
            )
        if ref in grants and grants[ref] is None:
            continue
        grants[ref] = None if operations is None else [*(grants.get(ref) or []), *operations]
    return [{"ref": ref} if ops is None else {"ref": ref, "operations": ops} for ref, ops in grants.items()]
