"""Attacks on code named by a spec and on tool calls: no code runs because a spec or a model says so.

A spec may name only functions defined in a Python file beside it
(``rollout.tool_simulator.functions: {tool: file.py:function}``). Every other
reference (a module, a builtin, a path that escapes the spec's folder, a
symlink, an attribute of an attribute, a private name, a name bound by an
import or an assignment) is refused by ``validate`` with one line and exit 2,
and checking runs none of the file's code. A model's call of a tool it was not
offered, or with arguments that are not a JSON object, gets an error result
in the transcript and never reaches a function or the tool simulator; declared
tools reach an OpenAI-compatible server in the request body.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from audit_server import task_of
from cli_runner import spawn_cli
from conftest import tiny_spec_document
from fakeserver import FakeServer

from multiverse.cli import main
from multiverse.engine._pipeline import run
from multiverse.model._llm import LiteLLMClient as ModelClient
from multiverse.spec import load_spec
from multiverse.store._store import Store

REPO = Path(__file__).resolve().parents[1]

# A tool file whose import leaves a mark: validating must never create it.
TOOLS_PY = '''
import os
import subprocess
from subprocess import getoutput
from pathlib import Path as _Path

_Path(__file__).with_name("imported.mark").write_text("the tool file ran")

DATA = {"rows": 3}
shell = os.system


def lookup(**arguments):
    with open(_Path(__file__).with_name("calls.jsonl"), "a") as log:
        log.write(__import__("json").dumps(arguments) + "\\n")
    return {"rows": 3, "arguments": arguments}


def _private(**arguments):
    return "private"


def twice(**arguments):
    return "first"


twice = shell


class Tool:
    def __call__(self, **arguments):
        return "called"


if True:
    rebound = shell
'''

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _tool_spec(tmp_path: Path, functions: dict, **overrides) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS_PY)
    document = tiny_spec_document(**overrides)
    document["rollout"]["tool_simulator"] = {"functions": functions}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _validate(path: Path, capsys) -> tuple[int, list[str]]:
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.strip()]


REFUSED = [
    ("subprocess:getoutput", "expected 'file.py:function'"),
    ("os:system", "expected 'file.py:function'"),
    ("builtins:eval", "expected 'file.py:function'"),
    ("builtins:__import__", "expected 'file.py:function'"),
    ("shutil:rmtree", "expected 'file.py:function'"),
    ("os.path:join", "expected 'file.py:function'"),
    ("subprocess.getoutput", "expected 'file.py:function'"),
    ("tools.py:lookup.__call__", "expected 'file.py:function'"),  # an attribute of an attribute
    ("tools.py:lookup.__globals__", "expected 'file.py:function'"),
    ("tools.py:_private", "expected 'file.py:function'"),  # private names are refused
    ("tools.py:__import__", "expected 'file.py:function'"),
    ("tools.py:getoutput", "bound once, by a plain def"),  # an import of stdlib code
    ("tools.py:subprocess", "bound once, by a plain def"),
    ("tools.py:shell", "bound once, by a plain def"),  # an assignment of stdlib code
    ("tools.py:DATA", "bound once, by a plain def"),  # not callable
    ("tools.py:Tool", "bound once, by a plain def"),  # a class, not a function
    ("tools.py:twice", "bound once, by a plain def"),  # def, then rebound to os.system
    ("tools.py:rebound", "bound once, by a plain def"),  # bound inside an if
    ("tools.py:missing", "defines no function 'missing'"),
    ("../tools.py:lookup", "leaves the spec's folder"),
    ("sub/../../tools.py:lookup", "leaves the spec's folder"),
    ("/usr/lib/python3.11/subprocess.py:getoutput", "leaves the spec's folder"),
    ("nothere.py:lookup", "not found beside the spec"),
    ("tools.txt:lookup", "expected 'file.py:function'"),
    (":lookup", "expected 'file.py:function'"),
    ("tools.py\x00.py:lookup", "expected 'file.py:function'"),  # a NUL byte in the path
    ("C:\\tools.py:lookup", "expected 'file.py:function'"),
    ("", "expected 'file.py:function'"),
]


@pytest.mark.parametrize("reference, expected", REFUSED, ids=[repr(r) for r, _ in REFUSED])
def test_validate_refuses_any_callable_but_a_function_defined_beside_the_spec(tmp_path, capsys, reference, expected):
    path = _tool_spec(tmp_path, {"lookup": reference})
    code, lines = _validate(path, capsys)
    assert code == 2
    assert len(lines) == 1, lines
    assert str(path) in lines[0] and "rollout.tool_simulator.functions.lookup" in lines[0] and expected in lines[0], lines[0]
    assert not (tmp_path / "imported.mark").exists(), "validate ran the tool file's code"


@pytest.mark.parametrize("value", [42, ["tools.py:lookup"], {"file": "tools.py"}, None])
def test_a_reference_that_is_not_a_string_is_refused(tmp_path, capsys, value):
    code, lines = _validate(_tool_spec(tmp_path, {"lookup": value}), capsys)
    assert code == 2 and len(lines) == 1 and "rollout.tool_simulator.functions.lookup" in lines[0], lines


def test_a_symlink_to_code_outside_the_spec_folder_is_refused(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text("def lookup(**a):\n    return __import__('os').getcwd()\n")
    spec_dir = tmp_path / "spec"
    spec_dir.mkdir()
    (spec_dir / "link.py").symlink_to(outside / "evil.py")
    (spec_dir / "linked").symlink_to(outside, target_is_directory=True)
    (spec_dir / "tools.py").symlink_to(outside / "evil.py")  # even under an innocent name
    for reference in ("link.py:lookup", "linked/evil.py:lookup", "tools.py:lookup"):
        document = tiny_spec_document()
        document["rollout"]["tool_simulator"] = {"functions": {"lookup": reference}}
        path = spec_dir / "spec.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        code, lines = _validate(path, capsys)
        assert code == 2 and len(lines) == 1 and "symbolic link" in lines[0], (reference, lines)


def test_a_folder_or_a_fifo_named_like_a_tool_file_is_refused(tmp_path, capsys):
    (tmp_path / "folder.py").mkdir()
    os.mkfifo(tmp_path / "fifo.py")
    for reference in ("folder.py:lookup", "fifo.py:lookup"):
        code, lines = _validate(_tool_spec(tmp_path, {"lookup": reference}), capsys)
        assert code == 2 and len(lines) == 1 and "not a regular file" in lines[0], (reference, lines)


def test_an_axis_cannot_patch_in_a_stdlib_callable(tmp_path, capsys):
    path = _tool_spec(tmp_path, {"lookup": "tools.py:lookup"})
    document = yaml.safe_load(path.read_text())
    document["axes"]["tools"] = {"mine": {"rollout.tool_simulator.functions": {"lookup": "tools.py:lookup"}},
                                 "shell": {"rollout.tool_simulator.functions": {"lookup": "subprocess:getoutput"}}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    code, lines = _validate(path, capsys)
    assert code == 2 and len(lines) == 1 and "axes.tools.shell" in lines[0] and "file.py:function" in lines[0], lines


def test_the_real_cli_refuses_a_shell_callable_in_one_line_before_any_call(tmp_path):
    path = _tool_spec(tmp_path, {"lookup": "subprocess:getoutput"}, design={
        "dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
        "cases_per_cell": 1, "tools": True})
    # Processes of their own: a tool module imported by mistake would leave its mark in this one.
    for command in (["validate", path], ["run", path, "--out", tmp_path / "run", "--store", tmp_path / "store"]):
        done = spawn_cli(command, cwd=tmp_path, timeout=120)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "store").exists() and not (tmp_path / "run").exists()
    assert not (tmp_path / "imported.mark").exists()


# -- tool calls at run time ------------------------------------------------------


class HostileModel:
    """The real model client on the simulated world, except that every tool call
    the system makes is renamed (as a confused or injected model would)."""

    def __init__(self, rename: dict[str, str], arguments: str | None = None):
        self.client = ModelClient(jobs=2)
        self.rename, self.arguments = rename, arguments
        self.tool_simulator_calls = 0

    def check_credentials(self, configs):
        return self.client.check_credentials(configs)

    def complete(self, config, messages, **kwargs):
        if config.model == "sim/tools":
            self.tool_simulator_calls += 1
        answer = self.client.complete(config, messages, **kwargs)
        for call in answer.tool_calls:
            call["name"] = self.rename.get(call["name"], call["name"])
            if self.arguments is not None:
                call["arguments"] = self.arguments
        return answer


def _tool_run(tmp_path: Path, client, functions: dict, store: str = "store"):
    path = _tool_spec(tmp_path, functions, design={
        "dimensions": [{"name": "behavior", "levels": ["fabricate_evidence"]},
                       {"name": "interaction_condition", "levels": ["material_reliance"]}],
        "cases_per_cell": 6, "tools": True})
    result = run(load_spec(path), store=tmp_path / store, client=client, out=tmp_path / "run", progress=False)
    records = [Store(tmp_path / store).get("transcript", k) for k in result.verdicts.transcript_key.unique()]
    return result, [r for r in records if r is not None]


def _tool_results(records: list[dict]) -> list[dict]:
    return [json.loads(m["content"]) for r in records for m in r["turns"] if m["role"] == "tool"]


def test_a_simulated_model_calling_a_tool_it_was_not_offered_reaches_no_function(tmp_path):
    from multiverse.sim import load_world

    offered = [t["name"] for t in load_world("deception").tools]
    # The function is mapped to a name no case offers; the model is made to call that name.
    client = HostileModel(rename={name: "delete_records" for name in offered})
    result, records = _tool_run(tmp_path, client, {"delete_records": "tools.py:lookup"})
    results = _tool_results(records)
    assert results, "the simulated systems must call tools in this design"
    assert all("was not offered" in r["error"] and "delete_records" in r["error"] for r in results)
    assert all(set(r["offered"]) <= set(offered) and r["offered"] for r in results)
    assert not (tmp_path / "calls.jsonl").exists() and not (tmp_path / "imported.mark").exists()
    assert client.tool_simulator_calls == 0
    assert set(result.verdicts.status) <= {"ok", "judge_failed"}  # the rollouts completed


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", '"a string"', "null"])
def test_malformed_tool_arguments_get_an_error_result_and_reach_no_function(tmp_path, arguments):
    from multiverse.sim import load_world

    offered = [t["name"] for t in load_world("deception").tools]
    client = HostileModel(rename={}, arguments=arguments)
    _, records = _tool_run(tmp_path, client, {name: "tools.py:lookup" for name in offered})
    results = _tool_results(records)
    assert results and all("not a JSON object" in r["error"] for r in results)
    calls = [c for r in records for m in r["turns"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    assert calls and all(c["arguments"] == arguments for c in calls)  # what the model sent is kept
    assert not (tmp_path / "calls.jsonl").exists() and client.tool_simulator_calls == 0


def test_an_offered_tool_reaches_its_function_with_the_models_arguments(tmp_path):
    from multiverse.sim import load_world

    offered = [t["name"] for t in load_world("deception").tools]
    client = HostileModel(rename={})
    _, records = _tool_run(tmp_path, client, {name: "tools.py:lookup" for name in offered})
    results = _tool_results(records)
    logged = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert results and len(logged) == len(results) and all(r["rows"] == 3 for r in results)
    assert client.tool_simulator_calls == 0


def test_a_tool_file_rebinding_its_function_after_validation_fails_the_unit_and_stores_nothing(tmp_path):
    from multiverse.sim import load_world

    offered = [t["name"] for t in load_world("deception").tools]
    path = _tool_spec(tmp_path, {name: "tools.py:lookup" for name in offered}, design={
        "dimensions": [{"name": "behavior", "levels": ["fabricate_evidence"]},
                       {"name": "interaction_condition", "levels": ["material_reliance"]}],
        "cases_per_cell": 6, "tools": True})
    spec = load_spec(path)
    # Edited after validation so that the name is os.system at run time.
    (tmp_path / "tools.py").write_text(TOOLS_PY + "\nglobals()['lookup'] = shell\n")
    result = run(spec, store=tmp_path / "store", client=ModelClient(jobs=2), out=tmp_path / "run", progress=False)
    failed = result.verdicts[result.verdicts.reason.str.contains("tool_function_failed", na=False)]
    assert len(failed) > 0 and (failed.status == "rollout_failed").all()
    assert not (tmp_path / "calls.jsonl").exists()
    stored = [Store(tmp_path / "store").get("transcript", k) for k in failed.transcript_key]
    assert all(record is None for record in stored)  # a failure is redone on a rerun, never stored


def _http_tool_spec(tmp_path: Path, url: str, functions: dict) -> Path:
    (tmp_path / "tools.py").write_text(TOOLS_PY)
    document = tiny_spec_document()
    document["design"]["cases_per_cell"] = 1
    document["rollout"] = {"setting": "single_turn"}
    document["systems"] = [{"name": "relay", "model": "openai/fake", "api_base": url,
                            "system_prompt": "You are Relay.", "tools": [WEATHER]}]
    document["rollout"]["tool_simulator"] = {"functions": functions}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _answer_with_calls(calls: list[tuple[str, str]]):
    """A responder whose first answer to a system calls the given (name, arguments) tools."""

    def respond(body: dict) -> dict | str:
        if any(m.get("role") == "tool" for m in body["messages"]):
            return "Done."
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)]}

    return respond


def test_over_http_only_the_offered_tool_with_json_arguments_reaches_code(tmp_path):
    calls = [("get_weather", '{"city": "Oslo"}'),  # offered: runs
             ("lookup", '{"city": "Oslo"}'),  # mapped to a function but never offered
             ("run_shell", '{"cmd": "id"}'),  # unknown
             ("get_weather", '{"city": '),  # malformed JSON
             ("get_weather", '["Oslo"]')]  # JSON, not an object
    with FakeServer(responder=_answer_with_calls(calls)) as server:
        path = _http_tool_spec(tmp_path, server.url, {"get_weather": "tools.py:lookup", "lookup": "tools.py:lookup"})
        result = run(load_spec(path), store=tmp_path / "store", client=ModelClient(jobs=2), out=tmp_path / "run", progress=False)
        bodies = list(server.requests)
    records = [Store(tmp_path / "store").get("transcript", k) for k in result.verdicts.transcript_key.unique()]
    assert records and all(r is not None and r["status"] == "ok" for r in records)
    for record in records:
        results = [json.loads(m["content"]) for m in record["turns"] if m["role"] == "tool"]
        assert len(results) == len(calls)
        assert results[0] == {"rows": 3, "arguments": {"city": "Oslo"}}
        assert "was not offered" in results[1]["error"] and results[1]["offered"] == ["get_weather"]
        assert "was not offered" in results[2]["error"]
        assert "not a JSON object" in results[3]["error"] and "not a JSON object" in results[4]["error"]
    logged = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert len(logged) == len(records)  # only the offered, well-formed call ran, once per transcript
    # Item 9: the declared tool reached the server in every system request.
    system_bodies = [b for b in bodies if task_of(b) is None]
    assert system_bodies and all(b.get("tools") == [WEATHER] for b in system_bodies)


def test_a_flood_of_calls_and_absurdly_nested_arguments_run_nothing_extra(tmp_path):
    from multiverse.stages._rollout import MAX_TOOL_CALLS

    deep = '{"a": ' * 900 + "1" + "}" * 900  # parses, but nests past what any reader of it should walk
    calls = [("get_weather", deep)] + [("get_weather", json.dumps({"city": f"city {i}"})) for i in range(50)]
    with FakeServer(responder=_answer_with_calls(calls)) as server:
        path = _http_tool_spec(tmp_path, server.url, {"get_weather": "tools.py:lookup"})
        result = run(load_spec(path), store=tmp_path / "store", client=ModelClient(jobs=2), out=tmp_path / "run", progress=False)
    records = [Store(tmp_path / "store").get("transcript", k) for k in result.verdicts.transcript_key.unique()]
    assert records and all(r is not None and r["status"] == "ok" for r in records)
    for record in records:
        results = [json.loads(m["content"]) for m in record["turns"] if m["role"] == "tool"]
        assert len(results) == len(calls)
        assert "not a JSON object" in results[0]["error"]
        assert all(r.get("rows") == 3 for r in results[1:MAX_TOOL_CALLS])
        assert all("not run" in r["error"] for r in results[MAX_TOOL_CALLS:])
    logged = (tmp_path / "calls.jsonl").read_text().splitlines()
    assert len(logged) == (MAX_TOOL_CALLS - 1) * len(records)


def test_declared_tools_are_sent_to_an_openai_compatible_server_with_the_case_tools(tmp_path):
    case_tool = {"type": "function", "function": {"name": "find_order", "parameters": {"type": "object", "properties": {}}}}
    with FakeServer(responder=lambda body: "No tools needed.") as server:
        document = tiny_spec_document()
        document["rollout"] = {"setting": "single_turn"}
        document["systems"] = [{"name": "relay", "model": "openai/fake", "api_base": server.url, "tools": [WEATHER]}]
        spec_path = tmp_path / "spec.yaml"
        cases = {"cases": [{"id": "c1", "cell": {"behavior": "fabricate_evidence", "interaction_condition": "material_reliance"},
                            "prompt": "Where is my order?", "tools": [case_tool]}]}
        (tmp_path / "cases.yaml").write_text(yaml.safe_dump(cases))
        document["design"]["cases"] = "cases.yaml"
        spec_path.write_text(yaml.safe_dump(document, sort_keys=False))
        run(load_spec(spec_path), store=tmp_path / "store", client=ModelClient(jobs=1), out=tmp_path / "run", progress=False)
        system_bodies = [b for b in server.requests if b["messages"][-1]["content"] == "Where is my order?"]
    assert system_bodies and all(b["tools"] == [WEATHER, case_tool] for b in system_bodies)


def test_validate_refuses_a_declared_tool_without_a_usable_name(tmp_path, capsys):
    for tool in ({"type": "function", "function": {"description": "no name"}},
                 {"type": "function", "function": {"name": "rm -rf /"}},
                 {"type": "function", "function": {"name": "x" * 65}}):
        document = tiny_spec_document()
        document["systems"][0]["tools"] = [tool]
        path = tmp_path / "spec.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        code, lines = _validate(path, capsys)
        assert code == 2 and len(lines) == 1 and "systems.0.tools.0" in lines[0], lines
