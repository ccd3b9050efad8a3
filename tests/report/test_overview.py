"""The report's first page (fedrepro.report.overview): counts per paper from the item csvs, the
claims and the papers' own list of tables and figures; the scatter's cells; and the committed
list (config/reported/contents.csv) against the experiment files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fedrepro.experiments.plan import paper_plan
from fedrepro.report.overview import check_contents, make_overview, plot_scatter, read_contents

REPO = Path(__file__).resolve().parents[2]
CONTENTS = REPO / "config" / "reported" / "contents.csv"


def _table(path: Path, rows: list[tuple]) -> str:
    frame = pd.DataFrame(rows, columns=["column", "kind", "mean", "paper_value"])
    frame.to_csv(path, index=False)
    return str(path)


@pytest.fixture
def inputs(tmp_path: Path) -> dict:
    t1 = _table(tmp_path / "t1.csv", [
        ("a", "measured", 50.0, 60.0), ("b", "measured", 70.0, 71.0),
        ("c", "measured", 30.0, math.nan),  # no paper value: not a cell of the page
        ("d", "diff", 2.0, 4.0), ("e", "measured", math.nan, 10.0),  # not measured: left out
    ])  # fmt: skip
    t2 = _table(tmp_path / "t2.csv", [("x", "measured", 1e6, 2e6)])  # bytes: not accuracy
    params = tmp_path / "p.csv"
    pd.DataFrame({"com_cost_matches": [True, False, None], "aux_matches": [True, None, None]}
                 ).to_csv(params, index=False)  # fmt: skip
    claims = tmp_path / "claims.csv"
    pd.DataFrame({"claim": ["c1", "c2", "c3"], "holds_paper": [True, True, None],
                  "holds_ours": [False, True, None]}).to_csv(claims, index=False)  # fmt: skip
    contents = tmp_path / "contents.csv"
    contents.write_text(
        "paper,ref,kind,result,items,note\n"
        "p,Table 1,table,true,t1,\n"
        "p,Table 2,table,true,t2;params,\n"
        'p,Fig. 1,figure,true,,"in a supplement, not here"\n'
        "p,Fig. 2,figure,false,,a diagram\n"
    )
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"papers": {"p": {"gpu_hours": 12.5, "runs": 40}},
                                "total_gpu_hours": 12.5, "device": "GPU X",
                                "throughput": "assumed"}))  # fmt: skip
    spec = {"scale": "mini", "papers": {"p": {"title": "Paper P", "claims": str(claims), "items": {
        "t1": {"kind": "table", "metric": "final_acc", "csv": t1},
        "t2": {"kind": "table", "metric": "comm.total_bytes", "csv": t2},
        "params": {"kind": "parameters", "metric": None, "csv": str(params)},
        "f1": {"kind": "figure", "metric": "acc", "csv": None},
    }}}}  # fmt: skip
    return {"spec": spec, "contents": contents, "cost": cost, "out": tmp_path / "overview"}


def test_counts_per_paper(inputs: dict) -> None:
    make_overview(inputs["spec"], inputs["contents"], inputs["cost"], inputs["out"])
    row = pd.read_csv(f"{inputs['out']}.csv").iloc[0]
    assert (row["results"], row["regenerated"]) == (3, 2)  # Fig. 2 is not a result
    assert "Fig. 1 (in a supplement, not here)" in row["not_regenerated"]
    assert (row["cells"], row["other_cells"]) == (3, 1)  # a, b, d; the bytes cell apart
    assert row["median_gap"] == pytest.approx(2.0)  # |−10|, |−1|, |−2|
    assert row["near"] == pytest.approx(2 / 3)
    assert (row["structural_match"], row["structural"]) == (2, 3)
    assert (row["hold_paper"], row["evaluable_paper"]) == (2, 2)
    assert (row["hold_ours"], row["evaluable_ours"]) == (1, 2)
    assert (row["gpu_hours"], row["runs"]) == (12.5, 40)
    cells = pd.read_csv(f"{inputs['out']}_cells.csv")
    assert sorted(cells.loc[cells["accuracy"], "column"]) == ["a", "b", "d"]


def test_pages_say_the_scale_and_carry_the_scatter(inputs: dict) -> None:
    written = make_overview(inputs["spec"], inputs["contents"], inputs["cost"], inputs["out"])
    assert {p.name for p in written} >= {"overview.png", "overview.pdf", "overview.md",
                                         "overview_fragment.html", "overview.html"}  # fmt: skip
    fragment = Path(f"{inputs['out']}_fragment.html").read_text()
    assert "data:image/png;base64," in fragment and "NOT a reproduction" in fragment
    assert "<html" not in fragment and ".fro-overview table" in fragment  # scoped style
    md = Path(f"{inputs['out']}.md").read_text()
    assert "| p | 2 of 3 | 3 (+1 other) | 2.0 | 67 % |" in md


def test_contents_rows_name_real_items(inputs: dict) -> None:
    contents = read_contents(inputs["contents"])
    with pytest.raises(ValueError, match="unknown items \\['params'\\]"):
        check_contents(contents, {"p": ["t1", "t2"]})
    bare = contents.assign(note="")
    with pytest.raises(ValueError, match="Fig. 1: a result with no item and no note"):
        check_contents(bare, {"p": ["t1", "t2", "params"]})


def test_committed_contents_match_the_experiment_files() -> None:
    """Every item the list names exists; each paper's results not regenerated say why; and every
    table or figure item of a paper regenerates one of the paper's own (or is named apart)."""
    contents = read_contents(CONTENTS)
    plan = paper_plan(REPO)
    check_contents(contents, plan.papers)
    named = {(r.paper, i) for r in contents.itertuples() for i in r.items}
    for paper in set(contents["paper"]):
        assert paper in plan.papers, f"contents.csv: unknown paper {paper}"
    results = contents[contents["result"]]
    assert len(results) >= 50 and results["items"].map(bool).sum() >= len(results) - 2
    papers = set(contents["paper"])
    unnamed = [(p, i) for p in papers for i in plan.papers[p] if (p, i) not in named]
    assert len(unnamed) <= 4, unnamed  # items of a section, not of a table or figure


