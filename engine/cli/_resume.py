"""The command that resumes a session: the original ``codeact run`` with its options repeated.

Shared by the ``ask_user`` hint of ``codeact run`` and the Ctrl-C hint, so both print the same,
complete command (``--toolkit``, ``--base-url``, ``--store``, ... included).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

__all__ = ["OptionValue", "resume_command"]

OptionValue = str | bool | Sequence[str] | None


def resume_command(
    file: str | Path,
    options: Sequence[tuple[str, OptionValue]],
    *,
    session: str,
    input_text: str = "ANSWER",
) -> str:
    """``codeact run FILE <options> --session S --input ...``, shell-quoted.

    Args:
        file: The blueprint file as the user gave it.
        options: ``(flag, value)`` in the order to print: None/False/empty are left out, True prints
            the bare flag, a sequence repeats the flag once per value (``--toolkit``).
        session: The session to continue.
        input_text: What to show for ``--input`` (quoted unless it is the ``ANSWER`` placeholder).

    Returns:
        One line to paste into a shell.
    """
    parts = ["codeact", "run", shlex.quote(str(file))]
    for flag, value in options:
        if value is None or value is False:
            continue
        if value is True:
            parts.append(flag)
        elif isinstance(value, str):
            parts += [flag, shlex.quote(value)]
        else:
            for item in value:
                parts += [flag, shlex.quote(item)]
    parts += [
        "--session",
        shlex.quote(session),
        "--input",
        input_text if input_text == "ANSWER" else shlex.quote(input_text),
    ]
    return " ".join(parts)
