"""kimi-cli agent files (``version: 1`` with an ``agent:`` block), loaded unchanged as codeact agents.

The rules are kimi-cli's (``kimi_cli/agentspec.py`` and ``kimi_cli/soul/agent.py``, seed ``004``):

* ``extend`` names a base agent file, relative to the declaring file; ``extend: default`` and
  ``extend: okabe`` are kimi-cli's built-in agents, shipped unchanged in ``builtin/kimi/``. Bases are
  resolved first, then the child is laid over them: ``name``, ``system_prompt_path``, ``tools``,
  ``allowed_tools``, ``exclude_tools`` and ``subagents`` are replaced when the child sets them (an
  explicit ``null`` counts as set: ``tools: null`` means no tools, a missing key inherits);
  ``model`` and ``when_to_use`` when the child gives a value; ``system_prompt_args`` is merged key by key.
* ``system_prompt_path`` and ``subagents.<name>.path`` are relative to the file that declares
  them (so an inherited prompt stays next to its base).
* The tools an agent gets: ``tools``, kept to ``allowed_tools`` when that is set, minus ``exclude_tools``.
* The system prompt is a Jinja template with kimi-cli's environment: ``${NAME}`` for a value,
  ``{% if %}`` / ``{% include "file.md" %}`` blocks (trim and lstrip blocks, so ``{% endif +%}`` keeps its
  newline), the text stripped first, an undefined ``${NAME}`` an error. Its values are the agent's
  ``system_prompt_args`` and kimi's built-in arguments (:data:`KIMI_BUILTIN_ARGS`), which
  :func:`kimi_builtin_args` computes from the host when the agent is built, so the prompt shows the
  real time, OS, shell, working directory, its listing and its ``AGENTS.md``.
* Fail fast, each with its own code: a file that is missing or not a file
  (``blueprint.kimi.file``), invalid YAML (``blueprint.yaml.invalid``), an empty document
  (``blueprint.document.required``), an unsupported ``version`` (``blueprint.version.unsupported``),
  a ``name``, ``system_prompt_path`` or ``tools`` still unset after inheritance
  (``blueprint.kimi.required``; ``name: ""`` is a value, as in kimi-cli's own default agent),
  an ``extend`` cycle (``blueprint.kimi.extend.cycle``, where kimi-cli recurses until ``RecursionError``),
  a field of the wrong type (``blueprint.kimi.field.invalid``), a tool outside ``kimi_cli.tools`` that is
  not a toolkit name (``blueprint.kimi.tool.unknown``), a prompt placeholder without a value
  (``blueprint.kimi.prompt.arg``), a prompt that is not a valid template (``blueprint.kimi.prompt.template``).

The resolved agent becomes a ``codeact.agent/v1`` document that extends ``codeact-base``; kimi's
tool names map to toolkits through :data:`KIMI_TOOLS` (docs/kimi-agents.md has the table). A kimi-cli
tool codeact has no counterpart for is named in the agent's ``description``, never a load failure.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jinja2
from jinja2 import meta
from jinja2.sandbox import ImmutableSandboxedEnvironment

from codeact.engine.blueprint._yaml import parse_yaml
from codeact.engine.blueprint.inheritance import read_blueprint_text
from codeact.engine.errors import BlueprintLoadError

__all__ = [
    "KIMI_BUILTIN_ARGS",
    "KIMI_TOOLS",
    "KIMI_VERSIONS",
    "KimiPrompt",
    "is_kimi_document",
    "kimi_builtin_args",
    "kimi_to_codeact",
    "render_kimi_prompt",
]

KIMI_VERSIONS: Final = ("1",)
_BUILTIN_DIR: Final = Path(__file__).parent / "builtin" / "kimi"
# kimi-cli's DEFAULT_AGENT_FILE and OKABE_AGENT_FILE, shipped unchanged.
_ALIASES: Final = {"default": _BUILTIN_DIR / "default" / "agent.yaml", "okabe": _BUILTIN_DIR / "okabe" / "agent.yaml"}
_FIELDS: Final = (
    "extend",
    "name",
    "system_prompt_path",
    "system_prompt_args",
    "model",
    "when_to_use",
    "tools",
    "allowed_tools",
    "exclude_tools",
    "subagents",
)
_CODE: Final = "the model's code itself, inside the sandbox policy"

# kimi-cli tool -> (codeact toolkit ref or None, operations or None, how the agent does it in codeact).
# ref None: the model's own code does it, or (the text starts with "not available") nothing does.
KIMI_TOOLS: Final[dict[str, tuple[str | None, tuple[str, ...] | None, str]]] = {
    "kimi_cli.tools.agent:Agent": ("agents", None, "the `agents` toolkit: one operation per sub-agent"),
    "kimi_cli.tools.multiagent:Task": ("agents", None, "the `agents` toolkit: one operation per sub-agent"),
    "kimi_cli.tools.multiagent:CreateSubagent": (None, None, "not available: sub-agents are declared in the file"),
    "kimi_cli.tools.think:Think": ("system", ("think",), "`system.think()`"),
    "kimi_cli.tools.ask_user:AskUserQuestion": ("system", ("ask_user",), "`system.ask_user()`"),
    "kimi_cli.tools.todo:SetTodoList": (None, None, "the model keeps its plan in a variable of its code"),
    "kimi_cli.tools.shell:Shell": (None, None, _CODE),
    "kimi_cli.tools.bash:Bash": (None, None, _CODE),
    "kimi_cli.tools.file:ReadFile": (None, None, "the model's code (`open`, `pathlib`) inside the sandbox"),
    "kimi_cli.tools.file:WriteFile": (None, None, "the model's code (`open`, `pathlib`) inside the sandbox"),
    "kimi_cli.tools.file:StrReplaceFile": (None, None, "the model's code (`str.replace`) inside the sandbox"),
    "kimi_cli.tools.file:Edit": (None, None, "the model's code (`str.replace`) inside the sandbox"),
    "kimi_cli.tools.file:Glob": (None, None, "the model's code (`pathlib.Path.glob`) inside the sandbox"),
    "kimi_cli.tools.file:Grep": (None, None, "the model's code (`re`) inside the sandbox"),
    "kimi_cli.tools.file:ReadMediaFile": (None, None, "not available"),
    "kimi_cli.tools.web:SearchWeb": (None, None, "not available: register a search toolkit and name it in tools"),
    "kimi_cli.tools.web:FetchURL": (None, None, "not available: register a fetch toolkit and name it in tools"),
    "kimi_cli.tools.dmail:SendDMail": (None, None, "not available"),
    "kimi_cli.tools.background:TaskList": (None, None, "not available: codeact has no background shell tasks"),
    "kimi_cli.tools.background:TaskOutput": (None, None, "not available: codeact has no background shell tasks"),
    "kimi_cli.tools.background:TaskStop": (None, None, "not available: codeact has no background shell tasks"),
    "kimi_cli.tools.plan:ExitPlanMode": (None, None, "not available: codeact has no plan mode"),
    "kimi_cli.tools.plan.enter:EnterPlanMode": (None, None, "not available: codeact has no plan mode"),
    "kimi_cli.tools.archive_search:ArchiveSearch": (None, None, "not available"),
}
_KIMI_PACKAGE: Final = "kimi_cli.tools."  # any other tool of kimi-cli's is named as unavailable

# kimi-cli's built-in prompt arguments (``BuiltinSystemPromptArgs``) and what codeact gives each.
KIMI_BUILTIN_ARGS: Final[dict[str, str]] = {
    "KIMI_NOW": "the current local time, ISO 8601",
    "KIMI_OS": "the host's OS: `Linux`, `macOS` or `Windows`",
    "KIMI_SHELL": "the host's shell and its path, e.g. bash (`/bin/bash`)",
    "KIMI_WORK_DIR": "the run's working directory",
    "KIMI_WORK_DIR_LS": "a two-level listing of the working directory",
    "KIMI_AGENTS_MD": "the working directory's `AGENTS.md` (or `agents.md`), empty without one",
    "KIMI_SKILLS": "`No skills found.` (codeact's toolkits are listed in the prompt instead)",
    "KIMI_ADDITIONAL_DIRS_INFO": "empty: a codeact run has one working directory",
}
_LS_ENTRIES: Final = 30  # per directory in KIMI_WORK_DIR_LS; the rest is "... and N more"
_AGENTS_MD_BYTES: Final = 64_000
_INHERIT: Final = object()  # kimi-cli's Inherit sentinel: "this file does not set the field"


@dataclass(frozen=True, kw_only=True)
class KimiPrompt:
    """A kimi agent's system prompt, read when the file is loaded and rendered when the agent is built.

    Attributes:
        path: The prompt file (for messages).
        source: Its text, stripped as kimi-cli strips it.
        includes: The files it ``{% include %}``s (transitively), by the name the template uses.
        args: The agent's ``system_prompt_args`` after inheritance.
    """

    path: Path
    source: str
    includes: tuple[tuple[str, str], ...] = ()
    args: tuple[tuple[str, str], ...] = ()


@dataclass
class _Spec:
    name: Any = _INHERIT
    system_prompt_path: Any = _INHERIT
    system_prompt_args: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    when_to_use: str | None = None
    tools: Any = _INHERIT
    allowed_tools: Any = _INHERIT
    exclude_tools: Any = _INHERIT
    subagents: Any = _INHERIT


def is_kimi_document(document: Any) -> bool:
    """True for a kimi-cli agent file: a mapping with an ``agent:`` block and no codeact/ai4j version."""
    if not isinstance(document, dict) or "agent" not in document:
        return False
    version = document.get("version")
    return not (isinstance(version, str) and version.strip().startswith(("codeact.", "ai4j.")))


def kimi_to_codeact(
    document: dict[str, Any], *, source: Path | None, base_dir: Path, label: str
) -> tuple[dict[str, Any], KimiPrompt]:
    """Resolve a kimi-cli agent document (inheritance, paths, checks) into a ``codeact.agent/v1`` document.

    Returns:
        The document, and the system prompt the factory renders with the host's values
        (:func:`render_kimi_prompt`); the document's ``instructions.system`` holds its text for display.

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
    allowed = spec.allowed_tools if spec.allowed_tools is not _INHERIT else None
    if allowed is not None:
        tools = [t for t in tools if t in set(allowed)]
    excluded = {str(t) for t in (spec.exclude_tools if spec.exclude_tools is not _INHERIT else None) or ()}
    subagents = spec.subagents if spec.subagents is not _INHERIT else None
    prompt = _prompt(Path(spec.system_prompt_path), spec.system_prompt_args, label)
    grants, unavailable = _toolkits([t for t in tools if t not in excluded], label)
    document = {
        "version": "codeact.agent/v1",
        "extend": "codeact-base",
        "id": ident,
        "name": name,
        "instructions": {"system": prompt.source},
        "toolkits": grants,
        "subagents": {
            key: {"path": str(entry["path"]), "description": entry.get("description")}
            for key, entry in (subagents or {}).items()
        },
    }
    description = [spec.when_to_use.strip()] if spec.when_to_use and spec.when_to_use.strip() else []
    if unavailable:
        description.append(f"kimi-cli tools not available in codeact: {', '.join(unavailable)}.")
    if description:
        document["description"] = "\n".join(description)
    if spec.model:
        document["model"] = _model(spec.model)
    return document, prompt


