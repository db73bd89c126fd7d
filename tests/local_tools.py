"""A Python tool a spec can name (``rollout.tool_simulator.functions``) instead of a tool-simulator model."""

CALLS: list[dict] = []


def lookup(**arguments):
    """Answer any tool call with a fixed, recognisable record."""
    CALLS.append(arguments)
    return {"source": "local_tools.lookup", "arguments": arguments, "rows": 3}
