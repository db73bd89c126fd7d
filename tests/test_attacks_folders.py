"""Attacks on run and import folders as untrusted input (issue 23 item 1).

A run folder is passed around like a document, so every file in it is read
by one reader (``multiverse.tables._folder``): inside the folder only, regular files
only, under a cap, each JSON and YAML document checked against its model.
Every refusal is one line naming the file (and the field), exit 2, and
nothing written; no file outside the folder is ever read into an output.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from cli_runner import run_cli, spawn_cli
from conftest import explorer_block_texts
from store_rows import rewrite

from multiverse.errors import InputError
from multiverse.explorer import render_explorer
from multiverse.results._load import load_run
from multiverse.tables._folder import CAPS, folder_file, read_manifest, read_spec, read_transcripts

SECRET = "SECRET-MARKER-8c1f"


@pytest.fixture
def run_dir(sim_run, tmp_path) -> Path:
    """A copy of the session's run folder, free to be tampered with."""
    return Path(shutil.copytree(sim_run.out, tmp_path / "run"))


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the run, holding files an attacker would like copied into a report."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def _outputs(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _report_refused(run_dir: Path, *fragments: str) -> str:
    page = run_dir / "report.html"
    line = run_cli(["report", run_dir, "--out", page]).refused(*fragments)
    assert not page.exists() and not list(run_dir.glob("*.tmp*")), "nothing may be written"
    return line


# -- links that lead outside the folder ------------------------------------------------------------


def _secret_copy(run_dir: Path, outside: Path, name: str) -> Path:
    """An outside file that would pass as ``name`` and carries the secret."""
    target = outside / name
    if name == "spec.yaml":
        document = yaml.safe_load((run_dir / name).read_text())
        document["concept"]["context"] = SECRET
        target.write_text(yaml.safe_dump(document))
    elif name == "manifest.json":
        document = json.loads((run_dir / name).read_text())
        document["spec"] = SECRET
        target.write_text(json.dumps(document))
    elif name == "transcripts.jsonl":
        lines = (run_dir / name).read_text().splitlines()
        target.write_text("\n".join(line.replace('"content": "', f'"content": "{SECRET} ') for line in lines) + "\n")
    elif name.endswith(".csv"):
        target.write_text((run_dir / name).read_text().replace("atlas", SECRET))
    else:
        import pandas as pd

        frame = pd.read_parquet(run_dir / name)
        column = "system" if "system" in frame.columns else "rationale"
        frame[column] = frame[column].astype(str) + SECRET
        frame.to_parquet(target)
    return target


@pytest.mark.parametrize("name", ["spec.yaml", "manifest.json", "transcripts.jsonl", "verdicts.parquet",
                                  "verdicts.csv", "criteria.parquet", "rates.csv"])
def test_a_file_linked_from_outside_the_folder_is_refused_and_never_read(run_dir, outside, name):
    target = _secret_copy(run_dir, outside, name)
    (run_dir / name).unlink()
    (run_dir / name).symlink_to(target)
    _report_refused(run_dir, name, "outside the folder")
    run_cli(["curve", run_dir]).refused(name, "outside the folder")
    run_cli(["label", run_dir, "--n", "1", "--out", run_dir / "sheet.csv"]).refused(name, "outside the folder")
    assert SECRET not in _outputs(run_dir)


def test_a_chain_of_links_that_ends_outside_is_refused(run_dir, outside):
    target = _secret_copy(run_dir, outside, "spec.yaml")
    (run_dir / "spec.yaml").unlink()
    (run_dir / "hop.yaml").symlink_to(target)  # inside the folder, but it leads out
    (run_dir / "spec.yaml").symlink_to("hop.yaml")
    _report_refused(run_dir, "spec.yaml", "outside the folder")


def test_a_link_through_a_relative_climb_is_refused(run_dir, outside):
    target = _secret_copy(run_dir, outside, "manifest.json")
    (run_dir / "manifest.json").unlink()
    (run_dir / "manifest.json").symlink_to(Path("..") / outside.name / target.name)
    run_cli(["curve", run_dir]).refused("manifest.json", "outside the folder")