def _model(name: str) -> dict[str, str]:
    """Kimi's ``model`` (an alias of kimi's config) as codeact's model block: a host profile, or a model id."""
    name = name.strip()
    provider, _, model = name.partition("/")
    return {"provider": provider, "model": model} if model else {"profile": name}


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
        raise _invalid(label, "extend", "a file path, 'default' or 'okabe'")
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
            "a path is relative to the file that declares it, or use 'default' or 'okabe'",
            code="blueprint.kimi.file",
        )
    base_doc = parse_yaml(read_blueprint_text(resolved, str(resolved)), source=resolved.name)
    base = _resolve(base_doc, base_dir=resolved.parent, label=base_path.name, stack=(*stack, resolved))

    def pick(key: str) -> Any:
        mine = getattr(own, key)
        return getattr(base, key) if mine is _INHERIT else mine

    return _Spec(
        name=pick("name"),
        system_prompt_path=pick("system_prompt_path"),
        system_prompt_args={**base.system_prompt_args, **own.system_prompt_args},
        model=own.model if own.model is not None else base.model,
        when_to_use=own.when_to_use if own.when_to_use is not None else base.when_to_use,
        tools=pick("tools"),
        allowed_tools=pick("allowed_tools"),
        exclude_tools=pick("exclude_tools"),
        subagents=pick("subagents"),
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
    for key in ("model", "when_to_use"):
        value = agent.get(key)
        if value is not None and not isinstance(value, str):
            raise _invalid(label, key, "a string")
        setattr(spec, key, value)
    for key in ("tools", "allowed_tools", "exclude_tools"):
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


# -- the system prompt ------------------------------------------------------------------------


@functools.cache
def _environment() -> ImmutableSandboxedEnvironment:
    """kimi-cli's prompt environment (``soul/agent.py``), sandboxed as every user template in codeact is."""
    return ImmutableSandboxedEnvironment(
        keep_trailing_newline=True,
        lstrip_blocks=True,
        trim_blocks=True,
        variable_start_string="${",
        variable_end_string="}",
        undefined=jinja2.StrictUndefined,
        autoescape=False,
    )


def _prompt(path: Path, args: Mapping[str, str], label: str) -> KimiPrompt:
    """Read the prompt and everything it includes; check its syntax and that each ``${NAME}`` has a value."""
    if not path.is_file():
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: system_prompt_path {str(path)!r} is not a file; "
            "a path is relative to the file that declares it",
            code="blueprint.kimi.file",
        )
    source = read_blueprint_text(path, str(path)).strip()
    includes: dict[str, str] = {}
    undefined = _check(source, path.name, path.parent, includes, label)
    missing = sorted(undefined - set(args) - set(KIMI_BUILTIN_ARGS))
    if missing:
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: the system prompt {path.name!r} uses ${{{missing[0]}}}, which has no value; "
            f"add it to agent.system_prompt_args (kimi's built-in arguments: {', '.join(KIMI_BUILTIN_ARGS)})",
            code="blueprint.kimi.prompt.arg",
        )
    return KimiPrompt(path=path, source=source, includes=tuple(sorted(includes.items())), args=tuple(args.items()))


