"""Reading ASSERT run directories (shared/formats/assert.md) into checked records.

:func:`read_run` reads one run directory: its config.yaml, the taxonomy version it
was judged with (artifacts.json -> artifacts.systematize.path; never the suite root,
which may be newer), its test-set version and cases, inference_set.jsonl and
scores.jsonl, and its measurement choices. Malformed files raise
:class:`multiverse.errors.InputError` naming the file, the field and what was expected.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from multiverse.core import ImportBudget
from multiverse.errors import InputError, SpecError
from multiverse.importers._guard import import_budget, text_only
from multiverse.tables import folder_file

__all__ = ["SCHEMA_VERSIONS", "AssertRun", "model_name", "option_name", "read_run", "run_targets"]

#: The ``schema_version`` of artifacts.json and manifest.json this importer knows (ASSERT 0.2,
#: shared/formats/assert.md); a file without one is read as this version.
SCHEMA_VERSIONS = (1,)


@dataclass
class AssertRun:
    """One ASSERT run directory, read and checked."""

    path: Path
    name: str
    config: dict[str, Any]
    taxonomy: dict[str, bool]
    taxonomy_file: Path
    test_set: str
    cases: dict[tuple[str, str], dict[str, Any]] | None
    inference: dict[tuple[str, str, str], dict[str, Any]]
    scores: list[tuple[int, dict[str, Any]]]
    choices: dict[str, str] = field(default_factory=dict)
    targets: list[str] = field(default_factory=list)

    def permissible(self, name: str) -> bool | None:
        """``permissible`` of the taxonomy category called ``name`` (None if there is none)."""
        if name in self.taxonomy:
            return self.taxonomy[name]
        # Judges sometimes change case or spacing when they copy a category name.
        folded = {" ".join(key.split()).casefold(): value for key, value in self.taxonomy.items()}
        return folded.get(" ".join(name.split()).casefold())


def read_run(path: Path, warnings: list[str], budget: ImportBudget | None = None) -> AssertRun:
    """Read and check one ASSERT run directory within ``budget``; notes for the manifest go to ``warnings``."""
    budget = budget or import_budget()
    if not path.is_dir():
        raise InputError(f"{path}: expected an ASSERT run directory", param="run_dirs")
    suite = path.parent
    config = _read_yaml(path / "config.yaml", suite, budget)
    refs = _artifact_refs(path, budget)
    taxonomy_file = _artifact_file(path, suite, refs, "systematize", "taxonomy.json")
    if taxonomy_file is None:
        raise InputError(
            f"{path / 'artifacts.json'}: artifacts.systematize.path: expected the taxonomy version the run "
            "was judged with (the suite root may be newer)"
        )
    taxonomy = _read_taxonomy(taxonomy_file, suite, budget)

    test_ref = refs.get("test_set") or {}
    version = test_ref.get("version")
    input_hash = test_ref.get("input_hash")
    if version and input_hash:
        test_set = f"{version}@{str(input_hash)[:8]}"
    elif version:
        # Versions restart at v0001 in every suite: the suite name keeps them apart.
        test_set = f"{suite.name}/{version}"
    else:
        test_set = f"{suite.name}/unversioned"
        warnings.append(f"{path}: artifacts.json has no test_set version; cases are keyed by suite name only")
    cases = None
    test_file = _artifact_file(path, suite, refs, "test_set", "test_set.jsonl")
    if test_file is not None:
        cases = {}
        for line, row in _read_jsonl(test_file, suite, budget):
            key = (_field(test_file, line, row, "type"), _field(test_file, line, row, "test_case_id"))
            cases[key] = row
    elif test_ref:
        warnings.append(f"{path}: test set {test_set} not found; cases come from the run's own rows")

    inference: dict[tuple[str, str, str], dict[str, Any]] = {}
    inference_file = path / "inference_set.jsonl"
    if _present(inference_file):
        for line, row in _read_jsonl(inference_file, suite, budget):
            inference[(
                _field(inference_file, line, row, "type"),
                _field(inference_file, line, row, "test_case_id"),
                str(row.get("target") or ""),
            )] = row
    else:
        warnings.append(f"{path}: no inference_set.jsonl; rollout failures cannot be told apart")
    scores_file = path / "scores.jsonl"
    if not _present(scores_file):
        raise InputError(f"{scores_file}: file not found; expected the run's judged transcripts")
    scores = _read_jsonl(scores_file, suite, budget)
    for line, row in scores:
        _field(scores_file, line, row, "type")
        _field(scores_file, line, row, "test_case_id")
        _field(scores_file, line, row, "judge_status")

    name = f"{config.get('suite') or suite.name}/{config.get('run') or path.name}"
    run = AssertRun(path, name, config, taxonomy, taxonomy_file, test_set, cases, inference, scores)
    run.choices = _choices(run)
    return run


def _present(file: Path) -> bool:
    """Whether there is an entry at ``file`` (a link to nothing or a FIFO is there; the reader says what it is)."""
    return os.path.lexists(file)


def _read_yaml(file: Path, suite: Path, budget: ImportBudget) -> dict[str, Any]:
    if not _present(file):
        raise InputError(f"{file}: file not found; expected the run's config.yaml")
    from multiverse.spec import parse_yaml

    text = _text(file, suite, budget)
    try:
        # The project's one YAML reader: safe tags, aliases bounded and never recursive, depth guarded.
        loaded, _ = parse_yaml(text, file)
        loaded = text_only(loaded, text)
    except SpecError as exc:
        raise InputError(str(exc)) from None
    if not isinstance(loaded, dict):
        raise InputError(f"{file}: expected a YAML mapping")
    return loaded


def _text(file: Path, suite: Path, budget: ImportBudget) -> str:
    """A run file as text; invalid UTF-8 or an unreadable file is one line naming the file.

    Read through the folder's one reader, with the suite (the run's parent
    folder, which the run's artifact refs point into) as the boundary: a link
    or a ref that leads outside it, a FIFO, a device or a file past the cap
    is refused.
    """
    raw = read_suite_file(file, suite, budget)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"{file}: line {line}: expected UTF-8 text, found byte 0x{raw[exc.start]:02x}") from None


def read_suite_file(file: Path, suite: Path, budget: ImportBudget) -> bytes:
    """The bytes of a file of an ASSERT run, with its ``suite`` folder as the boundary (``multiverse.tables._folder``),
    taken from the import's ``budget``."""
    try:
        name: Path = file.relative_to(suite)
    except ValueError:  # an absolute ref: allowed when it resolves inside the suite
        name = file
    target = folder_file(suite, name)
    if target is None:
        raise InputError(f"{file}: file not found")
    return budget.read_file(target, lambda problem: InputError(f"{file}: {problem}"))


