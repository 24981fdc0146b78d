"""A :class:`HostTransport` over HTTP: a runner calls the run-scoped API of a ``codeact serve`` host.

Each action is ``POST {base_url}/v1/runs/{run_id}/api/{action}`` with the payload as JSON, the
bearer token and ``X-Runner-Id`` (the caller the host checks). A refusal comes back as the seed's
``AgentAPIError`` and is raised as :class:`RunnerAPIError` with its code (``unauthorized``,
``rate_limited``, ``deadline_exceeded``, ...). Streams are not served over this transport.
"""

from __future__ import annotations

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

        run_id = str(payload.get("run_id", ""))
        body = {k: v for k, v in payload.items() if k != "run_id"}
        try:
            answer = await self._client.post(f"/v1/runs/{run_id}/api/{action}", json=body, timeout=timeout)
        except httpx.TimeoutException as exc:
            raise RunnerAPIError.make("deadline_exceeded", f"{action}: the host did not answer in time") from exc
        except httpx.HTTPError as exc:
            raise RunnerAPIError.make(
                "runtime_error", f"{action}: cannot reach the host: {exc}", retryable=True, action=action
            ) from exc
        try:
            data = answer.json()
        except ValueError:
            data = None
        if answer.status_code >= 400:
            error = data.get("error") if isinstance(data, dict) else None
            if isinstance(error, dict) and "code" in error and "message" in error:
                raise RunnerAPIError(AgentAPIError.model_validate(error))
            raise RunnerAPIError.make(
                "runtime_error", f"{action}: the host answered HTTP {answer.status_code}", action=action
            )
        if not isinstance(data, dict):
            raise RunnerAPIError.make("runtime_error", f"{action}: the host's answer is not a JSON object")
        return data

    def stream(self, action: str, payload: dict[str, object], *, timeout: float) -> AsyncIterator[dict[str, object]]:
        """Not served over HTTP."""
        raise RunnerAPIError.make("invalid_argument", f"{action}: streams are not served over the HTTP transport")

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()
