"""A corpus of malformed configurations: each stops Snakemake with one line naming the key,
before any job starts (tests/faults/bad_configs.yaml)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.workflow_helpers import copy_workflow, snakemake

CASES = yaml.safe_load((Path(__file__).parents[1] / "faults" / "bad_configs.yaml").read_text())
FILES = {"config": "config/config.yaml"} | {
    p: f"config/experiments/{p}.yaml" for p in ("adapters", "fedins")
}


def edited(text: str, case: dict) -> str:
    doc = yaml.safe_load(text)
    node = doc
    for key in case["at"][:-1]:
        node = node.setdefault(key, {})
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
        text = (Path(__file__).parents[2] / FILES[case["file"]]).read_text()
        assert yaml.safe_load(edited(text, case)) != yaml.safe_load(text), case


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['file']}:{'.'.join(map(str, c['at']))}")
def test_malformed_config_stops_with_one_line_naming_the_key(workflow: Path, case: dict):
    path = workflow / FILES[case["file"]]
    original = path.read_text()
    path.write_text(edited(original, case))
    try:
        res = snakemake("--cores", "1", cwd=workflow)
    finally:
        path.write_text(original)
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if "fedrepro config error" in ln]
    assert len(lines) == 1, res.stderr[-2000:]
    assert case["key"] in lines[0], lines[0]
    assert "Traceback" not in res.stderr
    assert not (workflow / "results").exists(), "a job started"
