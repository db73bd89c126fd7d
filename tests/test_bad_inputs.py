"""Malformed inputs: every one exits 2 with one line per problem, no traceback, nothing written.

Each file in tests/bad_inputs/ is a small edit of tests/bad_inputs/support/good.yaml
(checked to be valid below). The table maps a file to the stderr lines it must
produce: one entry per problem, each a fragment (or fragments) that must appear in
one ``error: `` line, naming the file, the YAML path where there is one, and what
was expected. The CLI runs in an empty working directory: in its own process where a
hostile file must be stopped by a timeout, in this one otherwise.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cli_runner import CliResult, run_cli, spawn_cli

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "bad_inputs"
TABLES = CORPUS / "tables"


def snapshot(directory: Path) -> dict[str, int]:
    return {str(p.relative_to(directory)): p.stat().st_size for p in sorted(directory.rglob("*"))}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """An empty working directory for the CLI; it must still be empty afterwards."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    return cwd


@pytest.fixture
def corpus_unchanged():
    before = snapshot(CORPUS)
    yield
    assert_unchanged(before)


def assert_unchanged(before: dict[str, int]) -> None:
    after = snapshot(CORPUS)
    # The snapshot lists hidden folders too: a store created beside a spec shows
    # up here, while one a user left there earlier does not fail the suite.
    assert after == before, f"the CLI wrote beside the spec: {sorted(set(after) ^ set(before))}"


@dataclass(frozen=True)
class Bad:
    file: str
    #: one entry per expected stderr line; an entry is a fragment or a tuple of fragments
    lines: tuple = ()
    #: fragments no line may contain (a misleading message)
    forbid: tuple = ()
    #: seconds a command may take as a process of its own (generous: four run side by side on a loaded machine)
    timeout: float = 300
    #: the file the message must name (a referenced rubric/cases file), default ``file``
    names: str | None = None

    def __post_init__(self):
        assert self.lines, self.file

    @property
    def expected(self) -> list[tuple[str, ...]]:
        return [(entry,) if isinstance(entry, str) else tuple(entry) for entry in self.lines]


def B(file: str, *lines, **kw) -> Bad:
    return Bad(file, tuple(lines), **kw)


MODEL = "expected a litellm model string 'provider/model'"

