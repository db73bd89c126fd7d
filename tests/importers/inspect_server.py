"""The one fake server every genuine Inspect eval of a test process talks to.

Inspect memoizes its model clients by model name, role and config, not by base URL: once an
``openai-api/local/...`` model has been made, later evals in the process reach the server it was made
against, whatever ``LOCAL_BASE_URL`` says then. So the modules that make Inspect logs
(``inspect_runs.py``, ``inspect_tasks.py``) share one server, and each eval sets only who answers. With
a server per module, a module run after another in the same worker sent its requests to the other
module's responder (its system never failed where the test made it fail).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fakeserver import FakeServer

__all__ = ["serve"]

_SERVER: list[FakeServer] = []
_CURRENT: list[Callable[[dict], Any]] = []


def serve(responder: Callable[[dict], Any]) -> str:
    """Make ``responder`` answer every Inspect request of this process from now on; the server's URL."""
    if not _SERVER:
        _SERVER.append(FakeServer(responder=lambda body: _CURRENT[-1](body)).start())
    _CURRENT[:] = [responder]
    os.environ.update(LOCAL_BASE_URL=_SERVER[0].url, LOCAL_API_KEY="sk-local")
    return _SERVER[0].url
