"""codeact as an AgentRunner (protocol v1, seed 003): entities, a blueprint as a runner, results.

::

    from codeact.engine.runner import BlueprintRunner, Interactions, RunnerContext

    runner = BlueprintRunner.from_blueprint("agent.yaml", toolkits=[DevOps()])
    runner.manifest                                    # RunnerManifest (from the blueprint)
    async for result in runner.run(context, run_id="r1", interactions=Interactions()):
        print(result.sequence, result.type, result.data)

See docs/runner.md.
"""

from __future__ import annotations

from codeact.engine.runner._input import compose_input
from codeact.engine.runner._manifest import declared_permissions
from codeact.engine.runner._runtime import configured_spec, runtime_notes, runtime_toolkits
from codeact.engine.runner.attachments import Attachments
from codeact.engine.runner.blueprint_runner import BlueprintRunner, FlowRunner, conversation_of, session_id_for
from codeact.engine.runner.entities import (
    RUNNER_ERROR_CODES,
    AgentAPIError,
    InteractionRequest,
    InteractionSubmission,
    RunnerAPIError,
    RunnerContext,
    RunnerError,
    RunnerManifest,
    RunnerResult,
)
from codeact.engine.runner.interactions import Interactions, continuation_context
from codeact.engine.runner.mapper import ResultMapper, runner_code
from codeact.engine.runner.proxy import AuthorizationRegistry, HostTransport, RunAPIProxy, RunAuthorization

__all__ = [
    "RUNNER_ERROR_CODES",
    "AgentAPIError",
    "Attachments",
    "AuthorizationRegistry",
    "BlueprintRunner",
    "FlowRunner",
    "HostTransport",
    "InteractionRequest",
    "InteractionSubmission",
    "Interactions",
    "ResultMapper",
    "RunAPIProxy",
    "RunAuthorization",
    "RunnerAPIError",
    "RunnerContext",
    "RunnerError",
    "RunnerManifest",
    "RunnerResult",
    "compose_input",
    "configured_spec",
    "continuation_context",
    "conversation_of",
    "declared_permissions",
    "runner_code",
    "runtime_notes",
    "runtime_toolkits",
    "session_id_for",
]