def test_a_link_inside_the_folder_to_a_file_inside_it_is_fine(run_dir):
    (run_dir / "kept").mkdir()
    for name in ("spec.yaml", "rates.csv", "transcripts.jsonl"):
        (run_dir / name).rename(run_dir / "kept" / name)
        (run_dir / name).symlink_to(Path("kept") / name)
    assert "universes" in run_cli(["curve", run_dir]).ok()
    assert read_spec(run_dir).document.name == "tiny"
    assert read_transcripts(run_dir)


def test_a_run_folder_that_is_itself_a_link_is_read(run_dir, tmp_path):
    link = tmp_path / "linked-run"
    link.symlink_to(run_dir)
    assert len(load_run(link).verdicts) == len(load_run(run_dir).verdicts)


@pytest.mark.parametrize("kind", ["dangling", "loop"])
def test_dangling_and_looping_links_are_one_line(run_dir, kind):
    (run_dir / "spec.yaml").unlink()
    if kind == "dangling":
        (run_dir / "spec.yaml").symlink_to(run_dir / "gone.yaml")
    else:
        (run_dir / "a.yaml").symlink_to(run_dir / "spec.yaml")
        (run_dir / "spec.yaml").symlink_to(run_dir / "a.yaml")
    run_cli(["curve", run_dir]).refused("spec.yaml", "symbolic link")


# -- devices, FIFOs, folders and sizes ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["manifest.json", "spec.yaml", "transcripts.jsonl", "verdicts.parquet", "rates.csv"])
@pytest.mark.parametrize("command", ["report", "curve", "label"])
def test_a_fifo_in_the_folder_never_hangs(run_dir, name, command):
    (run_dir / name).unlink()
    os.mkfifo(run_dir / name)
    argv = {"report": ["report", run_dir, "--out", run_dir / "report.html"], "curve": ["curve", run_dir],
            "label": ["label", run_dir, "--n", "1", "--out", run_dir / "sheet.csv"]}[command]
    done = spawn_cli(argv, timeout=120)  # TimeoutExpired fails the test: the reader blocked on the FIFO
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0] and "FIFO" in lines[0], done.stderr
    assert not (run_dir / "report.html").exists() and not (run_dir / "sheet.csv").exists()


def test_a_device_is_refused_even_when_the_folder_holds_it(tmp_path):
    # /dev itself as the "folder": its null and zero are inside it, so only the regular-file check stands.
    with pytest.raises(InputError, match=r"zero: expected a regular file, got a device"):
        from multiverse.tables._folder import read_folder_bytes

        read_folder_bytes("/dev", "zero", kind="manifest.json")


@pytest.mark.parametrize("name", ["manifest.json", "spec.yaml", "transcripts.jsonl", "verdicts.parquet"])
def test_a_folder_where_a_file_belongs_is_one_line(run_dir, name):
    (run_dir / name).unlink()
    (run_dir / name).mkdir()
    run_cli(["curve", run_dir]).refused(name, "directory")


@pytest.mark.parametrize("name, kind", [("manifest.json", "manifest.json"), ("spec.yaml", "spec.yaml"),
                                        ("transcripts.jsonl", "transcripts.jsonl"), ("verdicts.parquet", "table")])
def test_files_past_their_cap_are_refused_before_reading(run_dir, name, kind):
    path = run_dir / name
    with open(path, "r+b") as handle:
        handle.truncate(CAPS[kind] + 1)  # sparse: no disk spent, no byte read
    line = run_cli(["curve", run_dir]).refused(name, "expected")
    assert "MB" in line or "GB" in line


def test_memory_stays_bounded_on_a_huge_manifest(run_dir):
    import tracemalloc

    with open(run_dir / "manifest.json", "r+b") as handle:
        handle.truncate(4 * CAPS["manifest.json"])
    tracemalloc.start()
    with pytest.raises(InputError, match=r"manifest\.json"):
        load_run(run_dir)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 * 2**20, peak


def test_a_transcript_line_past_its_cap_is_refused_without_reading_it_whole(run_dir, monkeypatch):
    import multiverse.tables._folder

    monkeypatch.setattr(multiverse.tables._folder, "MAX_LINE_BYTES", 1000)
    with pytest.raises(InputError, match=r"transcripts.jsonl: line 1: longer than"):
        read_transcripts(run_dir)


