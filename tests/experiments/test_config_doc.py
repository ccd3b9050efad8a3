"""config/README.md describes every key of the config schema, as the schema and the embedded
default give it now (fedrepro.experiments.config_doc)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import yaml

from fedrepro.experiments.config import SCHEMA_DIR, load_yaml
from fedrepro.experiments.config_doc import COMMAND, config_reference, render

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "config" / "README.md"


def _schema() -> dict:
    return yaml.safe_load((SCHEMA_DIR / "config.yaml").read_text())


def _keys(node, path=()):
    """(path, schema) of every named key anywhere in ``node``, in blocks ($defs) too."""
    if isinstance(node, dict):
        for key, child in node.items():
            if key == "properties":
                for name, sub in child.items():
                    yield (*path, name), sub
                    yield from _keys(sub, (*path, name))
            else:
                yield from _keys(child, path)
    elif isinstance(node, list):
        for child in node:
            yield from _keys(child, path)


def test_page_is_up_to_date():
    assert PAGE.read_text() == render(REPO), (
        f"config/README.md is out of date with the config schema: regenerate it with `{COMMAND}`"
    )


def test_every_key_has_a_description():
    """A key the schema adds without saying what it does fails here (the page is the
    descriptions)."""
    bare = [".".join(path) for path, node in _keys(_schema()) if not node.get("description")]
    assert bare == []


def test_every_key_is_on_the_page():
    page = PAGE.read_text()
    missing = [
        ".".join(path)
        for path, _ in _keys(_schema())
        if not re.search(rf"`([^`]*\.)?{re.escape(path[-1])}`", page)
    ]
    assert missing == []


def test_a_changed_schema_changes_the_page():
    """The freshness check can fail: a description edited in the schema (or a value in the
    embedded default) gives another page than the one committed."""
    schema, values = _schema(), load_yaml(REPO / "config" / "config.yaml")
    page = config_reference(schema, values)
    edited = copy.deepcopy(schema)
    edited["properties"]["threads"]["description"] = "torch threads per job, said otherwise"
    assert "Torch threads per job, said otherwise." in config_reference(edited, values)
    assert config_reference(edited, values) != page
    values["threads"] = 7
    assert "**Default:** `1`" in page
    assert "**Default:** `7`" in config_reference(schema, values)


def test_page_shows_types_defaults_and_blocks():
    page = PAGE.read_text()
    assert "## `bench`" in page and "## Block `scale`" in page
    assert "| `bench.threads` | integer ≥ 1 | `2` |" in page  # the embedded default's value
    assert "| `smoke.data` | [`data` block](#block-data); required | — |" in page
