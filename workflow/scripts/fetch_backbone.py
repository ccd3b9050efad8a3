"""Fetch or convert a released backbone into ``results/<scale>/backbones/<name>.safetensors``.

Usage: python workflow/scripts/fetch_backbone.py NAME DEST --data-root DIR [--offline] [--random]
"""

from __future__ import annotations

import argparse

from fedrepro.data.sources.download import fetch_release
from fedrepro.models.weights import fetch_backbone


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", help="registered backbone name, e.g. resnet18.tv_in1k")
    parser.add_argument("dest", help="output safetensors path")
    parser.add_argument("--data-root", required=True, help="folder with backbones/<name>/ staged")
    parser.add_argument("--offline", action="store_true", help="use staged files only")
    parser.add_argument(
        "--random", action="store_true", help="random weights where none are staged (smoke)"
    )
    args = parser.parse_args(argv)
    fetch_backbone(args.name, args.dest, args.data_root, args.offline, args.random, fetch_release)


if __name__ == "__main__":
    main()
