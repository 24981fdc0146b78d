"""Prompt templates (Jinja2) and the one environment that renders them.

All prose the model sees lives in ``prompts/*.j2``. Templates are loaded through
``importlib.resources`` and rendered by a single ``jinja2.Environment`` with ``StrictUndefined``:
a missing variable is a :class:`TemplateError` naming the template and the variable.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from codeact.prompts.errors import CodeactError, TemplateError

if TYPE_CHECKING:
    import jinja2

__all__ = ["CodeactError", "TemplateError", "environment", "render", "template_names"]

# StrictUndefined messages: "'name' is undefined" and "'dict object' has no attribute 'name'"
_UNDEFINED = re.compile(r"'([^']+)' is undefined|has no attribute '([^']+)'")


@lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    """The shared Jinja2 environment (templates from this package, ``StrictUndefined``)."""
    import jinja2  # imported lazily: ``import prompts`` stays cheap

    def _load(name: str) -> str | None:
        path = resources.files(__name__).joinpath(name)
        return path.read_text(encoding="utf-8") if path.is_file() else None  # None -> TemplateNotFound

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_load),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def template_names() -> list[str]:
    """Every template shipped in this package, sorted."""
    return sorted(p.name for p in resources.files(__name__).iterdir() if p.name.endswith(".j2"))


def render(name: str, /, **variables: Any) -> str:
    """Render the template ``name`` with ``variables``.

    Raises:
        TemplateError: the template is missing, malformed, or uses an undefined variable.
    """
    import jinja2

    try:
        return environment().get_template(name).render(**variables)
    except jinja2.UndefinedError as exc:
        match = _UNDEFINED.search(str(exc))
        variable = (match.group(1) or match.group(2)) if match else None
        raise TemplateError(
            f"template {name!r} uses undefined variable {variable!r}: pass it to render()",
            template=name,
            variable=variable,
        ) from None
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(
            f"template {name!r} does not exist in the prompts package (missing: {exc.name!r}); "
            "prompts.template_names() lists the shipped templates",
            template=name,
        ) from None
    except (jinja2.TemplateError, OSError) as exc:
        raise TemplateError(f"template {name!r} could not be rendered: {exc}", template=name) from None
