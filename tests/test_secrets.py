"""Credentials never reach the disk, and a missing one stops a run before its first call.

Provider keys are set to distinctive fake values; a grid that mixes the
simulated world and the fake OpenAI-compatible server (one system of which
sends a named key to a server that quotes it back in its 401, as some
providers do) then runs through the real CLI, and its report is written. No
key may appear in any file of the run directory, the store or the report, nor
in what the CLI printed, and no provider key may be sent to a local server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from audit_server import audit_responder, fake_spec_document
from cli_runner import spawn_cli
from conftest import explorer_block_texts, tiny_spec_document
from fakeserver import FakeServer
from store_rows import count, stored_records

REPO = Path(__file__).resolve().parents[1]

SECRETS = {
    "OPENAI_API_KEY": "sk-TESTSECRET-openai-4f9c1d7e2b",
    "ANTHROPIC_API_KEY": "sk-ant-TESTSECRET-anthropic-8b3e5a",
    "GEMINI_API_KEY": "TESTSECRET-gemini-0c6d2f9a",
    "GOOGLE_API_KEY": "TESTSECRET-google-71e0b4c8",
    "MISTRAL_API_KEY": "TESTSECRET-mistral-5a2f8e13",
    "COHERE_API_KEY": "TESTSECRET-cohere-93bd06c2",
    "GROQ_API_KEY": "gsk_TESTSECRET-groq-2e7a41f0",
    "TOGETHERAI_API_KEY": "TESTSECRET-together-6c19e3b5",
    "AZURE_API_KEY": "TESTSECRET-azure-d04a7b92",
    "HF_TOKEN": "hf_TESTSECRET-huggingface-3b8e",
    "AWS_SECRET_ACCESS_KEY": "TESTSECRET-aws-f1c6a09d5e",
    "MV_FAKE_KEY": "sk-TESTSECRET-named-key-7d21c0",  # the one a spec names (api_key_env)
}


def _files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in sorted(root.rglob("*")) if p.is_file()]


def _leaks(path: Path) -> list[str]:
    """The secret names whose values appear in the file, raw or (parquet) decoded."""
    raw = path.read_bytes()
    texts = [raw.decode("utf-8", "replace")]
    if path.suffix == ".parquet":  # compressed pages: look at the decoded cells too
        texts.append(pd.read_parquet(path).to_csv(index=False))
    if path.suffix == ".html":  # the explorer's compressed blocks: look at what they hold too
        texts.extend(explorer_block_texts(texts[0]))
    if path.name == "store.sqlite3":  # the store's compressed rows: look at every record they hold too
        texts.extend(json.dumps(record, ensure_ascii=False) for record in stored_records(path.parent).values())
    return [name for name, value in SECRETS.items() if any(value in text for text in texts)]


@pytest.mark.slow
def test_no_key_reaches_the_run_directory_the_store_or_the_report(tmp_path, monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with FakeServer(responder=audit_responder) as server, \
            FakeServer(faults={"auth": 1.0}, echo_key=True) as keyed:
        document = tiny_spec_document(name="secrets")
        document["systems"] = [
            {"name": "atlas", "model": "sim/atlas", "system_prompt": "You are Atlas."},
            {"name": "relay", "model": "openai/fake", "api_base": server.url, "system_prompt": "You are Relay."},
            {"name": "keyed", "model": "openai/fake", "api_base": keyed.url, "api_key_env": "MV_FAKE_KEY",
             "system_prompt": "You are Keyed."},
        ]
        document["axes"] = {"judge": {"sim": {"judge.model": "sim/judge-a"},
                                      "fake": {"judge.model": "openai/fake", "judge.api_base": server.url}}}
        spec = tmp_path / "secrets.yaml"
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        run_dir, store = tmp_path / "run", tmp_path / "store"
        # A process of its own: the keys are in the environment it starts with, as a user's would be.
        done = spawn_cli(["run", spec, "--out", run_dir, "--store", store, "--quiet"], cwd=REPO, env=SECRETS)
        assert done.returncode == 0, done.stderr
        sent = [h.get("Authorization", h.get("authorization", "")) for h in server.headers]
        sent_keyed = [h.get("Authorization", h.get("authorization", "")) for h in keyed.headers]

    # The grid really ran both worlds, and the keyed system's 401 quoted its key back.
    # (The simulated judge fails to answer JSON at a declared rate: judge_failed is allowed.)
    verdicts = pd.read_parquet(run_dir / "verdicts.parquet")
    answered = verdicts[verdicts.system != "keyed"]
    assert set(answered.status) <= {"ok", "excluded", "judge_failed"}
    assert (answered.groupby("judge").status.apply(lambda s: (s == "ok").sum()) > 0).all()
    keyed_rows = verdicts[verdicts.system == "keyed"]
    assert (keyed_rows.status == "rollout_failed").all()
    assert keyed_rows.reason.str.contains("invalid api key").all()
    assert sent and set(sent) == {"Bearer sk-local"}  # a local server never gets a provider key
    assert sent_keyed and set(sent_keyed) == {f"Bearer {SECRETS['MV_FAKE_KEY']}"}  # only the key the spec named

    report = None
    try:
        from multiverse.reporting import write_report
    except ImportError:  # the report module is being built; the rest still holds
        pass
    else:
        report = write_report(run_dir, tmp_path / "report" / "report.html", store=store)

    files = _files(run_dir, store) + ([Path(report)] if report else [])
    assert count(store) > 0 and (run_dir / "manifest.json").exists()
    leaks = {str(p): names for p in files if (names := _leaks(p))}
    assert not leaks, f"keys written to disk: {leaks}"
    printed = done.stdout + done.stderr
    assert not [name for name, value in SECRETS.items() if value in printed]


def test_missing_provider_key_fails_before_the_first_call(tmp_path):
    with FakeServer(responder=audit_responder) as server:
        document = fake_spec_document(server.url, name="hosted")
        document["systems"] = [
            {"name": "claude", "model": "anthropic/claude-3-5-haiku-20241022", "system_prompt": "You are Claude."},
            {"name": "relay", "model": "openai/fake", "api_base": server.url, "system_prompt": "You are Relay."},
        ]
        spec = tmp_path / "hosted.yaml"
        spec.write_text(yaml.safe_dump(document, sort_keys=False))
        store = tmp_path / "store"
        done = spawn_cli(["run", spec, "--out", tmp_path / "run", "--store", store, "--quiet"], cwd=REPO,
                         env={"ANTHROPIC_API_KEY": None, "ANTHROPIC_AUTH_TOKEN": None})
        calls = server.counts["total"]

    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert len(lines) == 1 and "ANTHROPIC_API_KEY" in lines[0], done.stderr
    assert calls == 0, f"{calls} model calls were made before the missing key was noticed"
    assert not (store / "store.sqlite3").exists() or count(store) == 0, \
        "the store was written to before the missing key was noticed"
