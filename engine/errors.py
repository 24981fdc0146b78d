"""The one exception hierarchy of codeact.

::

    CodeactError                        prompts.errors (the root every package may import; a leaf module)
    ├── TemplateError                   a prompt template failed to render (names template + variable)
    ├── MissingExtraError               a feature needs an optional extra: one line, pip install 'codeact[X]'
    ├── BlueprintError                  configuration: a blueprint failed to load/validate/build
    │   ├── BlueprintLoadError          YAML/IO/type errors (blueprint.yaml.*, blueprint.type.*, ...)
    │   └── BlueprintFactoryError       validation failed or the host context is incomplete
    ├── HookError                       a hook or interceptor failed or returned what cannot be used (names it)
    ├── ModelError                      the language model call failed
    │   ├── ModelConfigError            engine.model.errors: no model, bad profiles file, bad route
    │   │   └── ProfileError            "profile not found or incompatible with provider: NAME"
    │   ├── ScriptExhaustedError        the scripted model ran out of replies
    │   └── ModelProviderError          after retries: RateLimit, Connection (Timeout), Server, Auth,
    │                                   BadRequest (NotFound, ContextWindow) subclasses
    ├── PromptConfigError               segments.errors: a prompt configuration is invalid
    ├── ReplyParseError                 segments.errors: a reply could not be read
    │   ├── CodeParseError              no runnable code (the message is feedback for the model)
    │   └── ThoughtParseError           an empty Thought/Plan reply
    ├── SandboxError                    sandbox.errors: the sandbox could not run the code
    │   ├── IsolationUnavailableError   bubblewrap missing and no weaker mode named
    │   ├── SandboxImageMissingError    the Docker image is not built (`codeact sandbox image build`)
    │   ├── EnvironmentBuildError       a declared environment (packages/preset) could not be built
    │   └── ChannelClosedError          sandbox.channel: the runtime connection is gone
    ├── ToolkitError                    toolkits.errors: toolkit registration / bridge host side
    │   ├── ToolkitDefinitionError      a decorated toolkit is declared wrongly (names the method)
    │   ├── ToolkitNotFoundError        a name is not in the registry
    │   ├── DuplicateToolkitError       two toolkits under one name
    │   └── ToolkitLoadError            --toolkit MOD:OBJ could not be loaded
    └── StoreError                      the session store failed (names the URL, never credentials)
        ├── SessionBusyError            engine.store: another run holds the session's lock
        └── CorruptRecordError          engine.store: a stored entry does not decode (names session, round, field)

``sandbox``, ``toolkits`` and ``segments`` may not import ``engine`` (ARCHITECTURE.md section 2),
so their errors are defined in those packages and re-exported here; the model and store errors
live beside their adapters. Exceptions carry structured attributes (``code`` always) and never log.
``ErrorInfo`` (also in ``prompts.errors``) is an error as a value: the ``{"code", "message"}`` object
events, records and the service carry; ``CodeactError.info()`` makes one.
A code that raises (a tool error, ZeroDivisionError, ...) is not an engine error: it is a normal
``ExecutionResult`` that the model sees as an Evaluation.
"""

from __future__ import annotations

from codeact.prompts.errors import CodeactError, ErrorInfo, MissingExtraError, TemplateError
from codeact.sandbox.errors import (
    EnvironmentBuildError,
    IsolationUnavailableError,
    SandboxError,
    SandboxImageMissingError,
)
from codeact.segments.errors import CodeParseError
from codeact.toolkits.errors import ToolkitDefinitionError, ToolkitError, ToolkitNotFoundError

__all__ = [
    "BlueprintError",
    "BlueprintFactoryError",
    "BlueprintLoadError",
    "CodeParseError",
    "CodeactError",
    "EnvironmentBuildError",
    "ErrorInfo",
    "HookError",
    "IsolationUnavailableError",
    "MissingExtraError",
    "ModelError",
    "SandboxError",
    "SandboxImageMissingError",
    "StoreError",
    "TemplateError",
    "ToolkitDefinitionError",
    "ToolkitError",
    "ToolkitNotFoundError",
]


class BlueprintError(CodeactError):
    """A blueprint could not be loaded, validated or turned into an agent."""

    code = "blueprint.error"


class BlueprintLoadError(BlueprintError):
    """The blueprint file could not be read or parsed.

    Args:
        message: The problem and its fix.
        code: The stable ai4j-compatible code, e.g. ``blueprint.yaml.invalid``.
        path: JSON-path-like location (``$.tools[1]``) or None.
    """

    def __init__(self, message: str, *, code: str, path: str | None = None) -> None:
        super().__init__(message, code=code)
        self.path = path


class BlueprintFactoryError(BlueprintError):
    """The factory refused to build an agent; ``report`` holds validation issues if any."""

    def __init__(self, message: str, *, code: str, report: object = None) -> None:
        super().__init__(message, code=code)
        self.report = report


class HookError(CodeactError):
    """A hook returned what the engine cannot use, or an interceptor raised; the message names it.

    Codes: ``hook.update`` (a variable it set), ``hook.inject`` (a tool it injected), ``interceptor.failed``.

    Args:
        message: What failed, naming the hook or interceptor, and the fix.
        code: The stable code.
        name: The hook's or interceptor's name (its ``name``, else its class name).
        point: ``before_model``, ``intercept_tool``, ... (where it was called).
    """

    code = "hook.error"

    def __init__(self, message: str, *, code: str, name: str, point: str) -> None:
        super().__init__(message, code=code)
        self.name = name
        self.point = point


class ModelError(CodeactError):
    """The model call failed after retries (provider error, bad configuration, no model)."""

    code = "model.error"


class StoreError(CodeactError):
    """The session store failed; the message names the store URL (without credentials)."""

    code = "store.error"
