"""Write one paper figure (png, pdf) from its item manifest."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fedrepro.report.figures import make_figure


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--manifest", required=True, help="item manifest (JSON)")
    parser.add_argument("--runs-dir", required=True, help="results/<scale>/runs")
    parser.add_argument("--partitions-dir", help="results/<scale>/partitions")
    parser.add_argument("--out-prefix", required=True, help="output path without extension")
    args = parser.parse_args(argv)
    manifest = json.loads(Path(args.manifest).read_text())
    make_figure(manifest, args.runs_dir, args.partitions_dir, args.out_prefix)


if __name__ == "__main__":
    main()