def _check(text: str, name: str, folder: Path, includes: dict[str, str], label: str) -> set[str]:
    """The variables ``text`` (and what it includes) reads; fills ``includes`` with the included files."""
    try:
        parsed = _environment().parse(text)
    except jinja2.TemplateSyntaxError as exc:
        raise BlueprintLoadError(
            f"kimi agent file {label!r}: the system prompt {name!r} is not a valid template: {exc.message} "
            f"(line {exc.lineno}); fix the Jinja syntax",
            code="blueprint.kimi.prompt.template",
        ) from None
    names = set(meta.find_undeclared_variables(parsed))
    for target in meta.find_referenced_templates(parsed):
        if target is None:
            raise BlueprintLoadError(
                f"kimi agent file {label!r}: the system prompt {name!r} includes a computed file name; "
                'name the file, e.g. {% include "extra.md" %}',
                code="blueprint.kimi.prompt.template",
            )
        if target in includes:
            continue
        file = (folder / target).resolve()
        # As kimi-cli's sandboxed loader: an include stays inside the prompt's folder.
        if not file.is_relative_to(folder.resolve()) or not file.is_file():
            raise BlueprintLoadError(
                f"kimi agent file {label!r}: the system prompt {name!r} includes {target!r}, which is not a file "
                f"in {str(folder)!r}; an include is relative to the prompt's folder and stays inside it",
                code="blueprint.kimi.file",
            )
        includes[target] = read_blueprint_text(file, str(file))  # as a loader reads it: not stripped
        names |= _check(includes[target], target, folder, includes, label)
    return names