# -- text that is not text, documents that are bombs ------------------------------------------------------


@pytest.mark.parametrize("name", ["manifest.json", "spec.yaml", "transcripts.jsonl"])
def test_non_utf8_files_are_one_line(run_dir, name):
    (run_dir / name).write_bytes(b'{"a": "\xff\xfe"}\n')
    _report_refused(run_dir, name, "UTF-8")


def test_a_yaml_alias_bomb_in_spec_yaml_is_refused_before_expansion(run_dir):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (run_dir / "spec.yaml").write_text("\n".join(lines) + "\nname: tiny\n")
    run_cli(["curve", run_dir]).refused("spec.yaml", "aliases")


@pytest.mark.parametrize("name", ["manifest.json", "spec.yaml", "transcripts.jsonl"])
def test_deeply_nested_documents_are_one_line(run_dir, name):
    (run_dir / name).write_text("[" * 100_000 + "]" * 100_000 + "\n")
    _report_refused(run_dir, name)


def test_python_tags_in_spec_yaml_are_refused(run_dir):
    (run_dir / "spec.yaml").write_text("name: !!python/object/apply:os.system ['echo pwned']\n")
    run_cli(["curve", run_dir]).refused("spec.yaml", "not allowed")


# -- a manifest of the wrong shape ------------------------------------------------------------------------

MANIFEST_ATTACKS = [
    (None, [1], "(the run's manifest)"),
    (None, "just text", "(the run's manifest)"),
    ("axes", 5, "axes"), ("axes", [1], "axes.0"), ("factors", {"a": 1}, "factors"),
    ("universes", "x", "universes"), ("universes", [5], "universes.0"), ("universes", [{"label": "no id"}], "universes.0.id"),
    ("universes", [{"id": "u", "options": [1]}], "universes.0.options"),
    ("universes", [{"id": "u", "options": {"judge": {"deep": 1}}}], "universes.0.options.judge"),
    ("universes", [{"id": "u", "primary": "yes"}], "universes.0.primary"),
    ("stages", [1], "stages"), ("stages", {"draft": 3}, "stages.draft"),
    ("stages", {"draft": {"units": "5"}}, "stages.draft.units"), ("stages", {"draft": {"failures": [1]}}, "stages.draft.failures"),
    ("versions", [1], "versions"), ("versions", {"pandas": 2}, "versions.pandas"),
    ("store", 12, "store"), ("store", ["a"], "store"), ("primary", 7, "primary"), ("primary", True, "primary"),
    ("spec", {"name": "x"}, "spec"), ("simulated", "yes", "simulated"), ("tokens", "many", "tokens"),
    ("tokens", 1.5, "tokens"), ("cost", "free", "cost"), ("created", 20261201, "created"),
    ("failures", {"judge": "boom"}, "failures.judge"), ("statuses", {"ok": "48"}, "statuses.ok"),
    ("axis_stages", {"judge": 1}, "axis_stages.judge"), ("models_reported", "sim", "models_reported"),
    ("warnings", "careful", "warnings"), ("schema_version", 99, "schema_version"), ("schema_version", "1", "schema_version"),
    ("ci", 3, "ci"), ("ci", "nope", "ci"), ("level", 1.5, "level"), ("level", "high", "level"), ("universe_options", 5, "universe_options"),
    ("seconds", "long", "seconds"),
    # Names that would make the analyses group by one column twice.
    ("axes", ["universe_id"], "axes.0"), ("axes", ["system"], "axes.0"), ("axes", ["judge", "judge"], "axes.1"),
    ("factors", ["judge"], "factors.0"), ("factors", ["compliant"], "factors.0"),
]


@pytest.mark.parametrize("field, value, named", MANIFEST_ATTACKS)
def test_a_manifest_of_the_wrong_shape_is_one_line_naming_the_field(run_dir, field, value, named):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    document = value if field is None else {**manifest, field: value}
    (run_dir / "manifest.json").write_text(json.dumps(document))
    line = run_cli(["curve", run_dir]).refused("manifest.json", named, "expected")
    assert line.startswith(f"error: {run_dir / 'manifest.json'}: ")


