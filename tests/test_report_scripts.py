"""The thin workflow scripts: the command lines the rules use reach the library."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import pytest

from tests.test_report_results import make_manifest

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"
CELLS = {("SVHN", "FedAvg"): (80.0, 1.0), ("SVHN", "FedNova"): (70.0, 4.0)}


def run_script(name: str, args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [name, *args])
    runpy.run_path(str(SCRIPTS / name), run_name="__main__")


def test_scripts_write_their_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"rows": "dataset", "columns": "algorithm", "metric": "final_acc"}
    manifest = make_manifest(CELLS, ("dataset", "algorithm"), tmp_path / "runs", spec=spec)
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    common = ["--manifest", str(tmp_path / "m.json"), "--runs-dir", str(tmp_path / "runs")]
    run_script("make_table.py", [*common, "--out-prefix", str(tmp_path / "t")], monkeypatch)
    assert "80.00 ± 1.00" in (tmp_path / "t.md").read_text()

    figure = {**manifest, "spec": {"figure": "bars", "groups": "algorithm"}}
    (tmp_path / "f.json").write_text(json.dumps(figure))
    args = ["--manifest", str(tmp_path / "f.json"), "--runs-dir", str(tmp_path / "runs")]
    args += ["--partitions-dir", str(tmp_path), "--out-prefix", str(tmp_path / "f")]
    run_script("make_figure.py", args, monkeypatch)
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0

    claims = {"paper": "adapters", "reported": None, "claims": [
        {"id": "nova-low", "text": "FedNova lowest", "kind": "rank", "item": "table1",
         "rank": "min", "select": {"algorithm": "FedNova"}}]}  # fmt: skip
    (tmp_path / "c.json").write_text(json.dumps(claims))
    args = ["--spec", str(tmp_path / "c.json"), "--manifests", str(tmp_path / "m.json")]
    args += ["--runs-dir", str(tmp_path / "runs"), "--out-prefix", str(tmp_path / "c")]
    run_script("make_claims.py", args, monkeypatch)
    assert "nova-low" in (tmp_path / "c.csv").read_text()
    assert "Claims: adapters" in (tmp_path / "c.html").read_text()
