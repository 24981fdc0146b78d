"""Read model replies: the code of a Code round, the segments of a Thought/Plan/NextGoal round.

Real replies are messy. :func:`extract_code` accepts, in this order of preference:

1. ``<think>...</think>`` reasoning is dropped first (code in it is not meant to run);
   end-of-text tokens (``<|endoftext|>``, ``<|im_end|>``, ``<EOT>``, ...) end the reply.
2. FIM markers echoed back: the text after the last *middle* marker of any family is the middle;
   leftover markers are removed.
3. A JSON object with a ``code`` (or ``python``) string field.
4. ``<execute>``, ``<code>``, ``<python>`` or ``<tool_code>`` tags (an unclosed tag runs to the end;
   code may start on the opening tag's line).
5. Fenced blocks (```` ``` ```` or ``~~~``, three or more): the blocks tagged Python (``python``,
   ``py``, ``python3``, ``py3``, ``ipython``, ``pycon``) or, when none is tagged, the untagged ones
   (example output after "Output:" excluded). An unclosed fence runs to the end of the reply.
   Several blocks are chosen from as :mod:`codeact.segments._blocks` says (steps joined in order; a first
   attempt, a rewritten block or quoted earlier code skipped; else the trailing blocks that parse),
   and a note says so.
6. Raw text: a ``Python:`` label line starts the code; prose lines before and after are dropped.

Then the code is cleaned: CRLF to LF, tabs to spaces, ``>>>`` prompts removed, common indentation
removed (and the FIM first-line shape repaired), the frame's prefix and suffix removed when the model
repeated them. Code that does not parse is never cut down to a part that does (half a plan would
run): the result passes ``ast.parse``, otherwise :class:`CodeParseError` says what to fix and where.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Collection, Iterable, Sequence

from codeact import prompts
from codeact.segments._blocks import Block, candidates, fenced_blocks, tag_blocks
from codeact.segments._repairs import (
    DEDENT_NOTE,
    asyncio_run_note,
    bind_toolkit_imports,
    cut_invented_turn,
    dedent_once,
    invented_turn_note,
    toolkit_import_note,
)
from codeact.segments._text import clean_code, fix_first_line, normalize_newlines, parse_python, syntax_error
from codeact.segments.errors import CodeParseError, ThoughtParseError
from codeact.segments.fim import FIM_FAMILIES, CodeFrame
from codeact.segments.model import CodeBlock, CodeSource, Segment, SegmentKind

__all__ = ["cut_invented_turn", "extract_code", "parse_segments", "parse_thought", "stated_goal"]

_THINK = re.compile(r"<think(?:ing)?>.*?(?:</think(?:ing)?>|\Z)", re.DOTALL | re.IGNORECASE)
_END_TOKENS = (
    "<|endoftext|>",
    "<|im_end|>",
    "<|file_sep|>",
    "<|file_separator|>",
    "<|EOT|>",
    "<EOT>",
    "</s>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<|end|>",
)
_MIDDLE_MARKERS = tuple(sorted({t.middle.strip() for t in FIM_FAMILIES.values() if t.middle.strip()}))
_ALL_MARKERS = tuple(
    sorted(
        {m for t in FIM_FAMILIES.values() for m in t.markers} | {"[MIDDLE]", "<|fim_pad|>", "<fim_pad>"},
        key=len,
        reverse=True,
    )
)
_CODE_LABEL = re.compile(r"^[ \t]*(?:\*\*)?(?:python|code|py)(?:\*\*)?[ \t]*[:：][ \t]*(?P<rest>.*)$", re.IGNORECASE)
_SEGMENT_LABEL = re.compile(
    r"^[ \t]*(?:\*\*)?(?:thought|plan|evaluation|next ?goal|express|output|result)(?:\*\*)?[ \t]*[:：]", re.IGNORECASE
)
_REPL = re.compile(r"^(?:>>>|\.\.\.)(?: |$)")
_KEYWORD_START = re.compile(
    r"^(?:async|await|class|def|del|elif|else|except|finally|for|from|global|if|import|nonlocal|pass|raise|return|"
    r"try|while|with|yield|print|assert|break|continue|match|case)\b"
)
_CALL_OR_ATTRIBUTE = re.compile(r"[A-Za-z_]\w*\(|[A-Za-z_]\w*\.[A-Za-z_]\w*")
_WORD = re.compile(r"[A-Za-z][a-z]+(?:'[a-z]+)?")


def _error(reason: str, reply: str, **variables: object) -> CodeParseError:
    message = prompts.render("reply_error.j2", reason=reason, **variables).strip()
    line = variables.get("line")
    return CodeParseError(
        message,
        reason=reason,
        reply=reply,
        line=line if isinstance(line, int) and line > 0 else None,
        text=str(variables.get("text") or ""),
        detail=str(variables.get("message") or ""),
    )


def extract_code(
    reply: str, *, frame: CodeFrame | None = None, history: Sequence[str] = (), toolkits: Collection[str] = ()
) -> CodeBlock:
    """The Python code in a model reply.

    Args:
        reply: The raw reply text.
        frame: The FIM frame the reply fills; when given, a repeated prefix or suffix is removed.
        history: Code of earlier rounds; a block repeating one of them is taken as a quote, not run again.
        toolkits: The granted toolkit names; an import of one (``from tools import devops``) binds the
            toolkit object instead (:mod:`codeact.segments._repairs`).

    Returns:
        The code (top level, parses with ``ast.parse``) and how it was found; ``notes`` say what was
        repaired or chosen (several blocks joined, an earlier attempt skipped), for the Evaluation.

    Raises:
        CodeParseError: the reply is empty, holds no Python, or its code does not parse; the message
            is feedback for the model (``reason`` is ``empty``, ``no_code``, ``wrong_language`` or
            ``syntax``; for ``syntax``, ``line`` and ``text`` locate the error in the model's code).
    """
    text = _THINK.sub("", normalize_newlines(reply).replace("\ufeff", ""))
    text = _cut_at_end_token(text)
    if not text.strip():
        raise _error("empty", reply)
    text, invented = cut_invented_turn(text)
    first_notes = [invented_turn_note(invented)] if invented is not None else []
    source: CodeSource = "raw"
    blocks: list[Block] = []
    other_langs: list[str] = []

    fim = _after_fim_markers(text)
    if fim is not None:
        text, source = fim, "fim"
    decoded = _json_code(text)
    tags = tag_blocks(text) if decoded is None else []
    if decoded is not None:
        text, source = decoded, "json"
    elif any(t.code.strip() for t in tags):
        source = "tag"
        for tag in tags:
            inner, langs = fenced_blocks(tag.code)
            other_langs += langs
            if inner:
                blocks += [Block(lang=b.lang, code=b.code, before=tag.before + b.before) for b in inner]
            elif not langs and tag.code.strip():
                blocks.append(tag)
    if source != "tag":
        blocks, other_langs = fenced_blocks(text)
        if blocks:
            source = "fence" if source == "raw" else source
    if blocks:
        tried = candidates(blocks, history=history)
    elif other_langs:
        raise _error("wrong_language", reply, languages=sorted(set(other_langs)))
    else:
        tried = [(_after_code_label(text), ())]

    first_problem: SyntaxError | None = None
    for candidate, chosen in tried:
        result = _repair(candidate, frame=frame, raw=source == "raw", notes=[*first_notes, *chosen])
        if isinstance(result, CodeBlock):
            return _forgive(CodeBlock(code=result.code, source=source, notes=result.notes), toolkits)
        first_problem = first_problem or result
    if blocks and len(tried) > 1:
        # Nothing parses: report the model's last block, the code it meant to run.
        last = _repair(blocks[-1].code, frame=frame, raw=False, notes=[])
        first_problem = last if isinstance(last, SyntaxError) else first_problem
    if first_problem is None:
        raise _error("no_code", reply)
    line = (first_problem.text or "").strip()
    raise _error("syntax", reply, message=first_problem.msg, line=first_problem.lineno or 0, text=line)


def _forgive(block: CodeBlock, toolkits: Collection[str]) -> CodeBlock:
    """Toolkit imports bound, ``asyncio.run`` noted (see :mod:`codeact.segments._repairs`)."""
    code, rewritten = bind_toolkit_imports(block.code, toolkits)
    notes = list(block.notes)
    if rewritten:
        notes.append(toolkit_import_note(rewritten, toolkits))
    loop_note = asyncio_run_note(code)
    if loop_note is not None:
        notes.append(loop_note)
    if code == block.code and len(notes) == len(block.notes):
        return block
    return CodeBlock(code=code, source=block.source, notes=tuple(dict.fromkeys(notes)))


def _cut_at_end_token(text: str) -> str:
    for token in _END_TOKENS:
        index = text.find(token)
        if index > 0 and text[:index].strip():
            text = text[:index]
        elif index >= 0:
            text = text.replace(token, "")
    return text


def _after_fim_markers(text: str) -> str | None:
    if not any(m in text for m in _ALL_MARKERS):
        return None
    best = -1
    for marker in _MIDDLE_MARKERS:
        index = text.rfind(marker)
        if index >= 0 and text[index + len(marker) :].strip():
            best = max(best, index + len(marker))
    if best >= 0:
        text = text[best:]
    for marker in _ALL_MARKERS:
        text = text.replace(marker, "\n" if marker in ("<|fim_suffix|>", "<fim_suffix>", "[SUFFIX]") else "")
    return text


def _json_code(text: str) -> str | None:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = re.sub(r"^```[\w-]*\n|\n?```\s*$", "", stripped)
    if not stripped.startswith("{"):
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in ("code", "python", "source", "middle"):
            value = data.get(key)
            if isinstance(value, str) and value.strip():
                return value
    return None


def _after_code_label(text: str) -> str:
    lines = text.split("\n")
    start = None
    for index, line in enumerate(lines):
        match = _CODE_LABEL.match(line)
        if match:
            start = index
            rest = match.group("rest")
            lines[index] = rest
    if start is None:
        return text
    end = len(lines)
    for index in range(start + 1, len(lines)):
        if _SEGMENT_LABEL.match(lines[index]):
            end = index
            break
    return "\n".join(lines[start:end])


def _strip_repl(code: str) -> str:
    lines = code.split("\n")
    prompted = [line for line in lines if _REPL.match(line)]
    if not prompted or not any(line.startswith(">>>") for line in prompted):
        return code
    # keep only the typed input; lines without a prompt are the interpreter's output
    return "\n".join(line[4:] if len(line) > 3 else "" for line in lines if _REPL.match(line))


def _strip_frame(code: str, frame: CodeFrame, notes: list[str]) -> str:
    lines = code.split("\n")
    suffix = [s.strip() for s in frame.suffix.split("\n") if s.strip()]
    prefix = {p.strip() for p in frame.prefix.split("\n") if p.strip()} - {"try:"}
    stripped_suffix = False
    for index, line in enumerate(lines):
        if suffix and line.strip() == suffix[0]:
            rest = [r.strip() for r in lines[index:] if r.strip()]
            # the handler, or its start (a cut-off reply); what follows a whole handler is not the middle
            if rest == suffix[: len(rest)] or rest[: len(suffix)] == suffix:
                lines = lines[:index]
                stripped_suffix = True
                break
    start = 0
    while start < len(lines) and (not lines[start].strip() or lines[start].strip() in prefix):
        start += 1
    stripped_prefix = start > 0 and any(line.strip() for line in lines[:start])
    lines = lines[start:]
    if lines and lines[0].strip() == "try:":
        without = textwrap.dedent("\n".join(lines[1:]))
        with_try = "\n".join(lines)
        if stripped_suffix or (syntax_error(with_try) is not None and syntax_error(without) is None):
            lines = without.split("\n")
            stripped_prefix = True
    if stripped_prefix or stripped_suffix:
        notes.append("the reply repeated the frame's prefix or suffix; only the middle was kept")
    return "\n".join(lines)


def _repair(code: str, *, frame: CodeFrame | None, raw: bool, notes: list[str]) -> CodeBlock | SyntaxError | None:
    """Clean ``code``; a CodeBlock when it parses, else the SyntaxError (None: nothing code-like)."""
    code = _strip_repl(normalize_newlines(code))
    if frame is not None:
        code = _strip_frame(code, frame, notes)
    code = fix_first_line(clean_code(code))
    if not code.strip():
        return None
    error = syntax_error(code)
    if error is None:
        return _block(code, notes) if _looks_like_code(code) else None
    if "indent" in (error.msg or ""):
        dedented = dedent_once(code)
        if dedented is not None:
            notes.append(DEDENT_NOTE)
            return _block(dedented, notes) if _looks_like_code(dedented) else None
    if raw:
        trimmed = _trim_prose(code)
        if not trimmed.strip():
            return None  # every line is prose: there is no code to repair
        if trimmed != code:
            code = fix_first_line(clean_code(trimmed))
            notes.append("prose around the code was ignored")
            error = syntax_error(code)
            if error is None:
                return _block(code, notes) if _looks_like_code(code) else None
    if raw:
        span = _largest_code_span(code)
        if span is not None:
            notes.append("prose around the code was ignored")
            return _block(span, notes)
    return _fim_shaped_error(code, error)


def _fim_shaped_error(code: str, error: SyntaxError) -> SyntaxError:
    """The error worth reporting for code in the FIM shape (first line flush, the rest indented).

    A completion model continues after ``try:`` and an indented newline, so its later lines carry the
    body's indentation; when such code is broken, Python's first complaint is "unexpected indent" on
    line 2, not the real error. The error of the code with the rest dedented (same line numbers) is
    the one to show.
    """
    if "indent" not in (error.msg or "") or "\n" not in code:
        return error
    first, rest = code.split("\n", 1)
    shaped = syntax_error(first + "\n" + textwrap.dedent(rest))
    return shaped if shaped is not None else error


def _block(code: str, notes: Sequence[str]) -> CodeBlock:
    return CodeBlock(code=code, source="raw", notes=tuple(dict.fromkeys(notes)))


def _looks_like_code(code: str) -> bool:
    """False for "code" that is really a word or a number (``OK``, ``Done``, ``42``)."""
    body = parse_python(code).body
    return bool(body) and not all(
        isinstance(s, ast.Expr) and isinstance(s.value, ast.Name | ast.Constant | ast.Attribute) for s in body
    )


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or line[:1] in (" ", "\t"):
        return False
    if _KEYWORD_START.match(stripped) or syntax_error(stripped) is None:
        return False
    words = _WORD.findall(stripped)
    if _CALL_OR_ATTRIBUTE.search(stripped) and len(words) < 6:
        return False  # `system.finish(answer` is broken code, not a sentence
    code_marks = sum(stripped.count(c) for c in "=()[]{}")
    return len(words) >= 2 and code_marks <= 1 + len(words) // 6


def _is_prose_paragraph(paragraph: str) -> bool:
    lines = [line for line in paragraph.split("\n") if line.strip()]
    return bool(lines) and sum(_is_prose(line.lstrip()) for line in lines) * 2 > len(lines)


def _trim_prose(code: str) -> str:
    lines = code.split("\n")
    start, end = 0, len(lines)
    while start < end and (not lines[start].strip() or _is_prose(lines[start])):
        start += 1
    while end > start and (not lines[end - 1].strip() or _is_prose(lines[end - 1])):
        end -= 1
    return "\n".join(lines[start:end])


def _largest_code_span(code: str) -> str | None:
    """The longest run of blank-line-separated paragraphs that parses, all others being prose (bounded work).

    A paragraph left out must read as prose: code that does not parse is never cut away to run the rest.
    """
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", code) if p.strip()][:40]
    prose = [_is_prose_paragraph(p) for p in paragraphs]
    best: str | None = None
    for size in range(len(paragraphs), 0, -1):
        for start in range(0, len(paragraphs) - size + 1):
            if not all(prose[:start]) or not all(prose[start + size :]):
                continue
            candidate = clean_code("\n\n".join(paragraphs[start : start + size]))
            if syntax_error(candidate) is None and _looks_like_code(candidate):
                if best is None or len(candidate) > len(best):
                    best = candidate
        if best is not None:
            return best
    return None


# --- Thought / Plan / NextGoal replies -------------------------------------------------------------

_LABEL_NAMES = {
    "thought": SegmentKind.THOUGHT,
    "thoughts": SegmentKind.THOUGHT,
    "thinking": SegmentKind.THOUGHT,
    "plan": SegmentKind.PLAN,
    "nextgoal": SegmentKind.NEXT_GOAL,
    "next goal": SegmentKind.NEXT_GOAL,
    "next_goal": SegmentKind.NEXT_GOAL,
    "goal": SegmentKind.NEXT_GOAL,
    "express": SegmentKind.EXPRESS,
    "answer": SegmentKind.EXPRESS,
    "evaluation": SegmentKind.EVALUATION,
}
_LABEL_LINE = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:[-*][ \t]+)?(?:\*\*|__)?[ \t]*"
    r"(?P<label>thoughts?|thinking|plan|next[ _]?goal|goal|express|answer|evaluation)"
    r"(?:[ \t]*\d+)?[ \t]*(?:\*\*|__)?[ \t]*(?:(?P<colon>[:：])[ \t]*(?:\*\*|__)?|$)[ \t]*(?P<rest>.*)$",
    re.IGNORECASE,
)
_XML_LABEL = re.compile(r"<(thought|plan|next_?goal|express)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)


def parse_segments(
    reply: str,
    *,
    kinds: Iterable[str] = (SegmentKind.THOUGHT, SegmentKind.PLAN, SegmentKind.NEXT_GOAL, SegmentKind.EXPRESS),
    default: str = SegmentKind.THOUGHT,
    round_index: int = 0,
    exec_id: str = "",
) -> list[Segment]:
    """Split a labelled reply (``Thought: ... Plan: ...``) into segments, in reply order.

    Labels are matched case-insensitively with or without markdown (``**Plan:**``, ``## Plan``,
    ``- Plan:``, ``Thought 2:``), as XML tags (``<plan>...</plan>``) or as a JSON object's keys.
    Text before the first label becomes a ``default`` segment; a label repeated is merged into one
    segment; labels not in ``kinds`` stay part of the previous segment's text.

    Raises:
        ThoughtParseError: the reply is empty (after removing ``<think>`` blocks and markers).
    """
    wanted = {str(k) for k in kinds}
    text = normalize_newlines(reply).replace("\ufeff", "")
    thinking = " ".join(m.group(0) for m in _THINK.finditer(text))
    # a reply with code (an inline thought) may go on with an invented next turn: not the model's thought
    text = cut_invented_turn(_cut_at_end_token(_THINK.sub("", text)))[0].strip()
    if not text and thinking:
        text = re.sub(r"</?think(?:ing)?>", "", thinking, flags=re.IGNORECASE).strip()
    if not text:
        message = prompts.render("reply_error.j2", reason="thought_empty", kinds=sorted(wanted)).strip()
        raise ThoughtParseError(message, reason="empty", reply=reply)

    parts = _json_parts(text, wanted) or _xml_parts(text, wanted) or _label_parts(text, wanted, default)
    merged: dict[str, list[str]] = {}
    for kind, content in parts:
        if content.strip():
            merged.setdefault(kind, []).append(content.strip())
    if not merged:
        merged[default] = [text]
    return [
        Segment(kind=kind, content="\n".join(contents), round_index=round_index, exec_id=exec_id)
        for kind, contents in merged.items()
    ]


def parse_thought(reply: str, *, round_index: int = 0, exec_id: str = "") -> list[Segment]:
    """A Thought-round reply as Thought, Plan, NextGoal and Express segments (see :func:`parse_segments`)."""
    return parse_segments(reply, round_index=round_index, exec_id=exec_id)


_GOAL_LINE = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*|__)?[ \t]*next[ _]?goal[ \t]*(?:\*\*|__)?[ \t]*[:：]"
    r"(?:\*\*|__)?[ \t]*(?P<goal>.+)$",
    re.IGNORECASE,
)
_GOAL_COMMENT = re.compile(r"^[ \t]*#[ \t]*next[ _]?goal[ \t]*[:：][ \t]*(?P<goal>.+)$", re.IGNORECASE)


def stated_goal(reply: str) -> str | None:
    """The goal a code reply states for the round after it (seed 001's NextGoal), or None.

    A ``NextGoal: ...`` line of the prose (before or after the code block) or a ``# NextGoal: ...``
    comment of the code; the last one wins. An invented next turn is not the model's statement, and
    ``done`` (the reflect step's word for "finished") states no goal.
    """
    text = cut_invented_turn(_cut_at_end_token(_THINK.sub("", normalize_newlines(reply))))[0]
    found: str | None = None
    in_fence = False
    for line in text.split("\n"):
        if re.match(r"^[ \t]*(?:`{3,}|~{3,})", line):
            in_fence = not in_fence
            continue
        match = (_GOAL_COMMENT if in_fence else _GOAL_LINE).match(line) or _GOAL_COMMENT.match(line)
        if match is not None:
            found = match.group("goal").strip().strip("*_").strip()
    if not found or found.rstrip(".").lower() == "done":
        return None
    return found


def _json_parts(text: str, wanted: set[str]) -> list[tuple[str, str]]:
    stripped = re.sub(r"^```[\w-]*\n|\n?```\s*$", "", text.strip())
    if not stripped.startswith("{"):
        return []
    try:
        data = json.loads(stripped)
    except ValueError:
        return []
    parts: list[tuple[str, str]] = []
    if isinstance(data, dict):
        for key, value in data.items():
            kind = _LABEL_NAMES.get(str(key).lower().replace("-", "_"))
            if kind is not None and kind in wanted and isinstance(value, str | list):
                content = value if isinstance(value, str) else "\n".join(f"- {v}" for v in value)
                parts.append((kind, content))
    return parts


def _xml_parts(text: str, wanted: set[str]) -> list[tuple[str, str]]:
    parts = []
    for match in _XML_LABEL.finditer(text):
        kind = _LABEL_NAMES.get(match.group(1).lower())
        if kind is not None and kind in wanted:
            parts.append((str(kind), match.group(2)))
    return parts


def _label_parts(text: str, wanted: set[str], default: str) -> list[tuple[str, str]]:
    parts: list[tuple[str, list[str]]] = [(default, [])]
    in_fence = False
    for line in text.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        match = None if in_fence else _LABEL_LINE.match(line)
        kind = None
        is_heading = False
        if match is not None:
            label = match.group("label").lower()
            kind = _LABEL_NAMES.get(label.replace("_", "")) or _LABEL_NAMES.get(label)
            is_heading = bool(match.group("colon")) or line.lstrip().startswith("#") or "**" in line
        if match is not None and kind is not None and kind in wanted and is_heading:
            parts.append((str(kind), [match.group("rest")] if match.group("rest").strip() else []))
        else:
            parts[-1][1].append(line)
    return [(kind, "\n".join(lines).strip()) for kind, lines in parts]