@pytest.mark.parametrize("field, value, named", MANIFEST_ATTACKS[:12])
def test_report_and_store_refuse_a_bad_manifest_before_writing(run_dir, field, value, named):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps(value if field is None else {**manifest, field: value}))
    _report_refused(run_dir, "manifest.json", named)
    run_cli(["store", "stats", run_dir]).refused("manifest.json", named)


def test_the_manifest_is_typed_and_old_shapes_load(run_dir):
    manifest = read_manifest(run_dir)
    assert manifest.axes == ["judge", "evidence"] and manifest.stages["judge"].units == 48
    assert manifest.universes[0].options == {"judge": "judge_a", "evidence": "strict"}
    # Facts a later writer adds are kept, and a minimal manifest of an early layout still loads.
    document = json.loads((run_dir / "manifest.json").read_text())
    (run_dir / "manifest.json").write_text(json.dumps({**document, "a_later_fact": {"x": [1, 2]}}))
    assert load_run(run_dir).manifest.model_extra["a_later_fact"] == {"x": [1, 2]}
    (run_dir / "manifest.json").write_text(json.dumps({"axes": document["axes"], "factors": document["factors"]}))
    assert len(load_run(run_dir).verdicts) == 48


# -- spec.yaml and transcripts.jsonl of the wrong shape ------------------------------------------------------------

SPEC_ATTACKS = [
    (lambda d: [d], "(the run's resolved spec)"),
    (lambda d: {**d, "axes": 5}, "axes"),
    (lambda d: {**d, "axes": {"judge": [1]}}, "axes.judge"),
    (lambda d: {**d, "axes": {"judge": {"judge_a": 3}}}, "axes.judge.judge_a"),
    (lambda d: {**d, "axes": {"judge": {"judge_a": {"scoring.ci.level": "high"}}}}, "scoring.ci.level"),
    (lambda d: {**d, "axes": {"judge": {"judge_a": {"scoring.ci": {"n_boot": "many"}}}}}, "n_boot"),
    (lambda d: {**d, "rubric": {"criteria": "all"}}, "rubric.criteria"),
    (lambda d: {**d, "rubric": {"criteria": [{"name": "no id"}]}}, "rubric.criteria.0.id"),
    (lambda d: {**d, "rubric": {"criteria": [{"id": "c", "evidence": ["x"]}]}}, "rubric.criteria.0.evidence"),
    (lambda d: {**d, "scoring": {"ci": {"level": "high"}}}, "scoring.ci.level"),
    (lambda d: {**d, "scoring": 5}, "scoring"),
    (lambda d: {**d, "scoring": {"ci": {"method": "nope"}}}, "scoring.ci.method"),
    (lambda d: {**d, "scoring": {"ci": {"level": 5}}}, "scoring.ci.level"),
    (lambda d: {**d, "scoring": {"ci": {"n_boot": 10**11}}}, "scoring.ci.n_boot"),  # would resample for hours
    (lambda d: {**d, "axes": {"judge": {"judge_a": {"scoring.ci.method": "nope"}}}}, "scoring.ci.method"),
    (lambda d: {**d, "name": ["x"]}, "name"),
]


@pytest.mark.parametrize("change, named", SPEC_ATTACKS)
def test_a_spec_yaml_of_the_wrong_shape_is_one_line(run_dir, change, named):
    document = yaml.safe_load((run_dir / "spec.yaml").read_text())
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(change(document)))
    run_cli(["curve", run_dir]).refused("spec.yaml", named)


TRANSCRIPT_ATTACKS = [
    ("[1, 2]", "line 1", "one transcript"),
    ('{"system": "atlas"}', "line 1", "key"),
    ('{"key": 5}', "line 1", "key"),
    ('{"key": "k", "turns": 5}', "line 1", "turns"),
    ('{"key": "k", "turns": [1]}', "line 1", "turns.0"),
    ('{"key": "k", "status": ["ok"]}', "line 1", "status"),
    ("{not json", "line 1", "JSON"),
]


