"""Fill-in-the-middle: the code frame the model completes, and the FIM token table per model family.

The frame is ``prefix + hole + suffix``. The prefix is a header comment listing the variables restored
from earlier rounds (name, type, short repr), the configured imports, and ``try:``; the suffix is the
exception handler. The model writes the middle; :meth:`CodeFrame.program` indents it into the ``try:``
body, so the program the sandbox runs is exactly ``prefix + body + suffix`` and an error on program
line ``n`` is middle line ``n - len(prefix lines)`` (:meth:`CodeFrame.map_line`).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from codeact import prompts
from codeact.segments._text import (
    clean_code,
    fix_first_line,
    normalize_newlines,
    normalize_tabs,
    one_line,
    parse_python,
    string_lines,
)
from codeact.segments.errors import PromptConfigError

__all__ = ["FIM_FAMILIES", "CodeFrame", "FimTokens", "build_frame", "fim_tokens_for", "validate_imports"]

_HOLE_INDENT = "    "


class FimTokens(BaseModel):
    """The FIM markers of one model family.

    Attributes:
        family: Name of the family (``qwen``, ``deepseek``, ...) or ``custom``.
        prefix: Marker before the prefix text.
        suffix: Marker before the suffix text.
        middle: Marker after which the model writes the middle (empty for suffix-first formats).
        order: ``psm`` = prefix, suffix, middle; ``spm`` = suffix first (Codestral).
        stop: Stop strings for a raw completion request.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    family: str = "custom"
    prefix: str
    suffix: str
    middle: str = ""
    order: Literal["psm", "spm"] = "psm"
    stop: tuple[str, ...] = ()

    def wrap(self, prefix: str, suffix: str) -> str:
        """The FIM text for ``prefix`` and ``suffix`` in this family's order."""
        if self.order == "spm":
            return f"{self.suffix}{suffix}{self.prefix}{prefix}{self.middle}"
        return f"{self.prefix}{prefix}{self.suffix}{suffix}{self.middle}"

    @property
    def markers(self) -> tuple[str, ...]:
        """The non-empty markers, whitespace stripped (what the parser removes if echoed back)."""
        return tuple(m.strip() for m in (self.prefix, self.suffix, self.middle) if m.strip())


_QWEN_STOP = (
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<|im_start|>",
    "<|im_end|>",
)

FIM_FAMILIES: dict[str, FimTokens] = {
    # Qwen2.5-Coder / Qwen3-Coder (the seed's markers; also the chat-protocol default).
    "qwen": FimTokens(
        family="qwen", prefix="<|fim_prefix|>", suffix="<|fim_suffix|>", middle="<|fim_middle|>", stop=_QWEN_STOP
    ),
    # DeepSeek-Coder (v1 and V2): fullwidth bars U+FF5C and U+2581 "lower one eighth block".
    "deepseek": FimTokens(
        family="deepseek",
        prefix="<\uff5cfim\u2581begin\uff5c>",
        suffix="<\uff5cfim\u2581hole\uff5c>",
        middle="<\uff5cfim\u2581end\uff5c>",
        stop=(
            "<\uff5cend\u2581of\u2581sentence\uff5c>",
            "<\uff5cfim\u2581begin\uff5c>",
            "<\uff5cfim\u2581hole\uff5c>",
            "<\uff5cfim\u2581end\uff5c>",
            "<|EOT|>",
        ),
    ),
    # StarCoder / StarCoder2 / SantaCoder / stable-code.
    "starcoder": FimTokens(
        family="starcoder",
        prefix="<fim_prefix>",
        suffix="<fim_suffix>",
        middle="<fim_middle>",
        stop=("<|endoftext|>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<file_sep>"),
    ),
    # CodeLlama infilling: "<PRE> {prefix} <SUF>{suffix} <MID>", ends with <EOT>.
    "codellama": FimTokens(
        family="codellama", prefix="<PRE> ", suffix=" <SUF>", middle=" <MID>", stop=("<EOT>", "</s>")
    ),
    # Codestral (mistral-common v3 tokenizer): "[SUFFIX]{suffix}[PREFIX]{prefix}", the model continues.
    "codestral": FimTokens(
        family="codestral", prefix="[PREFIX]", suffix="[SUFFIX]", middle="", order="spm", stop=("</s>",)
    ),
    # CodeGemma: Qwen-style markers, ends a file with <|file_separator|>.
    "codegemma": FimTokens(
        family="codegemma",
        prefix="<|fim_prefix|>",
        suffix="<|fim_suffix|>",
        middle="<|fim_middle|>",
        stop=("<|file_separator|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<eos>"),
    ),
}

_GUESSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("codestral",), "codestral"),
    (("deepseek",), "deepseek"),
    (("starcoder", "santacoder", "stable-code", "stablecode", "bigcode"), "starcoder"),
    (("codellama", "code-llama", "code_llama"), "codellama"),
    (("codegemma",), "codegemma"),
    (("qwen",), "qwen"),
)


def fim_tokens_for(model: str, *, family: str | None = None) -> FimTokens:
    """The FIM tokens for ``model``, guessed from its name unless ``family`` names one.

    The guess looks for ``codestral``, ``deepseek``, ``starcoder`` (and ``santacoder``,
    ``stable-code``), ``codellama``, ``codegemma`` and ``qwen`` in the lower-cased name; anything else
    gets the Qwen markers (the seed's).

    Raises:
        PromptConfigError: ``family`` is not in :data:`FIM_FAMILIES`.
    """
    if family is not None and family != "auto":
        try:
            return FIM_FAMILIES[family]
        except KeyError:
            raise PromptConfigError(
                f"unknown FIM family {family!r}: use one of {', '.join(sorted(FIM_FAMILIES))}, 'auto', "
                "or give the markers in fim_tokens",
                field="fim",
            ) from None
    name = model.lower()
    for needles, guessed in _GUESSES:
        if any(n in name for n in needles):
            return FIM_FAMILIES[guessed]
    return FIM_FAMILIES["qwen"]


