"""Attacks on credentials: no key is ever written anywhere, and a spec never carries one.

Canary keys are planted in the environment under secret-looking names
(``OPENAI_API_KEY`` ...) and innocent ones (``api_key_env: MV_ENDPOINT_CONFIG``).
Every role of a grid then talks to a fake OpenAI-compatible server on loopback
that quotes the request headers, ``Authorization`` included, in every answer,
every string of every JSON answer, every tool-call argument and every error
message. The run goes through the real CLI and the report is written; then every
file written (run directory, store, report) and everything printed is searched
for every canary, raw and (parquet) decoded. None may appear.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from audit_server import RUBRIC, audit_responder, audit_role, scenario_of
from cli_runner import spawn_cli
from conftest import explorer_block_texts, tiny_spec_document
from fakeserver import FakeServer
from store_rows import raw_json, stored_records

from multiverse.cli import main
from multiverse.core import _credentials as credentials
from multiverse.errors import ModelError
from multiverse.model._llm import LiteLLMClient as ModelClient
from multiverse.reporting import write_report
from multiverse.spec import ModelConfig

REPO = Path(__file__).resolve().parents[1]

# In use: the spec names these with api_key_env, whatever they are called.
IN_USE = {
    "OPENAI_API_KEY": "sk-CANARY-openai-8d1f0c2b7e4a9d",
    "MV_ENDPOINT_CONFIG": "CANARY-innocent-endpoint-5e0b71",  # a name that does not look secret
    "DEPLOYMENT_LABEL": "CANARY-judge-label-3c9a06f2",
    "TEAM_SETTING": "zz-CANARY-user-setting-b41e",
}
# Not in use, but readable by the process: never sent, never written.
PRESENT = {
    "ANTHROPIC_API_KEY": "sk-ant-CANARY-anthropic-77c2e1",
    "GEMINI_API_KEY": "CANARY-gemini-0f5d2a9c",
    "AWS_SECRET_ACCESS_KEY": "CANARY-aws-secret-1b8e6d",
    "HF_TOKEN": "hf_CANARY-huggingface-4a2c",
}
CANARIES = {**IN_USE, **PRESENT}


def _authorization(headers: dict) -> str | None:
    return {k.lower(): v for k, v in headers.items()}.get("authorization")


def _texts(path: Path) -> list[str]:
    raw = path.read_bytes()
    texts = [raw.decode("utf-8", "replace"), raw.decode("latin-1")]
    if path.suffix == ".parquet":  # compressed pages: search the decoded cells too
        texts.append(pd.read_parquet(path).to_csv(index=False))
    if path.suffix == ".html":  # the explorer's compressed blocks: search what they hold too
        texts.extend(explorer_block_texts(texts[0]))
    if path.name == "store.sqlite3":  # compressed rows: search every record, text and quarantined body too
        texts.extend(_database_texts(path))
    return texts


def _database_texts(path: Path) -> list[str]:
    """Every stored record as JSON (texts resolved), every text, and every quarantined body, decompressed."""
    import sqlite3
    import zlib

    found = [json.dumps(record, ensure_ascii=False) for record in stored_records(path.parent).values()]
    with sqlite3.connect(path) as conn:
        found += [zlib.decompress(b).decode("utf-8", "replace") for (b,) in conn.execute("SELECT body FROM text")]
        found += [raw_json(b).decode("utf-8", "replace") if b else "" for (b,) in
                  conn.execute("SELECT body FROM quarantine")]
    return found


def _leaks(text_sources: dict[str, list[str]]) -> dict[str, list[str]]:
    """{where: [canary names found]}, for whole canaries and for any 12-character piece of one."""
    found = {}
    for where, texts in text_sources.items():
        names = [name for name, value in CANARIES.items()
                 if any(value[i:i + 12] in text for text in texts for i in range(0, len(value) - 11))]
        if names:
            found[where] = names
    return found


WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _calling_responder(body: dict):
    """audit_responder, except that a system offered tools calls one before answering."""
    if body.get("tools") and audit_role(body) == "system" and not any(m.get("role") == "tool" for m in body["messages"]):
        call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return audit_responder(body)


def _grid(tmp_path: Path, echo: FakeServer, plain: FakeServer) -> Path:
    keyed = {"model": "openai/fake", "api_base": echo.url}
    document = tiny_spec_document(name="canary")
    document["rubric"] = RUBRIC
    document["design"] = {
        "dimensions": [{"name": "behavior"}, {"name": "interaction_condition", "levels": ["material_reliance"]}],
        "cases_per_cell": 1,
        "generator": {**keyed, "api_key_env": "MV_ENDPOINT_CONFIG"},
    }
    document["systems"] = [
        {"name": "openai", **keyed, "api_key_env": "OPENAI_API_KEY", "system_prompt": "You are A.", "tools": [WEATHER]},
        {"name": "innocent", **keyed, "api_key_env": "MV_ENDPOINT_CONFIG", "system_prompt": "You are B."},
        {"name": "relay", "model": "openai/fake", "api_base": plain.url, "system_prompt": "You are C."},
    ]
    document["rollout"] = {"setting": "multi_turn", "max_turns": 2,
                           "user": {**keyed, "api_key_env": "TEAM_SETTING", "persona": "a customer"},
                           "tool_simulator": {**keyed, "api_key_env": "TEAM_SETTING"}}
    document["judge"] = {**keyed, "api_key_env": "DEPLOYMENT_LABEL", "evidence_standard": "strict"}
    document["axes"] = {"judge": {"echo": {"judge.api_base": echo.url},
                                  "plain": {"judge.api_base": plain.url, "judge.api_key_env": None}}}
    document.pop("world", None)
    path = tmp_path / "canary.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@pytest.mark.slow
def test_canary_keys_echoed_by_a_server_reach_no_file_and_no_output(tmp_path):
    # Non-retryable faults (the CLI retries others with real backoff) on one
    # scenario's judge and tool calls: their messages quote the headers too
    # and become failure reasons.
    def fault_for(body: dict) -> str | None:
        if not (scenario_of(body) or "").startswith("overstate"):
            return None
        return {"judge": "auth", "tool": "bad_request"}.get(audit_role(body))

    with FakeServer(responder=_calling_responder, echo_headers=True, fault_for=fault_for) as echo, \
            FakeServer(responder=audit_responder) as plain:
        spec = _grid(tmp_path, echo, plain)
        run_dir, store, report = tmp_path / "run", tmp_path / "store", tmp_path / "report" / "canary.html"
        done = [spawn_cli(["run", spec, "--out", run_dir, "--store", store, "--quiet"], cwd=tmp_path, env=CANARIES)]
        sent = {_authorization(h) for h in echo.headers}
        sent_plain = {_authorization(h) for h in plain.headers}
        echo_counts = dict(echo.counts)

    assert done[0].returncode == 0, done[0].stderr
    write_report(run_dir, report, store=store)
    # The attack happened: every in-use key went out, and errors and answers quoted it back.
    assert sent == {f"Bearer {value}" for value in IN_USE.values()}
    assert sent_plain == {"Bearer sk-local"}  # a local server without api_key_env never gets a key
    assert echo_counts.get("auth", 0) > 0 and echo_counts.get("bad_request", 0) > 0 and echo_counts.get("ok", 0) > 10
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet")
    assert (verdicts.status == "ok").any()
    failed = verdicts[verdicts.status.isin(["rollout_failed", "judge_failed"])]
    assert failed.reason.str.contains("request headers", regex=False).any(), "no error message quoted the headers"
    assert failed.reason.str.contains(credentials.REDACTED, regex=False).any()
    transcripts = (run_dir / "transcripts.jsonl").read_text()
    assert '"role": "tool"' in transcripts and "TOOL" not in CANARIES  # the tool path ran and was echoed

    written = [p for root in (run_dir, store, report.parent) for p in root.rglob("*") if p.is_file()]
    assert len(written) >= 7 and report.exists() and (run_dir / "transcripts.jsonl").exists()
    assert (store / "store.sqlite3") in written  # the store is one database: its rows are searched below
    assert any(credentials.REDACTED in p.read_text(errors="replace") for p in written if p.suffix == ".json")
    # The request store (every answer, kept by its request's key) is searched too, echoed keys and all.
    requests = stored_records(store, "request")
    assert len(requests) > 10 and any(credentials.REDACTED in json.dumps(r) for r in requests.values())
    sources = {str(p): _texts(p) for p in written}
    sources.update({f"output of command {i}": [d.stdout + d.stderr] for i, d in enumerate(done)})
    leaks = _leaks(sources)
    assert not leaks, f"canary keys written: {leaks}"


@pytest.mark.parametrize("fault", ["auth", "bad_request", "server_error", "unavailable", "rate_limit", "truncated"])
def test_an_error_quoting_the_key_leaves_the_client_redacted(monkeypatch, fault):
    monkeypatch.setenv("MV_ENDPOINT_CONFIG", IN_USE["MV_ENDPOINT_CONFIG"])
    with FakeServer(echo_headers=True, script=[fault] * 3, retry_after=0) as server:
        client = ModelClient(jobs=1, max_retries=2, backoff_base=0.001, backoff_cap=0.01)
        config = ModelConfig("openai/fake", {}, server.url, "MV_ENDPOINT_CONFIG")
        with pytest.raises(ModelError) as raised:
            client.complete(config, [{"role": "user", "content": "hi"}])
    assert server.counts[fault] == (1 if fault in ("auth", "bad_request") else 3)  # retried, then failed
    message = str(raised.value)
    assert not _leaks({"error": [message]}), message
    if fault != "truncated":  # a cut-off body has no message to quote
        assert "request headers" in message


def test_a_key_cut_by_the_one_line_limit_leaves_no_piece(monkeypatch):
    # The message is cut to one short line: redacting after the cut would leave
    # the first half of a key. Slide the key across the cut, one character at a time.
    monkeypatch.setenv("MV_ENDPOINT_CONFIG", IN_USE["MV_ENDPOINT_CONFIG"])
    value = IN_USE["MV_ENDPOINT_CONFIG"]
    client = ModelClient(jobs=1, max_retries=0)
    messages = []
    with FakeServer(faults={"auth": 1.0}, echo_key=True) as server:
        config = ModelConfig("openai/fake", {}, server.url, "MV_ENDPOINT_CONFIG")
        for pad in range(160, 250, 2):
            server.error_prefix = "." * pad
            with pytest.raises(ModelError) as raised:
                client.complete(config, [{"role": "user", "content": "hi"}])
            messages.append(str(raised.value))
    # From a key kept whole to one cut away entirely: in between, every cut through the key.
    assert messages[0].endswith(f"invalid api key: {credentials.REDACTED}") and "api key: " not in messages[-1]
    pieces = [value[:k] for k in range(credentials.MIN_SECRET_LENGTH, len(value) + 1)]
    assert not [m for m in messages if any(piece in m for piece in pieces)]


def test_an_answer_echoing_the_key_is_redacted_in_text_tool_calls_and_parsed_json(monkeypatch):
    monkeypatch.setenv("TEAM_SETTING", IN_USE["TEAM_SETTING"])
    value = IN_USE["TEAM_SETTING"]
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}
    config = ModelConfig("openai/fake", {}, None, "TEAM_SETTING")
    with FakeServer(echo_headers=True, call_tools=True) as server:
        config = ModelConfig("openai/fake", {}, server.url, "TEAM_SETTING")
        client = ModelClient(jobs=1)
        called = client.complete(config, [{"role": "user", "content": "hi"}], tools=[tool])
        schema = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}
        parsed = client.complete(config, [{"role": "user", "content": "hi"}], schema=schema)
    assert _authorization(server.headers[0]) == f"Bearer {value}"
    assert called.tool_calls and value not in repr(called.tool_calls) and credentials.REDACTED in called.tool_calls[0]["arguments"]["echo"]
    assert value not in parsed.text and value not in repr(parsed.parsed) and credentials.REDACTED in parsed.parsed["note"]


# -- a spec never carries a literal credential ------------------------------------------

LITERALS = [
    ("systems.0.params.api_key", {"systems.0.params": {"api_key": "sk-LITERAL-1234567890"}}),
    ("systems.0.params.API-Key", {"systems.0.params": {"API-Key": "sk-LITERAL-1234567890"}}),
    ("systems.0.params.token", {"systems.0.params": {"token": "sk-LITERAL-1234567890"}}),
    ("judge.params.aws_secret_access_key", {"judge.params": {"aws_secret_access_key": "sk-LITERAL-1234567890"}}),
    ("systems.0.params.extra_body.api_key", {"systems.0.params": {"extra_body": {"api_key": "sk-LITERAL-1234567890"}}}),
    ("systems.0.params.extra_headers.Authorization", {"systems.0.params": {"extra_headers": {"Authorization": "Bearer sk-LITERAL-1234567890"}}}),
    ("systems.0.params.extra_headers.authorization", {"systems.0.params": {"extra_headers": {"authorization": "Bearer sk-LITERAL-1234567890"}}}),
    ("judge.params.extra_headers.api-key", {"judge.params": {"extra_headers": {"api-key": "sk-LITERAL-1234567890"}}}),
    ("rollout.user.params.extra_headers.X-API-KEY", {"rollout.user.params": {"extra_headers": {"X-API-KEY": "sk-LITERAL-1234567890"}}}),
    ("design.generator.params.headers.x-goog-api-key", {"design.generator.params": {"headers": {"x-goog-api-key": "sk-LITERAL-1234567890"}}}),
    ("systems.0.api_base", {"systems.0.api_base": "http://admin:sk-LITERAL-1234567890@127.0.0.1:8080/v1"}),
    ("judge.api_base", {"judge.api_base": "https://sk-LITERAL-1234567890@api.example.com/v1"}),
    ("rollout.tool_simulator.api_base", {"rollout.tool_simulator.api_base": "https://api.example.com/v1?api_key=sk-LITERAL-1234567890"}),
]


def _set(document: dict, dotted: str, value) -> None:
    parts = dotted.split(".")
    node = document
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    node[parts[-1]] = value


@pytest.mark.parametrize("where, patch", LITERALS, ids=[w for w, _ in LITERALS])
def test_validate_refuses_a_literal_credential_in_one_line_without_echoing_it(tmp_path, capsys, where, patch):
    document = tiny_spec_document()
    for dotted, value in patch.items():
        _set(document, dotted, value)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert main(["validate", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and where in lines[0] and "never holds a credential" in lines[0], lines
    assert "LITERAL" not in lines[0]


def test_an_axis_that_patches_in_a_literal_key_is_refused(tmp_path, capsys):
    document = tiny_spec_document()
    document["axes"]["key"] = {"env": {"judge.api_key_env": "OPENAI_API_KEY"},
                               "pasted": {"judge.params": {"api_key": "sk-LITERAL-1234567890"}}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert main(["validate", str(path)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "axes.key.pasted" in lines[0] and "LITERAL" not in lines[0], lines


def test_ordinary_params_and_headers_are_not_mistaken_for_credentials(tmp_path, capsys):
    document = tiny_spec_document()
    document["systems"][0]["params"] = {"temperature": 0.2, "max_tokens": 64, "prompt_cache_key": "run-1",
                                        "extra_headers": {"X-Request-Source": "audit", "HTTP-Referer": "https://example.org"}}
    document["systems"][0]["api_base"] = "http://127.0.0.1:8080/v1?deployment=gpt4"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err


# -- which values count as credentials ------------------------------------------------


def test_secret_values_cover_provider_secret_looking_and_registered_variables(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-value-1")
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "token-value-22222")
    monkeypatch.setenv("MY_APIKEY", "apikey-value-33333")
    monkeypatch.setenv("PGPASSWORD", "password-value-4444")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Jane Q. Auditor")  # AUTHOR is not AUTH
    monkeypatch.setenv("MV_PLAIN_NAME", "registered-value-555")
    monkeypatch.setenv("SHORT_KEY", "1234567")  # too short to redact without eating ordinary text
    assert "registered-value-555" not in credentials.secret_values()
    credentials.register(os.environ["MV_PLAIN_NAME"])
    values = credentials.secret_values()
    for expected in ("sk-provider-value-1", "token-value-22222", "apikey-value-33333", "password-value-4444", "registered-value-555"):
        assert expected in values
    assert "Jane Q. Auditor" not in values and "1234567" not in values


def test_redaction_takes_the_longest_value_first_and_reaches_dict_keys():
    values = ("abcdefgh-1234", "abcdefgh-1234-longer-key")
    ordered = tuple(sorted(values, key=lambda v: (-len(v), v)))
    record = {"abcdefgh-1234": ["x abcdefgh-1234-longer-key y", ("abcdefgh-123",)], "n": 3}
    clean = credentials.redact_all(record, ordered)
    assert clean == {credentials.REDACTED: [f"x {credentials.REDACTED} y", [credentials.REDACTED]], "n": 3}