def _read_json(file: Path, suite: Path, budget: ImportBudget) -> Any:
    text = _text(file, suite, budget)
    try:
        return text_only(json.loads(text), text)
    except ValueError as exc:
        raise InputError(f"{file}: expected a JSON document ({' '.join(str(exc).split())[:120]})") from None
    except RecursionError:
        raise InputError(f"{file}: nesting too deep; expected a JSON document a few levels deep") from None


def _read_jsonl(file: Path, suite: Path, budget: ImportBudget) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, text in enumerate(_text(file, suite, budget).split("\n"), start=1):
        if not text.strip():
            continue
        try:
            row = text_only(json.loads(text), text)
        except ValueError:
            raise InputError(f"{file}: line {number}: expected a JSON object") from None
        except RecursionError:
            raise InputError(f"{file}: line {number}: nesting too deep; expected a JSON object a few levels deep") from None
        if not isinstance(row, dict):
            raise InputError(f"{file}: line {number}: expected a JSON object")
        rows.append((number, row))
        budget.take_rows(1, str(file))
    return rows


def _field(file: Path, line: int, row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value:
        raise InputError(f"{file}: line {line}: {name}: expected a non-empty string")
    return value


def _artifact_refs(path: Path, budget: ImportBudget) -> dict[str, dict[str, Any]]:
    """The run's artifact version refs: artifacts.json, else manifest.json's copy."""
    for name, key in (("artifacts.json", "artifacts"), ("manifest.json", "artifact_versions")):
        file = path / name
        if _present(file):
            document = _read_json(file, path.parent, budget)
            version = document.get("schema_version") if isinstance(document, dict) else None
            if version is not None and (isinstance(version, bool) or version not in SCHEMA_VERSIONS):
                raise InputError(f"{file}: schema_version: {version!r}; expected a version of ASSERT's run files this "
                                 f"import knows ({', '.join(map(str, SCHEMA_VERSIONS))})")
            refs = document.get(key) if isinstance(document, dict) else None
            if isinstance(refs, dict) and refs:
                return {stage: ref for stage, ref in refs.items() if isinstance(ref, dict)}
    return {}


def _artifact_file(run: Path, suite: Path, refs: dict[str, Any], stage: str, filename: str) -> Path | None:
    ref = refs.get(stage)
    if not ref:
        return None
    candidates = []
    if ref.get("path"):
        candidates.append(Path(ref["path"]))
    if ref.get("artifact_dir"):
        candidates.append(Path(ref["artifact_dir"]) / filename)
    for candidate in candidates:
        # Refs are relative to the suite directory (ASSERT writes POSIX suite-relative paths).
        for base in (suite, run):
            file = candidate if candidate.is_absolute() else base / candidate
            if file.is_file():
                return file
    if stage == "systematize":
        shown = ref.get("path") or ref.get("artifact_dir")
        raise InputError(f"{run / 'artifacts.json'}: artifacts.systematize.path: {shown} not found under {suite}")
    return None


def _read_taxonomy(file: Path, suite: Path, budget: ImportBudget) -> dict[str, bool]:
    document = _read_json(file, suite, budget)
    categories = document.get("behavior_categories") if isinstance(document, dict) else None
    if not isinstance(categories, list) or not categories:
        raise InputError(f"{file}: behavior_categories: expected a non-empty list of categories")
    taxonomy = {}
    for index, category in enumerate(categories):
        name = category.get("name") if isinstance(category, dict) else None
        if not isinstance(name, str) or not name:
            raise InputError(f"{file}: behavior_categories[{index}].name: expected a non-empty string")
        permissible = category.get("permissible")
        if not isinstance(permissible, bool):
            raise InputError(f"{file}: behavior_categories[{index}].permissible: expected true or false")
        taxonomy[name] = permissible
    return taxonomy


def _choices(run: AssertRun) -> dict[str, str]:
    """The run's measurement choices, as option names."""
    pipeline = run.config.get("pipeline") or {}
    judge = pipeline.get("judge") or {}
    inference = pipeline.get("inference") or {}
    default_model = model_name(run.config.get("default_model"))
    judge_model = judge.get("model")
    tester = inference.get("tester") or {}
    return {
        "judge": _row_value(run, "judge_model") or model_name(judge_model) or default_model or "default",
        "judge_temperature": _row_value(run, "judge_temperature")
        or option_name((judge_model or {}).get("temperature") if isinstance(judge_model, dict) else None),
        "judge_n": _row_value(run, "judge_n") or option_name(judge.get("n", 1)),
        "user": model_name(tester.get("model") if isinstance(tester, dict) else tester)
        or _row_value(run, "tester_model")
        or "none",
        "max_turns": option_name(inference.get("max_turns")),
    }


def model_name(model: Any) -> str | None:
    """The model string of a config model entry ({name: ...} or a plain string)."""
    if isinstance(model, dict):
        model = model.get("name")
    return str(model) if model not in (None, "") else None


def option_name(value: Any) -> str:
    """A measurement choice as an option name (None -> "default"; 0.70 -> "0.7")."""
    if value is None or value == "":
        return "default"
    if isinstance(value, float):
        return format(value, "g")
    return str(value)


def _row_value(run: AssertRun, name: str) -> str | None:
    """A run-level choice recorded on every score row; several values are an error."""
    values = {option_name(row[name]) for _, row in run.scores if row.get(name) not in (None, "")}
    if len(values) > 1:
        raise InputError(
            f"{run.path / 'scores.jsonl'}: {name}: expected one value per run, found {', '.join(sorted(values))}"
        )
    return values.pop() if values else None


def run_targets(run: AssertRun) -> list[str]:
    """The systems a run's score rows and transcripts name, else its config's target."""
    targets = [str(row.get("target") or "") for _, row in run.scores]
    targets += [key[2] for key in run.inference]
    named = [t for t in dict.fromkeys(targets) if t]
    return named or [_config_target(run)]


def _config_target(run: AssertRun) -> str:
    target = ((run.config.get("pipeline") or {}).get("inference") or {}).get("target")
    if isinstance(target, dict):
        name = model_name(target.get("model")) or target.get("callable") or target.get("name")
    else:
        name = target
    if not name:
        raise InputError(
            f"{run.path / 'config.yaml'}: pipeline.inference.target: expected the system's name "
            "(no score row names a target)"
        )
    return str(name)