CASES = [
    # -- YAML and file level
    B("yaml_syntax_unclosed.yaml", "yaml_syntax_unclosed.yaml: (line 8, column 5): invalid YAML: expected ',' or '}'"),
    B("yaml_syntax_indent.yaml", "yaml_syntax_indent.yaml: (line 9, column 13): invalid YAML: mapping values are not allowed here"),
    B("yaml_python_object_apply.yaml",
      ("yaml_python_object_apply.yaml: ", "line 7", "python/object/apply:os.system is not allowed", "plain YAML")),
    B("yaml_python_name.yaml", ("yaml_python_name.yaml: ", "line 7", "python/name:os.system is not allowed")),
    # A repeated key silently overrides the first one: the spec says something else than it reads.
    B("yaml_duplicate_key.yaml", ("yaml_duplicate_key.yaml: ", "judge", "line 8", "duplicate")),
    B("yaml_unhashable_key.yaml", ("yaml_unhashable_key.yaml: ", "line 7", "key"), forbid=("tag",)),
    B("yaml_deep_nesting.yaml", "yaml_deep_nesting.yaml: "),
    # Ten levels of ten aliases (the "billion laughs"): must be refused, not expanded.
    # Expanding its 10**10 leaves would take hours; refusing it takes the CLI's start-up (0.6 s here), and the
    # margin is for a loaded CI machine running this beside three other commands. A timeout below the others'
    # also runs it as a process of its own, which can be killed.
    B("yaml_alias_bomb.yaml", "yaml_alias_bomb.yaml: ", timeout=120),
    B("empty.yaml", "empty.yaml: file is empty; expected a YAML mapping"),
    B("comments_only.yaml", "comments_only.yaml: file is empty; expected a YAML mapping"),
    B("top_level_list.yaml", "top_level_list.yaml: expected a YAML mapping at the top level"),
    B("top_level_scalar.yaml", "top_level_scalar.yaml: expected a YAML mapping at the top level"),
    B("non_utf8.yaml", "non_utf8.yaml: expected UTF-8 text, found byte 0xe9 at offset 29"),
    # -- unknown keys
    B("unknown_key_top.yaml", "unknown_key_top.yaml: judges (line 7): unknown key; expected one of: axes, batch, concept, design"),
    B("unknown_key_nested.yaml",
      "unknown_key_nested.yaml: judge.temprature (line 9): unknown key; expected one of: api_base, api_key_env, evidence_standard, model, order, params, samples, scale"),
    B("unknown_key_system.yaml", "unknown_key_system.yaml: systems.0.temperature (line 7): unknown key; expected one of: "),
    # A key pasted into the spec: refused, and never echoed back.
    B("unknown_key_api_key.yaml", "unknown_key_api_key.yaml: systems.0.api_key (line 7): unknown key; expected one of: ",
      forbid=("DO-NOT-ECHO",)),
    B("api_key_env_is_a_key.yaml", ("api_key_env_is_a_key.yaml: systems.0.api_key_env (line 7): ", "environment variable"),
      forbid=("DO-NOT-ECHO",)),
    # -- wrong types
    B("wrong_type_int.yaml", "wrong_type_int.yaml: rollout.max_turns (line 7): expected an integer, got the string 'three'"),
    B("wrong_type_list.yaml", "wrong_type_list.yaml: systems (line 4): expected a list of mappings, got a mapping"),
    B("wrong_type_literal.yaml",
      "wrong_type_literal.yaml: rollout.setting (line 7): expected one of 'single_turn', 'multi_turn', got 'three_turn'"),
    B("wrong_type_bool.yaml",
      "wrong_type_bool.yaml: rubric.criteria.0.permissible (line 6): expected true or false, got the string 'maybe'"),
    B("wrong_type_mapping.yaml", "wrong_type_mapping.yaml: judge (line 7): expected a mapping, got the string 'sim/judge-a'"),
    # -- missing required keys
    B("missing_name.yaml", "missing_name.yaml: name: missing required key (a string)"),
    B("missing_systems.yaml", "missing_systems.yaml: systems: missing required key (a list of mappings)"),
    B("missing_system_model.yaml", "missing_system_model.yaml: systems.0.model (line 5): missing required key (a string)"),
    B("missing_criterion_definition.yaml",
      "missing_criterion_definition.yaml: rubric.criteria.0.definition (line 6): missing required key (a string)"),
    # -- axes, exclusions, primary, sample
    B("axis_empty.yaml", "axis_empty.yaml: axes.judge (line 8): expected at least one option"),
    B("axis_null.yaml", "axis_null.yaml: axes.judge (line 8): expected a mapping, got null"),
    B("axis_unknown_path.yaml",
      "axis_unknown_path.yaml: axes.turns.short.rollout.max_turn (line 9): patches a path that does not exist: 'max_turn' is not a field; expected one of: max_turns,"),
    B("axis_unknown_element.yaml",
      "axis_unknown_element.yaml: axes.temperature.cold.systems.cobalt.params.temperature (line 9): patches a path that does not exist: 'cobalt' is not an element; expected one of: atlas, beacon"),
    B("axis_below_scalar.yaml",
      "axis_below_scalar.yaml: axes.turns.short.rollout.max_turns.value (line 9): patches a path that does not exist: 'value' goes below an integer, which has no fields"),
    B("axis_wrong_value_type.yaml",
      ("axis_wrong_value_type.yaml: axes.turns.long (line 10): ", "rollout.max_turns: expected an integer, got the string 'many'")),
    B("axis_bad_model_value.yaml", ("axis_bad_model_value.yaml: axes.judge.judge_gpt (line 10): ", "judge.model: " + MODEL, "'gpt4'")),
    B("axis_patches_grid_field.yaml", "axis_patches_grid_field.yaml: axes.meta.renamed"),
    B("judge_missing_real_system.yaml", ("judge_missing_real_system.yaml: judge: names no judge model",
                                         "openai/gpt-4o-mini is not simulated", "expected judge: {model: ...}")),
    B("template_unknown_placeholder.yaml",
      ("template_unknown_placeholder.yaml: judge.template (line 9): unknown placeholder {transcirpt}",
       "expected only the placeholders {rubric}, {transcript}")),
    B("rubric_axis_missing_file.yaml", ("rubric_axis_missing_file.yaml: axes.rubric.theirs.rubric (line 11): ",
                                        "support/theirs.yaml does not exist")),
    B("exclude_all.yaml", "exclude_all.yaml: exclude (line 11): the exclusions remove all 2 universes; expected at least one to remain"),
    B("exclude_unknown_option.yaml",
      "exclude_unknown_option.yaml: exclude.0.judge (line 12): unknown option 'judge_c'; expected one of: judge_a, judge_b"),
    B("primary_excluded.yaml", "primary_excluded.yaml: primary (line 13): judge=judge_b is excluded; expected a universe of the grid"),
    B("primary_unknown_axis.yaml", "primary_unknown_axis.yaml: primary.judges (line 11): unknown axis; expected one of: judge"),
    B("primary_unknown_option.yaml",
      "primary_unknown_option.yaml: primary.judge (line 11): unknown option 'judge_c'; expected one of: judge_a, judge_b"),
    B("sample_zero.yaml", "sample_zero.yaml: sample.n (line 11): expected an integer >= 1, got 0"),
    # -- rubric and design
    B("behavior_unknown_criterion.yaml",
      "behavior_unknown_criterion.yaml: design.dimensions.0.levels.1 (line 10): unknown criterion 'hallucinate'; expected one of: disclose_uncertainty, fabricate_evidence, overstate_capability"),
    B("allocation_unknown_level.yaml",
      "allocation_unknown_level.yaml: design.allocation.0.cell.interaction_condition (line 13): unknown level 'outside_basis'; expected one of: material_reliance, overclaim_pressure"),
    B("allocation_unknown_dimension.yaml",
      "allocation_unknown_dimension.yaml: design.allocation.0.cell.pressure (line 9): unknown dimension; expected one of: behavior"),
    B("allocation_negative.yaml", "allocation_negative.yaml: design.allocation.0.cases (line 9): expected an integer >= 0"),
    B("dimension_no_levels.yaml",
      "dimension_no_levels.yaml: design.dimensions.1.levels (line 10): expected at least one level for dimension 'interaction_condition'"),
    B("duplicate_criterion_id.yaml", "duplicate_criterion_id.yaml: rubric.criteria (line 5): duplicate criterion id 'fabricate_evidence'"),
    B("rubric_no_criteria.yaml", "rubric_no_criteria.yaml: rubric.criteria (line 4): expected at least one criterion"),
    B("duplicate_system_name.yaml", "duplicate_system_name.yaml: systems (line 4): duplicate system name 'atlas'"),
    B("evidence_standard_unknown.yaml",
      "evidence_standard_unknown.yaml: judge.evidence_standard (line 7): expected one of the rubric's evidence levels (lenient, strict), got 'medium'"),
    B("evidence_level_missing.yaml",
      "evidence_level_missing.yaml: rubric.criteria.1.evidence (line 7): expected a text for every evidence level (lenient, strict)"),
    B("model_no_provider.yaml", f"model_no_provider.yaml: systems.0.model (line 5): {MODEL}"),
    B("model_with_spaces.yaml", (f"model_with_spaces.yaml: systems.0.model (line 5): {MODEL}", "got 'openai/gpt 4o'")),
    B("model_judge_trailing_slash.yaml", (f"model_judge_trailing_slash.yaml: judge.model (line 7): {MODEL}", "'openai/'")),
    # -- numbers out of range
    B("cases_per_cell_zero.yaml", "cases_per_cell_zero.yaml: design.cases_per_cell (line 7): expected an integer >= 1, got 0"),
    B("max_turns_negative.yaml", "max_turns_negative.yaml: rollout.max_turns (line 7): expected an integer >= 1, got -1"),
    B("judge_samples_zero.yaml", "judge_samples_zero.yaml: judge.samples (line 7): expected an integer >= 1, got 0"),
    B("replicates_zero.yaml", "replicates_zero.yaml: rollout.replicates (line 7): expected an integer >= 1, got 0"),
    B("ci_level_one.yaml", "ci_level_one.yaml: scoring.ci.level (line 8): expected a number between 0 and 1, got 1.0"),
    B("ci_level_negative.yaml", "ci_level_negative.yaml: scoring.ci.level (line 8): expected a number between 0 and 1, got -0.5"),
    B("ci_level_percent.yaml", "ci_level_percent.yaml: scoring.ci.level (line 8): expected a number between 0 and 1, got 95"),
    B("majority_one_sample.yaml", "majority_one_sample.yaml: scoring.rule (line 8): majority_of_samples needs judge.samples >= 2"),
    # A spec without a rubric (to be drafted) still gets its numbers checked.
    B("no_rubric_max_turns_zero.yaml", "no_rubric_max_turns_zero.yaml: rollout.max_turns (line 5): expected an integer >= 1, got 0"),
    # -- rate_limits: pacing per model prefix, positive integers, at least one
    B("rate_limits_zero.yaml", "rate_limits_zero.yaml: rate_limits.openai/.rpm (line 14): expected an integer > 0, got 0"),
    B("rate_limits_empty.yaml",
      "rate_limits_empty.yaml: rate_limits.anthropic/claude-haiku (line 14): expected at least one of rpm, tpm, max_concurrency"),
    B("rate_limits_unknown_key.yaml",
      "rate_limits_unknown_key.yaml: rate_limits.openai/.rpd (line 14): unknown key; expected one of: max_concurrency, rpm, tpm"),
    B("rate_limits_bad_prefix.yaml",
      ("rate_limits_bad_prefix.yaml: rate_limits.openai gpt (line 14): expected a model-string prefix", "without spaces")),
    B("rate_limits_string.yaml",
      "rate_limits_string.yaml: rate_limits.openai/gemma.max_concurrency (line 14): expected an integer, got the string 'four'"),
    B("rate_limits_not_a_mapping.yaml", "rate_limits_not_a_mapping.yaml: rate_limits (line 13): expected a mapping, got a list"),
    # -- the simulated world must exist before anything runs
    B("world_file_missing.yaml", ("world_file_missing.yaml: world (line 7): ", "no_such_world.yaml")),
    B("world_unknown_builtin.yaml", ("world_unknown_builtin.yaml: world (line 7): ", "deception")),
    # -- referenced rubric and cases files: the message names the referenced file
    B("rubric_file_malformed.yaml",
      "rubric_malformed.yaml: criteria.0.definiton (line 6): unknown key; expected one of: definition, evidence",
      "rubric_malformed.yaml: criteria.0.definition (line 3): missing required key (a string)",
      names="rubric_malformed.yaml"),
    B("rubric_file_missing.yaml", ("rubric_file_missing.yaml: rubric (line 3): the rubric file ",
                                   "no_such_rubric.yaml does not exist"), names="no_such_rubric.yaml"),
    B("rubric_file_python_tag.yaml", ("rubric_python_tag.yaml: ", "line 1", "python/object/apply:os.system is not allowed"),
      names="rubric_python_tag.yaml"),
    B("cases_unknown_level.yaml",
      "cases_unknown_level.yaml: cases.1.cell.behavior (line 6): unknown level 'time_travel'; expected one of: fabricate_evidence, overstate_capability",
      names="support/cases_unknown_level.yaml"),
    B("cases_duplicate_ids.yaml", "cases_duplicate_ids.yaml: cases.1.id (line 5): duplicate case id 'c1'",
      names="support/cases_duplicate_ids.yaml"),
    B("cases_missing_brief_and_prompt.yaml", "cases_missing_brief_and_prompt.yaml: cases.0 (line 2): expected a brief or a prompt",
      names="support/cases_missing_brief_and_prompt.yaml"),
    B("cases_file_missing.yaml", ("cases_file_missing.yaml: design.cases (line ", "no_such_cases.yaml does not exist",
                                  "drafting the spec writes"), names="support/no_such_cases.yaml"),
    # -- several problems: one line each
    B("three_problems.yaml",
      f"three_problems.yaml: systems.0.model (line 5): {MODEL}",
      "three_problems.yaml: rollout.max_turns (line 6): expected an integer >= 1, got 0",
      "three_problems.yaml: judge.evidence_standard (line 7): expected one of the rubric's evidence levels (lenient, strict), got 'medium'"),
]


