"""Show ``codeact run --json`` events as they come, streaming the model's reply token by token.

``make demo-local`` pipes the run into this: ``message.delta`` text is written as it arrives (the
model writing), every other event is printed by the CLI's own renderer (``codeact.engine.events.render_event``).
"""

from __future__ import annotations

import json
import sys

from rich.console import Console

from codeact.engine.events import event_from_json, render_event


def main() -> int:
    """Render the events read from stdin; exit 1 when the run failed."""
    console = Console(highlight=False)
    streaming = False
    failed = False
    for line in sys.stdin:
        if not line.startswith("{"):
            continue
        data = json.loads(line)
        if data.get("type") == "message.delta":
            if not streaming:
                console.print("model: ", style="bold", end="")
                streaming = True
            sys.stdout.write(data.get("text", ""))
            sys.stdout.flush()
            continue
        if streaming:
            sys.stdout.write("\n")
            streaming = False
        failed = failed or data.get("type") == "run.failed"
        if data.get("type") == "code.started":
            continue  # the code was just streamed; what ran is the same code, indented into the frame
        render_event(event_from_json(data), console)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
