"""Structured output (seed 002's ``outputSchema`` / ``outputType``): a run's final answer checked against a schema.

1. The schema comes from the Python API (``output_type=``: a JSON Schema dict, or one as JSON text, or a
   pydantic model class) or the blueprint's ``outputSchema`` (a JSON Schema mapping); the API's wins.
   It is shown to the model before the task (``prompts/output_schema.j2``).
2. When a run completes, its answer is read as JSON: a string holding JSON (prose and a code fence
   around it allowed) is parsed, unless the schema asks for a string.
3. It is validated (``jsonschema`` for a schema, ``model_validate`` for a pydantic model). The first
   violation is told to the model once, plainly (``prompts/output_invalid.j2``), and one repair round
   follows; an answer still invalid ends the run with ``output.invalid`` naming the violation.
4. The answer a valid run carries is the validated JSON value; ``RunResult.answer`` is the pydantic
   instance when a model class was given.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from codeact import prompts
from codeact.engine.agent.context import Outcome, RunContext
from codeact.engine.blueprint.json_text import json_in_text
from codeact.engine.errors import CodeactError, ErrorInfo

__all__ = ["OutputSchema", "output_schema_for", "review"]

_SHOWN = 2_000


@dataclass(frozen=True)
class OutputSchema:
    """What a run's final answer must be: a JSON Schema, and the pydantic model it came from (if any)."""

    schema: dict[str, Any]
    model: type[BaseModel] | None = None

    @classmethod
    def of(cls, value: Any, *, where: str = "output_type") -> OutputSchema:
        """From a pydantic model class, a JSON Schema mapping, or a JSON Schema as JSON text.

        Raises:
            CodeactError: ``output.schema.invalid``, saying what is wrong with ``value``.
        """
        if isinstance(value, type) and issubclass(value, BaseModel):
            return cls(schema=value.model_json_schema(), model=value)
        from codeact.engine.blueprint import read_schema

        schema, problem = read_schema(value, where=where)
        if schema is None:
            raise CodeactError(
                f"{problem}: pass a JSON Schema dict or a pydantic model class", code="output.schema.invalid"
            )
        return cls(schema=schema)

    def check(self, answer: Any) -> tuple[Any, str | None]:
        """``(the answer as validated JSON, None)``, or ``(the answer as read, the first violation)``."""
        from codeact.sandbox.runtime.codec import plain

        value = plain(answer)
        if isinstance(value, str) and self.schema.get("type") != "string":
            parsed, problem = json_in_text(value)
            if problem is not None:
                return value, problem
            value = parsed
        if self.model is not None:
            try:
                return self.model.model_validate(value).model_dump(mode="json"), None
            except ValidationError as exc:
                first = exc.errors()[0]
                path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
                return value, f"at {path}: {first['msg']}"
        from jsonschema import validators
        from jsonschema.exceptions import best_match

        error = best_match(validators.validator_for(self.schema)(self.schema).iter_errors(value))
        if error is None:
            return value, None
        return value, f"at {error.json_path}: {error.message}"

    def instance(self, value: Any) -> Any:
        """The answer as the caller asked for it: the pydantic instance when a model class was given."""
        return self.model.model_validate(value) if self.model is not None else value

    def shown(self) -> str:
        """The schema as the model is shown it."""
        return json.dumps(self.schema, ensure_ascii=False, indent=2)

    def intro(self) -> str:
        """The text before the task telling the model the answer's shape."""
        return prompts.render("output_schema.j2", schema=self.shown()).strip()

    def repair(self, answer: Any, problem: str) -> str:
        """What the model is told when its answer does not match."""
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False, default=str)
        if len(text) > _SHOWN:
            text = text[:_SHOWN] + " ..."
        return prompts.render("output_invalid.j2", problem=problem, answer=text, schema=self.shown()).strip()


def output_schema_for(output_type: Any, blueprint_schema: Any) -> OutputSchema | None:
    """The agent's output schema: ``output_type`` (the Python API) else the blueprint's ``outputSchema``."""
    if output_type is not None:
        return OutputSchema.of(output_type)
    if blueprint_schema is not None:
        return OutputSchema.of(blueprint_schema, where="outputSchema")
    return None


def review(ctx: RunContext, outcome: Outcome) -> Outcome | str:
    """A run's outcome with its answer checked against ``ctx.deps.output``, or the repair text for one more round.

    The outcome comes back with its answer validated, or failed.
    Only a completed run's answer is checked (not a question, a failure, or a hook's end); the repair
    text is given once (``ctx.state.output_repaired`` records it), then the run fails with ``output.invalid``.
    """
    schema: OutputSchema | None = ctx.deps.output  # (typed Any there: this module imports that one)
    if schema is None or outcome.status != "completed" or outcome.reason == "hook":
        return outcome
    value, problem = schema.check(outcome.answer)
    if problem is None:
        return replace(outcome, answer=value)
    if not ctx.state.output_repaired:
        ctx.state.output_repaired = True
        return schema.repair(value, problem)
    message = (
        f"the final answer does not match the output schema after one repair round: {problem}; "
        "say the answer's shape in the instructions, or loosen the schema (outputSchema / output_type)"
    )
    return Outcome(status="failed", reason="output_invalid", error=ErrorInfo(code="output.invalid", message=message))
