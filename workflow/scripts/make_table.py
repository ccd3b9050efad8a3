"""Write one paper table (md, tex, csv, html) from its item manifest."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fedrepro.report.tables import make_table


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", required=True, help="item manifest (JSON)")
    parser.add_argument("--runs-dir", required=True, help="results/<scale>/runs")
    parser.add_argument("--out-prefix", required=True, help="output path without extension")
    parser.add_argument("--reported", help="reported-numbers CSV (default: the manifest's)")
    args = parser.parse_args(argv)
    manifest = json.loads(Path(args.manifest).read_text())
    make_table(manifest, args.runs_dir, args.out_prefix, args.reported)


if __name__ == "__main__":
    main()
