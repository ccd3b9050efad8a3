"""A paper's claims on the paper's own numbers, as the workflow evaluates them at paper scale
before any run finished: the plan's items, the structure items' counts measured on the meta
device (as the structure job writes them), and the paper's reported CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from fedrepro.experiments.plan import paper_plan
from fedrepro.report.claims import evaluate_claims
from fedrepro.structure import measure_structure

REPO = Path(__file__).resolve().parents[2]


def paper_claims(paper: str, tmp: Path) -> pd.DataFrame:
    """The claims table of ``paper`` (``evaluate_claims``), indexed by claim; structure
    counts written under ``tmp``."""
    plan = paper_plan(REPO, [paper])
    manifests = {}
    for key, manifest in plan.items.items():
        manifest = dict(manifest)
        if "structure" in manifest:
            out = Path(tmp) / f"{key.replace('/', '-')}.json"
            measure_structure(plan.structures[manifest["structure"]["id"]], out)
            manifest["structure"] = {**manifest["structure"], "file": str(out)}
        manifests[key.split("/")[1]] = manifest
    claims = plan.claims[paper]
    frame = evaluate_claims(claims["claims"], manifests, REPO / claims["reported"])
    return frame.set_index("claim")


def holds(frame: pd.DataFrame, claim: str) -> bool | None:
    """The paper-side verdict of ``claim``: True, False or None (nothing to evaluate)."""
    value = frame.loc[claim, "holds_paper"]
    return None if pd.isna(value) else bool(value)
