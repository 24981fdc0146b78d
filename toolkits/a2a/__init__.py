"""Remote A2A agents as a toolkit: ``await agents.reviewer(task="...")`` sends the task to the agent's card URL.

The official ``a2a-sdk`` is imported only when a call is made or a card is fetched
(``pip install codeact[a2a]``).
"""

from __future__ import annotations

from codeact.toolkits.a2a.toolkit import A2AToolkit, a2a_problems

__all__ = ["A2AToolkit", "a2a_problems"]
