"""A corpus of malformed configurations, experiment files and transcriptions: each stops
Snakemake with one line naming the key (or the file and line), before any job starts
(tests/faults/bad_configs.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.workflow_helpers import copy_workflow, snakemake

CASES = yaml.safe_load((Path(__file__).parents[1] / "faults" / "bad_configs.yaml").read_text())
PAPERS = ("adapters", "baselines", "fedhpl", "fedicon", "fedins", "fedpce")
FILES = {"config": "config/config.yaml"} | {p: f"config/experiments/{p}.yaml" for p in PAPERS}


def path_of(case: dict) -> str:
    """The file a case edits: a key of FILES, or a transcription (``reported/<name>.csv``)."""
    return FILES.get(case["file"], f"config/{case['file']}")


def edited(text: str, case: dict) -> str:
    if "line" in case:  # a transcription: ``old`` replaced by ``new`` on line ``line``
        lines = text.split("\n")
        assert case["old"] in lines[case["line"] - 1], case
        lines[case["line"] - 1] = lines[case["line"] - 1].replace(case["old"], case["new"], 1)
        return "\n".join(lines)
    doc = yaml.safe_load(text)
    node = doc
    for key in case["at"][:-1]:  # a list's item by its index (claims[0])
        node = node[key] if isinstance(node, list) else node.setdefault(key, {})
    if case.get("delete"):
        del node[case["at"][-1]]
    else:
        node[case["at"][-1]] = case["value"]
    return yaml.safe_dump(doc, sort_keys=False)


@pytest.fixture(scope="module")
def workflow(tmp_path_factory) -> Path:
    return copy_workflow(tmp_path_factory.mktemp("wf"))


def test_corpus_is_large_and_each_case_changes_its_file():
    assert len(CASES) >= 30
    for case in CASES:
        text = (Path(__file__).parents[2] / path_of(case)).read_text()
        assert edited(text, case) != text, case
        if "line" not in case:
            assert yaml.safe_load(edited(text, case)) != yaml.safe_load(text), case


def case_id(case: dict) -> str:
    return f"{case['file']}:{case['line'] if 'line' in case else '.'.join(map(str, case['at']))}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_malformed_config_stops_with_one_line_naming_the_key(workflow: Path, case: dict):
    path = workflow / path_of(case)
    original = path.read_text()
    path.write_text(edited(original, case))
    # a case in one paper's files plans that paper alone (the others' plans cannot see it)
    paper = case.get("paper", case["file"] if case["file"] in PAPERS else None)
    only = ["--config", f"papers=[{paper!r}]"] if paper else []
    try:
        res = snakemake("-n", *only, cwd=workflow)  # a case that does not stop runs nothing
    finally:
        path.write_text(original)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if "fedrepro config error" in ln]
    assert len(lines) == 1, res.stderr[-2000:]
    assert case["key"] in lines[0], lines[0]
    assert "Traceback" not in res.stderr
    assert not (workflow / "results").exists(), "a job started"
