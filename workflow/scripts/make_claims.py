"""Write a paper's claims table (csv, md, html): each claim on the paper's numbers and ours."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from fedrepro.report.claims import make_claims


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--spec",
        required=True,
        help="claims manifest (JSON/YAML with 'claims' and 'reported'), or a list of claims",
    )
    parser.add_argument("--manifests", nargs="*", default=[], help="item manifests (JSON)")
    parser.add_argument("--runs-dir", required=True, help="results/<scale>/runs")
    parser.add_argument("--reported", help="reported-numbers CSV (default: the spec's)")
    parser.add_argument("--out-prefix", required=True, help="output path without extension")
    parser.add_argument("--title", help="page title")
    args = parser.parse_args(argv)
    spec = yaml.safe_load(Path(args.spec).read_text())  # JSON is YAML too
    spec = spec if isinstance(spec, dict) else {"claims": spec}
    manifests = {}
    for path in args.manifests:
        manifest = json.loads(Path(path).read_text())
        manifests[manifest["item"]] = manifest
    reported = args.reported or spec.get("reported")
    title = args.title or (f"Claims: {spec['paper']}" if spec.get("paper") else None)
    make_claims(
        spec.get("claims") or [], manifests, args.runs_dir, reported, args.out_prefix, title
    )


if __name__ == "__main__":
    main()