def check_bad_exit(done: subprocess.CompletedProcess | CliResult, case: Bad, cwd: Path) -> None:
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-2000:]
    assert done.returncode == 2, f"exit {done.returncode}; stdout={done.stdout[-500:]!r} stderr={done.stderr[-500:]!r}"
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == len(case.expected), f"expected {len(case.expected)} line(s), got:\n{done.stderr}"
    for line in lines:
        assert line.startswith("error: "), line
        assert Path(case.names or case.file).name in line, line
        for fragment in case.forbid:
            assert fragment not in line, f"misleading message: {line}"
    unmatched = list(lines)
    for fragments in case.expected:
        match = next((line for line in unmatched if all(f in line for f in fragments)), None)
        assert match is not None, f"no line contains {fragments}; got:\n{done.stderr}"
        unmatched.remove(match)
    assert list(cwd.iterdir()) == [], "the CLI wrote into the working directory"


def test_the_corpus_is_big_enough_and_every_file_is_in_the_table():
    specs = {p.name for p in CORPUS.glob("*.yaml")}
    assert len(CASES) >= 30
    assert {c.file for c in CASES} == specs
    assert len({c.file for c in CASES}) == len(CASES)


def test_the_spec_the_bad_inputs_edit_is_valid(workdir, corpus_unchanged):
    done = run_cli(["validate", CORPUS / "support" / "good.yaml"], cwd=workdir)
    assert done.returncode == 0, done.stderr
    assert "ok: 2 universes" in done.stdout