def render_kimi_prompt(prompt: KimiPrompt, builtins: Mapping[str, str]) -> str:
    """The system prompt as kimi-cli renders it: built-in arguments first, the agent's arguments over them.

    Raises:
        BlueprintLoadError: ``blueprint.kimi.prompt.arg`` for a value still undefined at render time.
    """
    env = _environment().overlay(loader=jinja2.DictLoader(dict(prompt.includes)))
    try:
        return env.from_string(prompt.source).render({**builtins, **dict(prompt.args)})
    except jinja2.UndefinedError as exc:
        raise BlueprintLoadError(
            f"the kimi system prompt {prompt.path.name!r} uses an undefined value: {exc.message}; "
            "add it to agent.system_prompt_args",
            code="blueprint.kimi.prompt.arg",
        ) from None
    except Exception as exc:  # a sandbox refusal or an error inside the template
        raise BlueprintLoadError(
            f"the kimi system prompt {prompt.path.name!r} failed to render: {exc}; fix the template",
            code="blueprint.kimi.prompt.template",
        ) from None


def kimi_builtin_args(*, work_dir: Path | None = None, now: _dt.datetime | None = None) -> dict[str, str]:
    """kimi-cli's built-in prompt arguments with the host's real values (see :data:`KIMI_BUILTIN_ARGS`)."""
    directory = Path(work_dir) if work_dir is not None else Path.cwd()
    moment = now if now is not None else _dt.datetime.now()
    return {
        "KIMI_NOW": moment.astimezone().isoformat(),
        "KIMI_OS": _os_name(),
        "KIMI_SHELL": _shell(),
        "KIMI_WORK_DIR": str(directory),
        "KIMI_WORK_DIR_LS": _listing(directory),
        "KIMI_AGENTS_MD": _agents_md(directory),
        "KIMI_SKILLS": "No skills found.",
        "KIMI_ADDITIONAL_DIRS_INFO": "",
    }


