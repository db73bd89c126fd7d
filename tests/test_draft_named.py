"""``draft`` writes the rubric and cases files its spec names (issue 48): a spec whose ``design.cases`` or
``rubric`` names a file not written yet is what a new user writes first, and the draft goes there."""

from __future__ import annotations

import pytest
import yaml
from cli_runner import run_cli
from conftest import tiny_spec_document

from multiverse.engine._pipeline import draft, run
from multiverse.errors import SpecError
from multiverse.spec import load_spec


@pytest.mark.parametrize("named", ["spec.cases.yaml", "my-cases.yaml", "cases/edited.yaml"])
def test_draft_writes_the_cases_file_the_spec_names_and_run_uses_it(write_spec, tmp_path, counting_client, named):
    (tmp_path / "cases").mkdir()
    document = tiny_spec_document(rollout={"setting": "single_turn"})
    plain = draft(load_spec(write_spec(document, "plain.yaml")), store=tmp_path / "store", client=counting_client)
    document["design"]["cases"] = named
    path = write_spec(document)
    with pytest.raises(SpecError, match=r"design\.cases.*does not exist.*drafting the spec writes"):
        load_spec(path)  # every other command says what is missing and what writes it
    counting_client.reset()
    written = draft(path, store=tmp_path / "store", client=counting_client)
    assert written == [tmp_path / named]
    # The very cases a spec without design.cases drafts (same keys, same store: nothing asked again).
    assert yaml.safe_load(written[0].read_text()) == yaml.safe_load(plain[0].read_text())
    assert counting_client.total == 0
    assert "already names this file" in written[0].read_text()
    spec = load_spec(path)
    assert spec.cases is not None and len(spec.cases) == 4
    result = run(spec, store=tmp_path / "store", client=counting_client, out=tmp_path / "run", progress=False)
    assert counting_client.calls["sim/generator"] == 0
    assert set(result.verdicts.case_id) == {c["id"] for c in yaml.safe_load(written[0].read_text())["cases"]}


def test_a_named_file_that_exists_is_refused_before_the_generator_is_asked(write_spec, tmp_path, counting_client):
    document = tiny_spec_document()
    document["design"]["cases"] = "spec.cases.yaml"  # the name a first draft beside the spec.yaml gets
    path = write_spec(document)
    draft(path, store=tmp_path / "store", client=counting_client)
    edited = (tmp_path / "spec.cases.yaml").read_text() + "# my edits\n"
    (tmp_path / "spec.cases.yaml").write_text(edited)
    document["design"]["cases_per_cell"] = 3  # new cases to draft: a refusal after drafting would have paid for them
    write_spec(document)
    counting_client.reset()
    with pytest.raises(SpecError, match=r"spec\.cases\.yaml: already exists.*force=True"):
        draft(path, store=tmp_path / "store", client=counting_client)
    assert counting_client.total == 0 and (tmp_path / "spec.cases.yaml").read_text() == edited
    written = draft(path, store=tmp_path / "store", client=counting_client, force=True)
    assert written == [tmp_path / "spec.cases.yaml"] and len(yaml.safe_load(written[0].read_text())["cases"]) == 6


def test_a_named_file_already_written_is_never_replaced_by_a_new_draft(write_spec, tmp_path, counting_client):
    document = tiny_spec_document()
    document["design"]["cases"] = "reviewed.cases.yaml"
    path = write_spec(document)
    draft(path, store=tmp_path / "store", client=counting_client)
    reviewed = (tmp_path / "reviewed.cases.yaml").read_text() + "# reviewed\n"
    (tmp_path / "reviewed.cases.yaml").write_text(reviewed)
    written = draft(path, store=tmp_path / "store", client=counting_client)
    assert written == [tmp_path / "spec.cases.yaml"]  # a new draft goes beside the spec
    assert (tmp_path / "reviewed.cases.yaml").read_text() == reviewed


def test_a_named_cases_file_in_a_missing_folder_is_refused_before_any_call(write_spec, tmp_path, counting_client):
    document = tiny_spec_document()
    document["design"]["cases"] = "nowhere/cases.yaml"
    path = write_spec(document)
    with pytest.raises(SpecError, match=r"folder .*nowhere does not exist"):
        draft(path, store=tmp_path / "store", client=counting_client)
    assert counting_client.total == 0 and not (tmp_path / "nowhere").exists()


def test_draft_writes_the_rubric_file_the_spec_names(write_spec, tmp_path, counting_client):
    document = tiny_spec_document()
    document["rubric"] = "team.rubric.yaml"
    document["design"]["cases"] = "team.cases.yaml"
    path = write_spec(document)
    with pytest.warns(UserWarning, match="simulated generator"):
        written = draft(path, store=tmp_path / "store", client=counting_client)
    assert written == [tmp_path / "team.rubric.yaml"]  # the cases wait for the reviewed rubric
    assert not (tmp_path / "spec.rubric.yaml").exists()
    written = draft(path, store=tmp_path / "store", client=counting_client)
    assert written == [tmp_path / "team.cases.yaml"]
    spec = load_spec(path)
    assert spec.rubric.criteria and spec.cases


def test_the_command_line_says_where_it_wrote(write_spec, tmp_path):
    document = tiny_spec_document()
    document["design"]["cases"] = "named.cases.yaml"
    path = write_spec(document)
    run_cli(["validate", path]).refused("design.cases", "named.cases.yaml", "does not exist", "drafting")
    out = run_cli(["draft", path, "--store", tmp_path / "store"]).ok()
    assert f"wrote {tmp_path / 'named.cases.yaml'}" in out
    assert "ok:" in run_cli(["validate", path]).ok()
    assert f"wrote {tmp_path / 'spec.cases.yaml'}" in run_cli(["draft", path, "--store", tmp_path / "store"]).ok()
    run_cli(["draft", path, "--store", tmp_path / "store"]).refused("spec.cases.yaml", "already exists", "--force")
