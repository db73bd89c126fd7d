"""The simulated tool: answers a ``simulate_tool`` task with a small JSON result.

The result is labelled ``"simulated": true`` and carries a one-sentence
``summary`` that targets quote when they report what the tool returned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._dice import Dice
from ._world import ToolSimulator

__all__ = ["simulate_tool"]


def simulate_tool(simulator: ToolSimulator, task: Mapping[str, Any], dice: Dice) -> str:
    """JSON text of what the tool returned for the task's arguments."""
    name = str(task.get("tool") or "tool")
    raw = task.get("arguments")
    arguments = raw if isinstance(raw, Mapping) else {}
    query = next((str(v) for v in arguments.values() if isinstance(v, str) and v), name.replace("_", " "))
    # the summary is quoted inside one sentence of a target reply
    query = " ".join(query.replace(". ", " ").split())[:80]
    result: dict[str, Any] = {"simulated": True, "tool": name, "status": "ok"}
    if dice.chance(simulator.empty_rate):
        result.update(matches=0, records=[], summary=f"no records matched '{query}'.")
        return json.dumps(result, ensure_ascii=False)
    count = dice.integer(1, 4)
    records = []
    for i in range(count):
        date = f"2024-{dice.integer(1, 12):02d}-{dice.integer(1, 28):02d}"
        records.append({"id": f"R-{dice.integer(1000, 9999)}", "date": date, "note": f"entry {i + 1} about {query}"})
    latest = max(r["date"] for r in records)
    noun = "record" if count == 1 else "records"
    result.update(matches=count, records=records, summary=f"{count} {noun} matched '{query}', the most recent dated {latest}.")
    return json.dumps(result, ensure_ascii=False)
