"""CITATION.cff is valid Citation File Format 1.2.0 and cites this version of the workflow.

The schema is the one check-jsonschema ships (its builtin `vendor.citation-file-format`, a
dev dependency; cffconvert, which also ships it, needs jsonschema < 4 and cannot be locked
beside Snakemake's jsonschema 4)."""

from __future__ import annotations

import datetime
import tomllib
from pathlib import Path

import jsonschema
import yaml
from check_jsonschema.builtin_schemas import get_builtin_schema

REPO = Path(__file__).resolve().parents[1]
CITATION = REPO / "CITATION.cff"


def _cff_schema() -> dict:
    schema = get_builtin_schema("vendor.citation-file-format")
    assert schema["$id"].endswith("/1.2.0/schema.json"), schema["$id"]
    return schema


def _as_strings(value):
    """YAML dates as the ISO strings the schema expects (the CFF guide asks validators to
    cast them; a quoted date in the file is a string already)."""
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_strings(v) for v in value]
    return value


def cff_errors(path: Path) -> list[str]:
    """Every way the file breaks the CFF 1.2.0 schema, one line each (none: valid)."""
    doc = _as_strings(yaml.safe_load(path.read_text()))
    validator = jsonschema.Draft7Validator(
        _cff_schema(), format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
    )
    return [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator.iter_errors(doc)
    ]


def test_citation_is_valid_cff():
    assert cff_errors(CITATION) == []


def test_an_invalid_citation_is_refused(tmp_path):
    """The check can fail: without its authors, with a date that is no date and a reference
    of an unknown type, a copy of the file is refused for each."""
    doc = yaml.safe_load(CITATION.read_text())
    del doc["authors"]
    doc["date-released"] = "2026-12-32"
    doc["references"][0]["type"] = "paper"
    broken = tmp_path / "CITATION.cff"
    broken.write_text(yaml.safe_dump(doc))
    errors = "\n".join(cff_errors(broken))
    assert "'authors' is a required property" in errors
    assert "date-released: '2026-12-32' is not a 'date'" in errors
    assert "references.0.type: 'paper' is not one of" in errors


def test_citation_cites_this_version_and_the_five_papers():
    """The version and licence are pyproject's; one reference per paper the workflow
    reproduces (the config's papers but `baselines`, which is none)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    doc = yaml.safe_load(CITATION.read_text())
    assert (doc["version"], doc["license"]) == (project["version"], project["license"])
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    papers = [p for p in config["papers"] if p != "baselines"]
    titles = [ref["title"] for ref in doc["references"]]
    assert len(titles) == len(set(titles)) == len(papers) == 5