@pytest.mark.parametrize("line, where, named", TRANSCRIPT_ATTACKS)
def test_a_transcript_of_the_wrong_shape_is_one_line(run_dir, line, where, named):
    (run_dir / "transcripts.jsonl").write_text(line + "\n")
    _report_refused(run_dir, "transcripts.jsonl", where, named)
    run_cli(["label", run_dir, "--n", "1", "--out", run_dir / "sheet.csv"]).refused("transcripts.jsonl", named)
    assert not (run_dir / "sheet.csv").exists()


# -- import folders and the output-place check ------------------------------------------------------------


def _imported(tmp_path) -> Path:
    table = tmp_path / "labels.csv"
    table.write_text("model,item,label\nA,i1,yes\nA,i2,no\nB,i1,yes\nB,i2,no\n")
    out = tmp_path / "imported"
    run_cli(["import", "table", table, "--system", "model", "--item", "item", "--label", "label",
             "--positive", "yes", "--negative", "no", "--out", out]).ok()
    return out


def test_an_import_folder_loads_and_its_manifest_is_checked(tmp_path, outside):
    out = _imported(tmp_path)
    assert read_manifest(out).source == "table" and read_manifest(out).universes[0].options == {}
    assert "universes" in run_cli(["curve", out]).ok()
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "universe_options": {"u": 5}}))
    run_cli(["curve", out]).refused("manifest.json", "universe_options.u")
    (out / "manifest.json").write_text(json.dumps(manifest))
    target = _secret_copy(out, outside, "verdicts.csv")
    (out / "verdicts.parquet").unlink()
    (out / "verdicts.csv").unlink()
    (out / "verdicts.csv").symlink_to(target)
    run_cli(["report", out, "--out", out / "report.html"]).refused("verdicts.csv", "outside the folder")
    assert SECRET not in _outputs(out)


def test_the_output_place_check_never_hangs_on_a_fifo_manifest(tmp_path):
    from multiverse.tables._places import folder_kind

    folder = tmp_path / "out"
    folder.mkdir()
    os.mkfifo(folder / "manifest.json")
    found: list = []
    worker = threading.Thread(target=lambda: found.append(folder_kind(folder)), daemon=True)
    worker.start()
    worker.join(30)
    assert found == [None]


def test_folder_file_keeps_to_the_folder(tmp_path):
    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.json").write_text("{}")
    (tmp_path / "secret.json").write_text("{}")
    assert folder_file(folder, "sub/a.json") == (folder / "sub" / "a.json").resolve()
    assert folder_file(folder, "missing.json") is None
    for name in ("../secret.json", tmp_path / "secret.json", "sub/../../secret.json"):
        with pytest.raises(InputError, match="outside the folder"):
            folder_file(folder, name)
    (folder / "up").symlink_to(tmp_path)  # a folder on the way that is a link out
    with pytest.raises(InputError, match="outside the folder"):
        folder_file(folder, "up/secret.json")


