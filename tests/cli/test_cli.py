"""The `multiverse` command: help, validate, expand, plan, bad flags, and what it imports."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run_cli

from multiverse.cli import build_parser
from multiverse.spec import load_spec
from multiverse.spec._grid import expand

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "specs" / "demo.yaml"
AXES = ["setting", "user", "judge", "evidence", "scoring"]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """An empty working directory; nothing the read-only commands do may write into it."""
    path = tmp_path / "cwd"
    path.mkdir()
    yield path
    assert list(path.iterdir()) == []


def subcommands() -> dict[str, str]:
    """Subcommand -> its one-line help, read off the real parser."""
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return {c.dest: c.help for c in action._choices_actions}


# -- help ---------------------------------------------------------------------------


def test_help_lists_every_subcommand_and_exits_0(cwd):
    out = run_cli(["--help"], cwd=cwd).ok()
    assert "multiverse" in out and "audit" in out
    for name in subcommands():
        assert name in out
    for name in ("validate", "expand", "plan", "schema", "draft", "run", "demo", "import", "report"):
        assert name in subcommands()


def test_no_arguments_prints_help(cwd):
    out = run_cli([], cwd=cwd).ok()
    assert "usage: multiverse" in out and "validate" in out


def test_version(cwd):
    import multiverse

    assert run_cli(["--version"], cwd=cwd).ok().strip() == f"multiverse {multiverse.__version__}"


PURPOSE = {
    "validate": "check a spec",
    "expand": "universes",
    "plan": "model calls",
    "schema": "JSON Schema",
    "draft": "draft",
    "run": "run every universe",
    "demo": "simulated",
    "import": "import",
    "report": "report",
}


@pytest.mark.parametrize("name", sorted(subcommands()))
def test_every_subcommand_has_help_that_says_what_it_does(name, cwd):
    out = run_cli([name, "--help"], cwd=cwd).ok()
    assert out.startswith(f"usage: multiverse {name}")
    # The description is the subcommand's one-line help (argparse may re-wrap it).
    help_text = subcommands()[name]
    assert help_text, f"{name} has no help text"
    assert " ".join(help_text.split()) in " ".join(out.split())
    if name in PURPOSE:
        assert PURPOSE[name].lower() in out.lower()


# -- validate / expand ------------------------------------------------------------------


def test_validate_the_demo(cwd):
    out = run_cli(["validate", DEMO], cwd=cwd).ok()
    assert out.strip() == f"{DEMO}: ok: 24 universes over 5 axes, 4 systems"


@pytest.fixture(scope="module")
def demo_universes():
    return expand(load_spec(DEMO))


def test_expand_json(cwd, demo_universes):
    done = run_cli(["expand", DEMO, "--format", "json"], cwd=cwd)
    universes = json.loads(done.ok())
    assert isinstance(universes, list) and len(universes) == 24
    for entry in universes:
        assert isinstance(entry, dict)
        assert {"id", "label", "axes"} <= set(entry)
        assert isinstance(entry["id"], str) and len(entry["id"]) >= 8
        assert list(entry["axes"]) == AXES
        assert all(isinstance(v, str) for v in entry["axes"].values())
        assert entry["label"] == " · ".join(f"{a}={o}" for a, o in entry["axes"].items())
    assert [e["id"] for e in universes] == [u.id for u in demo_universes]
    assert [e["axes"] for e in universes] == [dict(u.options) for u in demo_universes]
    assert len({e["id"] for e in universes}) == 24
    assert universes[0]["primary"] is True and sum(e["primary"] for e in universes) == 1


def test_expand_csv(cwd, demo_universes):
    rows = list(csv.reader(io.StringIO(run_cli(["expand", DEMO, "--format", "csv"], cwd=cwd).ok())))
    header, body = rows[0], rows[1:]
    assert header[:2] == ["id", "label"]
    assert header[2:2 + len(AXES)] == AXES
    assert len(body) == 24
    assert all(len(r) == len(header) for r in body)
    records = [dict(zip(header, r)) for r in body]
    assert [r["id"] for r in records] == [u.id for u in demo_universes]
    assert [{a: r[a] for a in AXES} for r in records] == [dict(u.options) for u in demo_universes]


def test_expand_table_is_the_default(cwd, demo_universes):
    out = run_cli(["expand", DEMO], cwd=cwd).ok()
    lines = out.splitlines()
    assert lines[0].split() == ["id", *AXES, "primary"]  # every column is labelled
    assert lines[-1] == "24 universes"
    body = [line for line in lines[2:] if line.strip() and not line.endswith(" universes")]
    assert [line.split()[0] for line in body] == [u.id for u in demo_universes]
    assert body[0].endswith("yes") and sum(line.endswith("yes") for line in body) == 1


# -- plan ---------------------------------------------------------------------------------


def test_plan_json(cwd, tmp_path, demo_universes):
    store = tmp_path / "store"
    done = run_cli(["plan", DEMO, "--json", "--store", store], cwd=cwd)
    plan = json.loads(done.ok())  # the whole stdout is one JSON document
    assert plan["universes"] == [u.id for u in demo_universes]
    assert plan["axis_stages"] == {
        "setting": "rollout", "user": "rollout", "judge": "judge", "evidence": "judge", "scoring": "score",
    }
    stages = plan["stages"]
    assert list(stages) == ["draft", "rollout", "judge", "score"]
    for name, stage in stages.items():
        assert set(stage) >= {"units", "calls", "stored", "failed", "blocked", "to_compute", "calls_to_make", "cost"}, name
        for key in ("units", "calls", "stored", "failed", "blocked", "to_compute", "calls_stored", "calls_to_make"):
            assert isinstance(stage[key], int) and stage[key] >= 0, (name, key)
        assert isinstance(stage["cost"], (int, float)) and stage["cost"] >= 0
        # An empty store: every unit is still to compute, with every call.
        assert stage["stored"] == stage["failed"] == stage["blocked"] == 0
        assert stage["to_compute"] == stage["units"] and stage["calls_to_make"] == stage["calls"]
    # Sharing: 6 behaviours x 2 conditions x 2 cases are drafted once for all universes;
    # 4 systems x 3 rollout configurations (multi-turn x 2 users, single-turn) per case;
    # every transcript is judged by 2 judges x 2 evidence standards; scoring makes no calls.
    assert stages["draft"]["units"] == 36 and stages["draft"]["calls"] == 36
    assert stages["rollout"]["units"] == 36 * 4 * 3
    assert stages["judge"]["units"] == stages["judge"]["calls"] == 36 * 4 * 3 * 4
    assert stages["score"]["units"] == 24 * 36 * 4 and stages["score"]["calls"] == 0
    assert all(stage["cost"] == 0 for stage in stages.values())  # sim/ models are free
    assert not store.exists(), "plan must not create the store"


# -- what the fast commands import ------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["validate", str(DEMO)],
        ["expand", str(DEMO), "--format", "json"],
        # plan's table form (its --json form is checked above); ~3 s, so checked here once.
        ["plan", str(DEMO), "--store", "STORE"],
        ["schema"],
    ],
    ids=["help", "validate", "expand", "plan", "schema"],
)
def test_fast_commands_do_not_import_litellm(argv, cwd, tmp_path):
    argv = [str(tmp_path / "store") if a == "STORE" else a for a in argv]
    code = (
        "import sys, multiverse.cli as c\n"
        "try:\n"
        f"    code = c.main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    code = exc.code\n"
        "print('EXIT', code)\n"
        "print('litellm' in sys.modules, 'matplotlib' in sys.modules, 'pandas' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MULTIVERSE_STORE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2] == "EXIT 0", done.stdout[-500:] + done.stderr
    litellm, matplotlib, pandas = lines[-1].split()
    assert (litellm, matplotlib) == ("False", "False"), f"{argv[0]} imported litellm or matplotlib"
    # Only plan tabulates (its cost estimate); the others read YAML and print (pandas is 1 s of start-up).
    assert pandas == str(argv[0] == "plan"), f"{argv[0]} imported pandas: {pandas}"
    if argv[0] == "plan":
        out = done.stdout
        assert out.startswith("24 universes, 4 systems")
        for word in ("axis", "stage it touches", "draft", "rollout", "judge", "score", "to compute", "est. cost"):
            assert word in out


# -- bad flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, mentions",
    [
        (["run", DEMO, "--jobs", "0"], "--jobs"),
        (["run", DEMO, "--jobs", "many"], "--jobs"),
        (["run", DEMO, "--budget", "-1"], "--budget"),
        (["run", DEMO, "--budget", "lots"], "--budget"),
        (["demo", "--jobs", "-3"], "--jobs"),
        (["expand", DEMO, "--format", "xml"], "--format"),
        (["validate", DEMO, "--bogus"], "--bogus"),
        (["validate"], "spec"),
        (["frobnicate"], "frobnicate"),
        (["--bogus"], "--bogus"),
    ],
    ids=["jobs-0", "jobs-text", "budget-negative", "budget-text", "demo-jobs", "format-xml", "unknown-flag",
         "missing-spec", "unknown-command", "unknown-global-flag"],
)
def test_bad_flags_exit_2_with_one_line(argv, mentions, cwd):
    done = run_cli(argv, cwd=cwd)
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "error: " in lines[0] and mentions in lines[0], lines[0]


def test_a_missing_spec_file_exits_2(cwd):
    done = run_cli(["validate", cwd / "nope.yaml"], cwd=cwd)
    assert done.returncode == 2
    assert done.stderr == f"error: {cwd / 'nope.yaml'}: file not found\n"


def test_a_directory_as_spec_exits_2(cwd, tmp_path):
    done = run_cli(["expand", tmp_path], cwd=cwd)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {tmp_path}: expected a YAML file, got a directory"]


def test_plan_counts_what_is_already_stored(tmp_path):
    # In-process (the CLI prints exactly this dict with --json): store a few
    # transcripts and judgments, and plan must count them as stored.
    import yaml

    from multiverse.engine._pipeline import plan
    from multiverse.spec import parse_spec
    from multiverse.store._store import Store
    from multiverse.work._units import build_work

    raw = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    raw["sample"] = {"n": 3, "method": "random", "seed": 1}  # a small grid keeps this quick
    spec = parse_spec(raw, path=DEMO)
    work = build_work(spec, expand(spec))
    store = Store(tmp_path / "store")
    transcripts = sorted(work.transcripts)[:5]
    judgments = sorted(work.judge_calls)[:7]
    for key in transcripts:
        store.put("transcript", key, {"status": "ok", "turns": []})
    for key in judgments:
        store.put("judgment", key, {"status": "ok", "criteria": []})
    stages = plan(spec, store=store).stages
    per_transcript = {k: (1 if t.setting == "single_turn" else 2 * t.max_turns) for k, t in work.transcripts.items()}
    assert stages["rollout"].stored == 5
    assert stages["rollout"].calls_stored == sum(per_transcript[k] for k in transcripts)
    assert stages["rollout"].calls_to_make == stages["rollout"].calls - stages["rollout"].calls_stored
    assert stages["judge"].stored == 7
    assert stages["judge"].to_compute == stages["judge"].units - 7
    assert stages["judge"].calls_to_make == stages["judge"].calls - 7
    assert stages["draft"].stored == 0
