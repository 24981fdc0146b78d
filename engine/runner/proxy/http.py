"""A :class:`HostTransport` over HTTP: a runner calls the run-scoped API of a ``codeact serve`` host.

Each action is ``POST {base_url}/v1/runs/{run_id}/api/{action}`` with the payload as JSON, the
bearer token and ``X-Runner-Id`` (the caller the host checks). A refusal comes back as the seed's
``AgentAPIError`` and is raised as :class:`RunnerAPIError` with its code (``unauthorized``,
``rate_limited``, ``deadline_exceeded``, ...). A streamed action (``artifact_open_stream``) answers JSON
lines, one object each, over a chunked response.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from codeact.engine.runner.entities import AgentAPIError, RunnerAPIError

__all__ = ["HttpHostTransport"]


class HttpHostTransport:
    """Sends run-scoped actions to a ``codeact serve`` host.

    Args:
        base_url: The host's URL (``http://127.0.0.1:8000``).
        token: A bearer token of the host that may use ``runner_id``.
        runner_id: The runner the runs belong to (sent as ``X-Runner-Id``).
    """

    def __init__(self, base_url: str, *, token: str, runner_id: str) -> None:
        import httpx

        self.runner_id = runner_id
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "X-Runner-Id": runner_id},
        )

    async def call(self, action: str, payload: dict[str, object], *, timeout: float) -> dict[str, object]:
        """POST the action; the host's JSON answer, or its refusal raised."""
        import httpx

        run_id, body = self._split(payload)
        try:
            answer = await self._client.post(f"/v1/runs/{run_id}/api/{action}", json=body, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise RunnerAPIError.make("deadline_exceeded", f"{action}: the host did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise _unreachable(action, exc) from exc
        try:
            data = answer.json()
        except ValueError:
            data = None
        if answer.status_code >= 400:
            raise _refusal(action, answer.status_code, data)
        if not isinstance(data, dict):
            raise RunnerAPIError.make("runtime_error", f"{action}: the host's answer is not a JSON object")
        return data

    async def stream(
        self, action: str, payload: dict[str, object], *, timeout: float
    ) -> AsyncIterator[dict[str, object]]:
        """POST the action; the host's answer as it streams, one JSON object per line (its refusal raised)."""
        import httpx

        run_id, body = self._split(payload)
        try:
            async with self._client.stream(
                "POST", f"/v1/runs/{run_id}/api/{action}", json=body, timeout=timeout
            ) as answer:
                if answer.status_code >= 400:
                    text = (await answer.aread()).decode("utf-8", "replace")
                    try:
                        data = json.loads(text)
                    except ValueError:
                        data = None
                    raise _refusal(action, answer.status_code, data)
                async for line in answer.aiter_lines():
                    if not line.strip():
                        continue
                    try:
                        item = json.loads(line)
                    except ValueError:
                        item = None
                    if not isinstance(item, dict):
                        raise RunnerAPIError.make(
                            "runtime_error", f"{action}: a line of the host's stream is not a JSON object"
                        )
                    yield item
        except httpx.TimeoutException as exc:
            raise RunnerAPIError.make("deadline_exceeded", f"{action}: the host did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise _unreachable(action, exc) from exc

    @staticmethod
    def _split(payload: dict[str, object]) -> tuple[str, dict[str, object]]:
        return str(payload.get("run_id", "")), {k: v for k, v in payload.items() if k != "run_id"}

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _unreachable(action: str, exc: Exception) -> RunnerAPIError:
    return RunnerAPIError.make(
        "runtime_error", f"{action}: cannot reach the host: {exc}", retryable=True, action=action
    )


def _refusal(action: str, status: int, data: object) -> RunnerAPIError:
    """The host's ``AgentAPIError`` of a refused call (or a ``runtime_error`` naming the HTTP status)."""
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and "code" in error and "message" in error:
        return RunnerAPIError(AgentAPIError.model_validate(error))
    return RunnerAPIError.make("runtime_error", f"{action}: the host answered HTTP {status}", action=action)
