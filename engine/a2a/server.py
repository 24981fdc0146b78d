"""The A2A server behind ``codeact a2a serve``: one blueprint agent, each A2A task one run.

A task's text is the run's input; its A2A context is the codeact session, so follow-up messages
in the same context continue the conversation. Progress streams as ``working`` status updates
(one per round, with what the code printed), the answer comes back as the task's artifact (text,
or data when the agent finished with a dict or list), a failed run fails the task, and
``tasks/cancel`` cancels the run (the round in progress is recorded as interrupted).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentSkill, DataPart, Part, TextPart
from a2a.utils import new_agent_text_message, new_task

from codeact.sandbox.runtime.codec import plain

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from codeact.engine.agent import Agent

__all__ = ["AgentExecutorAdapter", "agent_card", "build_app"]

_EXCERPT = 500


def agent_card(agent: Agent, *, url: str) -> AgentCard:
    """The agent card of a blueprint agent served at ``url``."""
    spec: Any = agent.spec
    name = str(getattr(spec, "id", None) or "codeact-agent")
    description = str(getattr(spec, "description", None) or f"The codeact agent {name!r}.")
    return AgentCard(
        name=name,
        description=description,
        url=url,
        version="1.0.0",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id=name, name=name, description=description, tags=["codeact"])],
    )


class AgentExecutorAdapter(AgentExecutor):
    """Runs A2A tasks on one codeact agent (one run at a time; tasks queue)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._lock = asyncio.Lock()
        self._running: dict[str, asyncio.Task[None]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Run the agent on the task's text, streaming its rounds as status updates."""
        task = context.current_task
        if task is None:
            if context.message is None:
                raise ValueError("an A2A task needs a message")
            task = new_task(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        run = asyncio.create_task(self._run(context.get_user_input(), task.context_id, updater))
        self._running[task.id] = run
        try:
            await run
        except asyncio.CancelledError:
            if not run.cancelled():
                raise
        finally:
            self._running.pop(task.id, None)

    async def _run(self, text: str, session: str, updater: TaskUpdater) -> None:
        from codeact.engine.events import CodeCompleted, RunCompleted, RunFailed

        def say(message: str) -> Any:
            return new_agent_text_message(message, updater.context_id, updater.task_id)

        async with self._lock:
            async for event in self.agent.run(text, session_id=session):
                if isinstance(event, CodeCompleted):
                    printed = (event.stdout or "").strip()[:_EXCERPT]
                    await updater.update_status(
                        _working(),
                        message=say(f"round {event.round}: {event.status}" + (f"\n{printed}" if printed else "")),
                    )
                elif isinstance(event, RunCompleted):
                    answer = event.answer
                    part = Part(root=TextPart(text=answer)) if isinstance(answer, str) else _data(answer)
                    await updater.add_artifact([part], name="answer")
                    await updater.complete()
                    return
                elif isinstance(event, RunFailed):
                    error = event.error or {}
                    await updater.failed(say(f"{error.get('code', 'error')}: {error.get('message', '')}"))
                    return
        await updater.failed(say("the run ended without an answer"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run, if it is running, and mark the task canceled."""
        task = context.current_task
        if task is None:
            return
        run = self._running.get(task.id)
        if run is not None:
            run.cancel()
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def _working() -> Any:
    from a2a.types import TaskState

    return TaskState.working


def _data(value: Any) -> Part:
    value = plain(value)  # the codec's tags are for the sandbox, not for an A2A peer
    return Part(root=DataPart(data=value if isinstance(value, dict) else {"value": value}))


def build_app(agent: Agent, *, url: str) -> Starlette:
    """The Starlette app serving ``agent`` over A2A (JSON-RPC, streaming, card at the well-known path)."""
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore

    handler = DefaultRequestHandler(agent_executor=AgentExecutorAdapter(agent), task_store=InMemoryTaskStore())
    return A2AStarletteApplication(agent_card=agent_card(agent, url=url), http_handler=handler).build()
