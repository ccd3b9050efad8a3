"""Report captions render the way Snakemake renders them (Jinja2, then docutils rst)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest
import yaml
from docutils.core import publish_parts

from fedrepro.experiments.plan import build_plan
from fedrepro.report.tables import report_caption

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "report"
CELLS = report_caption("table", {"rows": "algorithm", "columns": "partition"})


def render(name: str, scale: str, with_params: bool = True, cells: str = CELLS) -> str:
    """Caption → html body, with Snakemake's Jinja settings; rst problems raise."""
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    params = {"title": "Table I: cross-silo", "caption": "Accuracy with #M=1 skew.", "cells": cells}
    snakemake = SimpleNamespace(
        config={"scale": scale, "papers": ["adapters", "fedins"]},
        params=SimpleNamespace(**(params if with_params else {})),
    )
    text = env.from_string((REPORT / name).read_text()).render(snakemake=snakemake)
    settings = {"report_level": 2, "halt_level": 2}  # any rst warning is an error
    return publish_parts(text, writer="html", settings_overrides=settings)["html_body"]


@pytest.mark.parametrize("name", ["table.rst", "figure.rst", "claims.rst"])
def test_item_captions_say_scale_title_and_caption(name: str) -> None:
    mini = render(name, "mini")
    assert "Table I: cross-silo" in mini and "Accuracy with #M=1 skew." in mini
    assert "<strong>mini</strong> scale" in mini and 'class="admonition warning"' in mini
    paper = render(name, "paper")
    assert "<strong>paper</strong> scale" in paper and "admonition warning" not in paper


@pytest.mark.parametrize("name", ["table.rst", "figure.rst", "claims.rst"])
def test_captions_render_without_params(name: str) -> None:
    html = render(name, "mini", with_params=False)
    assert "made at <strong>mini</strong> scale" in html and "Table I" not in html


def test_table_caption_explains_brackets_and_not_the_papers_numbers() -> None:
    html = render("table.rst", "mini")
    assert "[paper" in html and "<strong>not</strong> the paper's numbers" in html


def test_workflow_overview_uses_config() -> None:
    html = render("workflow.rst", "mini")
    assert "<strong>mini</strong> scale" in html and "adapters, fedins" in html
    assert "admonition warning" in html
    assert "admonition warning" not in render("workflow.rst", "paper")


def test_each_tables_report_caption_says_its_own_spread_and_explains_its_marks() -> None:
    """FedICON's tables print mean ± standard error (``spread: se``, as the paper prints
    "mean (standard error)"); the report's caption said sample standard deviation for every
    table and left ‡ unexplained. Each table item's caption now says its own ± and every mark;
    payload and parameter tables (structural counts) have none."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    plan = build_plan({**config, "papers": ["fedicon", "adapters", "fedhpl"]}, REPO)
    seen = set()
    for key, item in plan.items.items():
        if item["kind"] == "figure":
            continue
        html = render("table.rst", "mini", cells=report_caption(item["kind"], item["spec"]))
        if item["kind"] != "table":
            assert "no ±" in html and "standard" not in html, key
            continue
        se = item["spec"].get("spread") == "se"
        spread = "standard error (sample" if se else "sample standard deviation (ddof=1)"
        assert f"mean ± {spread}" in html, key
        assert "‡ not every run" in html and "† at least one seed diverged" in html, key
        seen.add((item["paper"], se))
    assert {("fedicon", True), ("adapters", False), ("fedhpl", False)} <= seen