def _os_name() -> str:
    system = platform.system()
    return {"Darwin": "macOS"}.get(system, system or "unknown")


def _shell() -> str:
    """As kimi-cli's ``Environment.detect``: the shell's name and path (``bash (`/bin/bash`)``)."""
    if platform.system() == "Windows":
        return "Windows PowerShell (`powershell.exe`)"
    path = os.environ.get("SHELL") or ("/bin/bash" if Path("/bin/bash").is_file() else "/bin/sh")
    return f"{Path(path).name} (`{path}`)"


def _listing(directory: Path) -> str:
    """Two levels of the directory, as kimi-cli's ``list_directory`` shows them."""
    lines: list[str] = []

    def walk(folder: Path, depth: int, indent: str) -> None:
        try:
            entries = sorted(folder.iterdir(), key=lambda p: (not p.is_dir(), p.name))
        except OSError:
            return
        for entry in entries[:_LS_ENTRIES]:
            is_dir = entry.is_dir() and not entry.is_symlink()
            lines.append(f"{indent}{entry.name}{'/' if is_dir else ''}")
            if is_dir and depth < 2:
                walk(entry, depth + 1, indent + "  ")
        if len(entries) > _LS_ENTRIES:
            lines.append(f"{indent}... and {len(entries) - _LS_ENTRIES} more")

    walk(directory, 1, "")
    return "\n".join(lines) or "(empty directory)"


def _agents_md(directory: Path) -> str:
    for name in ("AGENTS.md", "agents.md"):
        path = directory / name
        if path.is_file():
            try:
                return path.read_bytes()[:_AGENTS_MD_BYTES].decode("utf-8", errors="replace").strip()
            except OSError:
                return ""
    return ""


def _toolkits(tools: list[str], label: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The toolkit grants for kimi's tools, and the tools codeact has no counterpart for (short names)."""
    grants: dict[str, list[str] | None] = {"system": None}
    unavailable: list[str] = []
    for tool in tools:
        if tool in KIMI_TOOLS:
            ref, operations, how = KIMI_TOOLS[tool]
            if ref is None and how.startswith("not available"):
                unavailable.append(tool.rsplit(":", 1)[1])
            if ref is None or ref == "agents":
                continue  # done by the code itself, or granted with the sub-agents
        elif tool.startswith(_KIMI_PACKAGE):
            unavailable.append(tool.rsplit(":", 1)[-1])
            continue
        elif ":" not in tool and tool.replace("_", "").replace("-", "").isalnum():
            ref, operations = tool, None  # a codeact toolkit name, resolved by the host's registry
        else:
            raise BlueprintLoadError(
                f"kimi agent file {label!r}: tool {tool!r} has no codeact counterpart; use one of kimi-cli's tools "
                "(kimi_cli.tools.*) or the name of a codeact toolkit (see docs/kimi-agents.md)",
                code="blueprint.kimi.tool.unknown",
            )
        if ref in grants and grants[ref] is None:
            continue
        grants[ref] = None if operations is None else [*(grants.get(ref) or []), *operations]
    grants_list = [{"ref": ref} if ops is None else {"ref": ref, "operations": ops} for ref, ops in grants.items()]
    return grants_list, list(dict.fromkeys(unavailable))
