"""A codeact blueprint as a LangBot ``Runner`` component (``pip install codeact[langbot]``).

Subclass :class:`CodeactRunner` in the plugin's component module and name the blueprint::

    class Agent(CodeactRunner):
        blueprint = Path(__file__).parent / "agent.yaml"

(:func:`codeact.engine.runner.langbot.write_plugin` writes the whole plugin.) Each run: the SDK's
``RunnerContext`` becomes codeact's, the host's models and tools are reached through the
run-scoped API (the plugin runtime's connection, the same actions and payloads as the SDK's
``RunnerAPIProxy``), and every result is handed back as the SDK's ``RunnerResult``.

LangBot answers interactions with a new run (``interaction.submitted``), so a call that needs an
approval cannot wait inside a LangBot run: it is denied with the reason (grant such toolkits
``approval: auto`` for a LangBot binding). ``ask_user`` works as everywhere: the run ends with
the question and the answer continues the conversation's session.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

from langbot_plugin.api.definition.components.runner.runner import Runner
from langbot_plugin.api.entities.builtin.runner.context import RunnerContext as SdkRunnerContext
from langbot_plugin.api.entities.builtin.runner.result import RunnerResult as SdkRunnerResult
from langbot_plugin.entities.io.actions.enums import PluginToRuntimeAction
from langbot_plugin.entities.io.errors import ActionCallError, ActionCallTimeoutError

from codeact.engine.runner.blueprint_runner import BlueprintRunner
from codeact.engine.runner.entities import AgentAPIError, RunnerAPIError, RunnerContext
from codeact.engine.runner.langbot.runner_fields import MODEL_FIELD

__all__ = ["MODEL_FIELD", "CodeactRunner", "SdkTransport"]


class SdkTransport:
    """:class:`~codeact.engine.runner.proxy.HostTransport` over the plugin runtime's connection (the SDK's handler)."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    @staticmethod
    def _error(action: str, exc: Exception) -> RunnerAPIError:
        if isinstance(exc, ActionCallTimeoutError):
            return RunnerAPIError.make("deadline_exceeded", str(exc), retryable=True, action=action)
        if isinstance(exc, ActionCallError):
            data = exc.data
            raw = data.get("error") if isinstance(data.get("error"), dict) else data
            if isinstance(raw, dict) and {"code", "message"} <= raw.keys():
                return RunnerAPIError(AgentAPIError.model_validate(raw))
            return RunnerAPIError.make("runtime_error", str(exc), action=action)
        return RunnerAPIError.make("runtime_error", f"{action}: {exc}", retryable=True, action=action)

    async def call(self, action: str, payload: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        """One action through the plugin runtime."""
        try:
            response = await self.handler.call_action(PluginToRuntimeAction(action), payload, timeout)
        except (ActionCallError, ActionCallTimeoutError) as exc:
            raise self._error(action, exc) from exc
        return dict(response)

    async def stream(self, action: str, payload: dict[str, Any], *, timeout: float) -> AsyncIterator[dict[str, Any]]:
        """A streamed action through the plugin runtime."""
        try:
            async for item in self.handler.call_action_generator(PluginToRuntimeAction(action), payload, timeout):
                yield dict(item)
        except (ActionCallError, ActionCallTimeoutError) as exc:
            raise self._error(action, exc) from exc


class CodeactRunner(Runner):
    """The LangBot Runner that runs a codeact blueprint (subclass it and set ``blueprint``).

    Attributes:
        blueprint: The blueprint file (absolute, or relative to the plugin's working directory).
        toolkits: Host toolkits for the blueprint (instances, classes or ``MODULE:OBJECT`` strings).
        store: The session store URL; default ``$CODEACT_STORE``, else ``data/codeact-sessions.db``
            in the plugin's directory.
        show_work: Also stream the model's code as messages (off: a chat sees only the answers).
        options: Other ``BlueprintRunner.from_blueprint`` options (``sandbox``, ``isolation``, ...).
    """

    blueprint: ClassVar[str | os.PathLike[str]] = ""
    toolkits: ClassVar[tuple[object, ...]] = ()
    store: ClassVar[str | None] = None
    show_work: ClassVar[bool] = False
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        super().__init__()
        self._codeact: BlueprintRunner | None = None
        self._building = asyncio.Lock()

    @classmethod
    def get_config_schema(cls) -> list[dict[str, Any]]:
        """The binding form: the model choice (the blueprint's inputs are in the component YAML)."""
        return [dict(MODEL_FIELD)]

    async def codeact(self) -> BlueprintRunner:
        """The blueprint's runner (built on first use, shared by the runs of this component)."""
        async with self._building:
            if self._codeact is None:
                if not str(self.blueprint):
                    raise RunnerAPIError.make("invalid_argument", f"{type(self).__name__}.blueprint is not set")
                store = self.store or os.environ.get("CODEACT_STORE")
                if store is None:
                    Path("data").mkdir(exist_ok=True)
                    store = f"sqlite:///{Path('data/codeact-sessions.db').resolve()}"
                self._codeact = BlueprintRunner.from_blueprint(
                    self.blueprint, toolkits=list(self.toolkits), store=store, show_work=self.show_work, **self.options
                )
            return self._codeact

    async def run(self, ctx: SdkRunnerContext) -> AsyncGenerator[SdkRunnerResult, None]:
        """One run: the SDK context in, the SDK results out (see the module docstring)."""
        runner = await self.codeact()
        context = RunnerContext.model_validate(ctx.model_dump(mode="json"))
        handler = self._plugin_runtime_handler
        host = SdkTransport(handler) if handler is not None else None
        async for result in runner.run(context, run_id=ctx.run_id, host=host):
            yield SdkRunnerResult.model_validate(result.to_json())

    async def aclose(self) -> None:
        """Close the blueprint's model client and store."""
        if self._codeact is not None:
            await self._codeact.aclose()
            self._codeact = None
