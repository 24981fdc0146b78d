"""Typed prompt segments, the FIM prompt builders, and the reply parser.

The pipeline stage "prompt builder -> model -> parser" of ARCHITECTURE.md:

* :mod:`codeact.segments.model` / :mod:`codeact.segments.history`: :class:`Segment` (``Label: content``) and the
  round-ordered :class:`SegmentHistory`;
* :mod:`codeact.segments.config` / :mod:`codeact.segments.builders`: :class:`PromptConfig` and the
  :class:`SegmentBuilder` that routes to :class:`ThoughtPromptBuilder`, :class:`CmdPromptBuilder`
  and :class:`ReflectPromptBuilder`, producing a :class:`Prompt`;
* :mod:`codeact.segments.fim`: the :class:`CodeFrame` and the FIM token table;
* :mod:`codeact.segments.parser`: :func:`extract_code` and :func:`parse_thought`;
* :mod:`codeact.segments.budget`: token counting and the :class:`Compactor`;
* :mod:`codeact.segments.evaluation`: :func:`format_evaluation`;
* :mod:`codeact.segments.execution`: the execution chain (:func:`exec_id`, :func:`exec_chain`).
"""

from __future__ import annotations

from codeact.segments._text import parse_python
from codeact.segments.budget import (
    ApproxTokenCounter,
    CompactConfig,
    Compaction,
    Compactor,
    Summarizer,
    SummaryRequest,
    TokenCounter,
    fallback_summary,
)
from codeact.segments.builders import (
    BasePromptBuilder,
    CmdPromptBuilder,
    Prompt,
    ReflectPromptBuilder,
    SegmentBuilder,
    ThoughtPromptBuilder,
    ToolkitCatalog,
)
from codeact.segments.config import DEFAULT_SECTIONS, SECTION_NAMES, Experience, Instructions, PromptConfig
from codeact.segments.errors import CodeParseError, PromptConfigError, ReplyParseError, ThoughtParseError
from codeact.segments.evaluation import format_evaluation
from codeact.segments.execution import exec_chain, exec_id
from codeact.segments.fim import FIM_FAMILIES, CodeFrame, FimTokens, build_frame, fim_tokens_for
from codeact.segments.history import SegmentHistory
from codeact.segments.model import CodeBlock, Segment, SegmentKind, segment_label
from codeact.segments.parser import cut_invented_turn, extract_code, parse_segments, parse_thought, stated_goal

__all__ = [
    "ApproxTokenCounter",
    "BasePromptBuilder",
    "CmdPromptBuilder",
    "CodeBlock",
    "CodeFrame",
    "CodeParseError",
    "CompactConfig",
    "Compaction",
    "Compactor",
    "DEFAULT_SECTIONS",
    "Experience",
    "FIM_FAMILIES",
    "FimTokens",
    "Instructions",
    "Prompt",
    "PromptConfig",
    "PromptConfigError",
    "ReflectPromptBuilder",
    "ReplyParseError",
    "SECTION_NAMES",
    "Segment",
    "SegmentBuilder",
    "SegmentHistory",
    "SegmentKind",
    "Summarizer",
    "SummaryRequest",
    "ThoughtParseError",
    "ThoughtPromptBuilder",
    "TokenCounter",
    "ToolkitCatalog",
    "build_frame",
    "cut_invented_turn",
    "exec_chain",
    "exec_id",
    "extract_code",
    "fallback_summary",
    "fim_tokens_for",
    "format_evaluation",
    "parse_python",
    "parse_segments",
    "parse_thought",
    "segment_label",
    "stated_goal",
]