@dataclass(frozen=True, kw_only=True)
class CodeFrame:
    r"""A FIM code frame: ``prefix`` (ending in ``try:\\n``), the hole, ``suffix`` (the handler).

    Attributes:
        prefix: Header comment, imports, ``try:`` and a newline.
        suffix: The ``except Exception as e:`` handler, ending with a newline.
        indent: The indentation of the ``try:`` body (4 spaces).
    """

    prefix: str
    suffix: str
    indent: str = _HOLE_INDENT

    @property
    def prefix_lines(self) -> int:
        """How many program lines the prefix takes."""
        return self.prefix.count("\n")

    def body(self, middle: str) -> str:
        """``middle`` re-indented as the ``try:`` body (LF line ends, spaces, ends with a newline).

        The middle is dedented, then every non-blank line gets :attr:`indent`; line count is kept so
        :meth:`map_line` stays exact. A middle without any statement gets a ``pass`` line after it.
        """
        code = normalize_tabs(normalize_newlines(middle)).rstrip()
        code = fix_first_line(_dedent(code))
        inside = string_lines(code)
        lines = (
            [
                line if n in inside else (self.indent + line) if line.strip() else ""
                for n, line in enumerate(code.split("\n"), start=1)
            ]
            if code
            else []
        )
        if not _has_statement(code):
            lines.append(self.indent + "pass")
        return "\n".join(lines) + "\n"

    def program(self, middle: str) -> str:
        """The program the sandbox runs: exactly ``prefix + body(middle) + suffix``."""
        return self.prefix + self.body(middle) + self.suffix

    def map_line(self, program_line: int, middle: str | None = None) -> int | None:
        """The middle's line (1-based) for ``program_line``, or None if it is in the prefix or suffix.

        Without ``middle`` every line after the prefix maps (the suffix cannot be told apart).
        """
        line = program_line - self.prefix_lines
        if line < 1:
            return None
        if middle is not None:
            code = normalize_newlines(middle).rstrip()
            count = code.count("\n") + 1 if code and _has_statement(code) else 0
            if line > count:
                return None
        return line

    def render(self, tokens: FimTokens) -> str:
        """The frame written with ``tokens``' markers (the chat protocol's last user segment)."""
        return tokens.wrap(self.prefix, self.suffix)

    @property
    def completion_prefix(self) -> str:
        """The prefix with the hole's indentation, so a completion model continues inside ``try:``."""
        return self.prefix + self.indent


def _dedent(code: str) -> str:
    """``textwrap.dedent`` that ignores (and keeps) the lines continuing a multi-line string."""
    inside = string_lines(code)
    if not inside:
        return textwrap.dedent(code)
    lines = code.split("\n")
    margins = [
        len(line) - len(line.lstrip(" ")) for n, line in enumerate(lines, start=1) if n not in inside and line.strip()
    ]
    cut = min(margins, default=0)
    return "\n".join(line if n in inside else line[cut:] for n, line in enumerate(lines, start=1))


def _has_statement(code: str) -> bool:
    if not code.strip():
        return False
    try:
        return bool(parse_python(code).body)
    except SyntaxError:
        return True  # not our call to judge here: the sandbox reports the syntax error


def build_frame(
    variables: Mapping[str, tuple[str, str]] | None = None,
    *,
    imports: Sequence[str] = (),
    goal: str | None = None,
    reraise: bool = True,
    max_repr: int = 80,
) -> CodeFrame:
    """Build the frame for one round.

    Args:
        variables: Variables restored from earlier rounds, ``name -> (type name, short repr)``. They
            come from the sandbox, so they are sanitized: names must be identifiers (others are
            skipped), types and reprs are forced onto one line and shortened to ``max_repr``.
        imports: Import statements placed before ``try:`` (already validated by the config).
        goal: The round's goal, written as a comment at the top (newlines escaped).
        reraise: Re-raise after printing the error, so the sandbox reports it with its line.
        max_repr: Longest repr shown.
    """
    rows = [
        {"name": name, "type": one_line(type_name, 40), "repr": one_line(short, max_repr)}
        for name, (type_name, short) in sorted((variables or {}).items())
        if name.isidentifier() and name.isascii()
    ]
    prefix = prompts.render(
        "frame_prefix.j2",
        variables=rows,
        imports=[clean_code(i) for i in imports],
        goal=one_line(goal, 200) if goal else "",
    )
    suffix = prompts.render("frame_suffix.j2", reraise=reraise)
    return CodeFrame(prefix=prefix, suffix=suffix)


def validate_imports(imports: Sequence[str]) -> None:
    """Check that every entry is a single import statement.

    Raises:
        PromptConfigError: an entry is not an ``import``/``from ... import`` statement.
    """
    for i, text in enumerate(imports):
        try:
            body = parse_python(text).body
        except SyntaxError:
            body = []
        if len(body) != 1 or not isinstance(body[0], ast.Import | ast.ImportFrom):
            raise PromptConfigError(
                f"frame import {text!r} is not one import statement: write it like 'import json' or "
                "'from datetime import datetime'",
                field=f"imports[{i}]",
            )
