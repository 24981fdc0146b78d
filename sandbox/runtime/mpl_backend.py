"""The headless matplotlib backend of the sandbox: Agg, with ``plt.show()`` saving PNG artifacts.

Selected by ``MPLBACKEND=module://codeact.sandbox.runtime.mpl_backend`` (set by
:func:`codeact.sandbox.runtime.artifacts.prepare`). It is imported by matplotlib itself, only when the
code uses pyplot, so matplotlib is imported dynamically here: the runtime stays standard-library
only for every round that does not draw.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from codeact.sandbox.runtime import artifacts

__all__ = ["FigureCanvas", "FigureManager", "show"]

_agg: ModuleType = importlib.import_module("matplotlib.backends.backend_agg")

FigureCanvas: type = _agg.FigureCanvasAgg
FigureManager: type = _agg.FigureManager


def show(*args: object, **kwargs: object) -> None:
    """Save every open figure as ``outputs/figure-N.png`` and close it (there is no screen)."""
    artifacts.save_open_figures()
