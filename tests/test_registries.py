"""One registry per kind of extension: each schema enum lists exactly its registry's keys, so
a new algorithm, tuning, scheme, dataset, item kind or adapt method is added in one place
(and this test names the enum that still lacks it)."""

from __future__ import annotations

import pytest

from fedrepro.algorithms import ALGORITHMS
from fedrepro.data.partitions.make import SCHEMES
from fedrepro.data.sources.registry import DATASETS
from fedrepro.experiments.config import SCHEMA_DIR, _validator, load_yaml
from fedrepro.experiments.items import ITEM_KINDS
from fedrepro.models.tuning import TUNINGS
from fedrepro.tta import ADAPT_METHODS

RUN = load_yaml(SCHEMA_DIR / "run.yaml")["properties"]
CONFIG = load_yaml(SCHEMA_DIR / "config.yaml")["$defs"]


@pytest.mark.parametrize(
    ("enum", "registry"),
    [
        (RUN["algorithm"]["else"]["properties"]["name"]["enum"], ALGORITHMS),
        (RUN["model"]["properties"]["tuning"]["enum"], TUNINGS),
        (CONFIG["workload"]["properties"]["tuning"]["enum"], TUNINGS),
        (RUN["partition"]["properties"]["scheme"]["enum"], SCHEMES),
        (RUN["dataset"]["enum"], DATASETS),
        (load_yaml(SCHEMA_DIR / "adapt.yaml")["properties"]["method"]["enum"], ADAPT_METHODS),
    ],
    ids=["algorithms", "tunings", "bench-tunings", "schemes", "datasets", "adapt"],
)
def test_schema_enum_is_its_registry(enum, registry):
    assert sorted(enum) == sorted(registry)


def test_item_kinds_fill_the_experiment_schema():
    item = _validator("experiment").schema["properties"]["items"]["additionalProperties"]
    assert item["properties"]["kind"]["enum"] == list(ITEM_KINDS)