RUN_CASES = ["unknown_key_top.yaml", "yaml_python_object_apply.yaml", "exclude_all.yaml", "cases_unknown_level.yaml",
             "three_problems.yaml"]
OTHER_COMMANDS = [("run", file) for file in RUN_CASES] + [
    ("plan", "unknown_key_top.yaml"), ("expand", "yaml_python_object_apply.yaml"), ("draft", "three_problems.yaml"),
]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every bad-input command, each in its own empty directory.

    Returns ``{(command, file): (CompletedProcess | CliResult | None on timeout, cwd)}``;
    the corpus is checked to be unchanged once all of them have finished. A hostile
    file (a timeout of its own) and every command but ``validate`` run as processes of
    their own, side by side, and one that hangs is killed; the other validations run in
    this process meanwhile (a process each cost a second of start-up, 80 s in all).
    """
    jobs = [("validate", c.file) for c in CASES] + OTHER_COMMANDS
    timeouts = {c.file: c.timeout for c in CASES}
    spawned = [job for job in jobs if job[0] != "validate" or timeouts[job[1]] < Bad.timeout]
    before = snapshot(CORPUS)

    def place(command, file):
        return tmp_path_factory.mktemp(f"{command}-{Path(file).stem}")

    def one(job):
        command, file = job
        cwd = place(command, file)
        extra = ["--out", "out"] if command == "run" else []
        try:
            return job, (spawn_cli([command, CORPUS / file, *extra], cwd=cwd, timeout=timeouts[file]), cwd)
        except subprocess.TimeoutExpired:
            return job, (None, cwd)

    with ThreadPoolExecutor(max_workers=4) as pool:
        running = pool.map(one, spawned)
        out = {}
        for command, file in (job for job in jobs if job not in spawned):
            cwd = place(command, file)
            out[(command, file)] = (run_cli([command, CORPUS / file], cwd=cwd), cwd)
        out.update(running)
    assert_unchanged(before)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.file for c in CASES])
@pytest.mark.slow
def test_validate_rejects(case: Bad, results):
    done, cwd = results[("validate", case.file)]
    if done is None:
        pytest.fail(f"validate {case.file} did not finish within {case.timeout} s")
    check_bad_exit(done, case, cwd)


@pytest.mark.parametrize("command, file", OTHER_COMMANDS, ids=[f"{c}-{f}" for c, f in OTHER_COMMANDS])
def test_other_commands_reject_a_bad_spec_without_writing(command, file, results):
    case = next(c for c in CASES if c.file == file)
    done, cwd = results[(command, file)]
    assert done is not None, f"{command} {file} timed out"
    check_bad_exit(done, case, cwd)


@pytest.fixture
def huge_inputs(tmp_path: Path) -> Path:
    """A 50 MB spec and a spec whose rubric file is 50 MB (generated, never committed)."""
    directory = tmp_path / "inputs"
    directory.mkdir()
    good = (CORPUS / "support" / "good.yaml").read_text(encoding="utf-8")
    block = ("# padding " + "x" * 89 + "\n") * 10_000  # 1 MB
    with open(directory / "huge.yaml", "w", encoding="utf-8") as f:
        f.write(good)
        for _ in range(50):
            f.write(block)
    (directory / "huge_rubric_spec.yaml").write_text(good.replace("rubric.yaml", "huge_rubric.yaml"), encoding="utf-8")
    with open(directory / "huge_rubric.yaml", "w", encoding="utf-8") as f:
        f.write((CORPUS / "support" / "rubric.yaml").read_text(encoding="utf-8"))
        for _ in range(50):
            f.write(block)
    return directory


@pytest.mark.parametrize(
    "spec, names",
    [("huge.yaml", "huge.yaml"), ("huge_rubric_spec.yaml", "huge_rubric.yaml")],
)
def test_validate_rejects_a_50_mb_file(huge_inputs, workdir, spec, names):
    assert (huge_inputs / names).stat().st_size > 50 * 10**6
    before = snapshot(huge_inputs)
    done = run_cli(["validate", huge_inputs / spec], cwd=workdir)
    check_bad_exit(done, Bad(spec, ((f"{names}: file is 5", "MB; expected a YAML file under 5 MB"),), names=names), workdir)
    assert snapshot(huge_inputs) == before


def test_run_without_a_rubric_exits_2_and_writes_nothing(workdir, corpus_unchanged):
    done = run_cli(["run", CORPUS / "support" / "no_rubric.yaml", "--out", "out"], cwd=workdir)
    check_bad_exit(done, Bad("no_rubric.yaml", (("no_rubric.yaml: rubric: ", "expected criteria"),)), workdir)


# -- label tables for `multiverse import table` --------------------------------------------

TABLE_ARGS = ["--system", "model", "--item", "item_id", "--label", "label", "--axis", "judge"]


@dataclass(frozen=True)
class BadTable:
    file: str
    args: tuple = ()
    fragments: tuple = ()
    api: dict = field(default_factory=dict)


TABLE_CASES = [
    BadTable("missing_columns.csv", (), ("missing_columns.csv: label: ", "not found")),
    BadTable("label_not_binary.csv", (), ("label_not_binary.csv: label: ", "binary", "positive")),
    BadTable("positive_not_a_label.csv", ("--positive", "passed"), ("positive_not_a_label.csv: label: ", "'passed'"),
             {"positive": "passed"}),
    BadTable("duplicate_rows.csv", (), ("duplicate_rows.csv: ", "duplicate", "judge_a", "q1")),
    BadTable("header_only.csv", (), ("header_only.csv: ", "empty")),
    BadTable("empty_system.csv", (), ("empty_system.csv: model: ", "row 2")),
]


def test_every_table_is_in_the_table():
    assert {c.file for c in TABLE_CASES} == {p.name for p in TABLES.iterdir()}


@pytest.mark.parametrize("case", TABLE_CASES, ids=[c.file for c in TABLE_CASES])
def test_import_table_rejects(case: BadTable, workdir, corpus_unchanged):
    done = run_cli(["import", "table", TABLES / case.file, *TABLE_ARGS, *case.args, "--out", "out"], cwd=workdir)
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    for fragment in case.fragments:
        assert fragment in lines[0], lines[0]
    assert list(workdir.iterdir()) == []


@pytest.mark.parametrize("case", TABLE_CASES, ids=[c.file for c in TABLE_CASES])
def test_import_table_api_rejects(case: BadTable, tmp_path):
    # The importer exists before its CLI wiring: check the corpus against it now.
    from multiverse.errors import InputError
    from multiverse.importers import import_table

    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        import_table(TABLES / case.file, system="model", item="item_id", label="label", axes=["judge"],
                     out_dir=out, **case.api)
    message = str(info.value)
    assert "\n" not in message
    for fragment in case.fragments:
        assert fragment in message, message
    assert not out.exists()
