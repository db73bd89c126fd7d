"""A Python tool a spec can name (``rollout.tool_simulator.functions: {tool: local_tools.py:lookup}``).

Tests copy this file beside their spec: a spec may name only functions in files
beside it. Each call appends its arguments to ``local_tools.calls`` beside the
copy, so a test counts the calls that really reached the function.
"""

import json
from pathlib import Path


def lookup(**arguments):
    """Answer any tool call with a fixed, recognisable record."""
    with open(Path(__file__).with_name("local_tools.calls"), "a", encoding="utf-8") as log:
        log.write(json.dumps(arguments) + "\n")
    return {"source": "local_tools.lookup", "arguments": arguments, "rows": 3}