def _description(files: list) -> str:
    """workflow.rst rendered as Snakemake's report renders it (jinja, then docutils)."""
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment

    text = (REPO / "report" / "workflow.rst").read_text()
    snakemake = SimpleNamespace(config={"scale": "mini"})
    rst = (
        Environment(trim_blocks=True, lstrip_blocks=True)
        .from_string(text)
        .render(snakemake=snakemake, categories={}, files=files)
    )
    return publish_parts(rst, writer_name="html")["html_body"]


def test_report_first_page_includes_the_overview(inputs: dict) -> None:
    """The report's landing text carries the overview when the report holds it, and renders
    without it (a report of a partial run)."""
    from types import SimpleNamespace

    make_overview(inputs["spec"], inputs["contents"], inputs["cost"], inputs["out"])
    page = Path(f"{inputs['out']}.html")
    held = [SimpleNamespace(target="overview.html", path=page)]
    assert "How each paper reproduces" in _description(held)
    assert "How each paper reproduces" not in _description([])


def test_the_scatters_title_fits_inside_the_figure():
    """The one-line title ran past both edges of the saved figure (its words cut)."""
    cells = pd.DataFrame({"paper": ["fedins"], "ours": [10.0], "paper_value": [80.0],
                          "accuracy": [True]})  # fmt: skip
    fig = plot_scatter(cells, "mini")
    fig.canvas.draw()
    title = fig.axes[0].title.get_window_extent()
    box = fig.bbox
    assert box.x0 <= title.x0 and title.x1 <= box.x1, (title, box)


def test_a_paper_without_tables_of_its_own_has_no_row(inputs: dict) -> None:
    """The shared baselines (no table or figure of a paper) showed a row of dashes."""
    spec = inputs["spec"]
    spec["papers"]["baselines"] = {"title": "baselines", "items": {}}
    make_overview(spec, inputs["contents"], inputs["cost"], inputs["out"])
    assert pd.read_csv(f"{inputs['out']}.csv")["paper"].tolist() == ["p"]