# -- files a spec names ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "directory", "huge", "alias_bomb"])
def test_a_world_file_named_by_a_spec_is_read_bounded(tmp_path, kind):
    from conftest import tiny_spec_document

    world = tmp_path / "world.yaml"
    if kind == "dev_zero":
        world.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(world)
    elif kind == "directory":
        world.mkdir()
    elif kind == "huge":
        with open(world, "wb") as handle:
            handle.truncate(64 * 2**20)
    else:
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
        world.write_text("\n".join(lines) + "\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(tiny_spec_document(world="world.yaml")))
    done = spawn_cli(["validate", spec], timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "world.yaml" in lines[0] and "MemoryError" not in lines[0], done.stderr


# -- the store a manifest names is never read ----------------------------------------------------


def _own_store(sim_run, where: Path) -> Path:
    """The reader's own store (a copy of the run's): every transcript the folder's verdicts name carries the secret."""
    store = Path(shutil.copytree(sim_run.store, where))

    def plant(record: dict) -> dict:
        record["turns"][0]["content"] = f"{SECRET} " + record["turns"][0]["content"]
        return record

    assert rewrite(store, "transcript", plant)
    return store


def _shown(page: str) -> str:
    """The page's text and its compressed blocks' (where the explorer keeps the transcripts)."""
    return page + "".join(explorer_block_texts(page))


# What a hostile manifest's "store" names -> where the reader's store sits (under tmp_path) and the environment.
STORE_POINTERS = {
    "absolute": (lambda t: str(t / "mine"), "mine", {}),
    "relative to the cwd": (lambda t: "stores/mine", "cwd/stores/mine", {}),
    "climbing from the folder": (lambda t: "../mine", "mine", {}),
    "climbing to the root": (lambda t: "../" * 40 + str(t / "mine").lstrip("/"), "mine", {}),
    "the cwd's default store": (lambda t: ".multiverse/store", "cwd/.multiverse/store", {}),
    "$MULTIVERSE_STORE": (lambda t: "$MULTIVERSE_STORE", "mine", {"MULTIVERSE_STORE": "mine"}),
    "none, with $MULTIVERSE_STORE set": (lambda t: None, "mine", {"MULTIVERSE_STORE": "mine"}),
    "home": (lambda t: "~/mine", "mine", {"HOME": ""}),
}


@pytest.mark.parametrize("pointer, jsonl", [(p, "absent") for p in STORE_POINTERS] + [("absolute", "empty")])
def test_a_manifest_naming_the_readers_own_store_never_copies_its_transcripts(sim_run, run_dir, tmp_path,
                                                                              monkeypatch, pointer, jsonl):
    """Whatever store the manifest names (or the environment would default to), with no transcripts.jsonl to
    show: the reader's own transcripts stay out of report.html, from the command line and from Python."""
    from multiverse.explorer import document_from_run
    from multiverse.reporting import write_report

    value, where, env = STORE_POINTERS[pointer]
    _own_store(sim_run, tmp_path / where)
    env = {k: str(tmp_path / v) if k == "MULTIVERSE_STORE" else str(tmp_path) for k, v in env.items()}
    (tmp_path / "cwd").mkdir(exist_ok=True)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.pop("store")
    if value(tmp_path) is not None:
        manifest["store"] = value(tmp_path)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    if jsonl == "absent":
        (run_dir / "transcripts.jsonl").unlink()
    else:
        (run_dir / "transcripts.jsonl").write_text("")
    run_cli(["report", run_dir, "--out", tmp_path / "cli.html", "--no-tests", "--quiet"], cwd=tmp_path / "cwd",
            env=env).ok()
    monkeypatch.chdir(tmp_path / "cwd")
    for name, setting in env.items():
        monkeypatch.setenv(name, setting)
    for page in ((tmp_path / "cli.html").read_text(),
                 write_report(run_dir, tmp_path / "api.html", tests=False, progress=False).read_text()):
        assert SECRET not in _shown(page) and 'class="turn' not in page
        assert "Transcripts are unavailable" in page and "give the store that holds the run" in page
    assert SECRET not in json.dumps(document_from_run(run_dir)["blocks"]) + "".join(
        explorer_block_texts(render_explorer(document_from_run(run_dir))))


def test_a_run_shows_its_own_transcripts_and_a_store_given_is_read(sim_run, run_dir, tmp_path):
    """The legitimate paths: a run's folder carries its transcripts; an older folder shows a store named for it."""
    from multiverse.explorer import document_from_run

    mine = _own_store(sim_run, tmp_path / "mine")
    run_cli(["report", run_dir, "--out", tmp_path / "own.html", "--no-tests", "--quiet"]).ok()
    own = (tmp_path / "own.html").read_text()
    assert 'class="turn user"' in own and "Transcripts are unavailable" not in own and SECRET not in _shown(own)
    (run_dir / "transcripts.jsonl").unlink()
    run_cli(["report", run_dir, "--out", tmp_path / "given.html", "--store", mine, "--no-tests", "--quiet"]).ok()
    given = (tmp_path / "given.html").read_text()
    assert SECRET in _shown(given) and 'class="turn user"' in given  # so the test above would see a leak
    assert SECRET in "".join(explorer_block_texts(render_explorer(document_from_run(run_dir, store=mine))))
    run_cli(["report", run_dir, "--store", tmp_path / "nowhere"]).refused("--store", "nowhere")
    assert not (run_dir / "report.html").exists()
