"""Snakemake ``partition`` step: one partition JSON from the prepared train and test splits."""

from __future__ import annotations

import argparse
import json

from fedrepro.data.partition import partition_files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True, help="partition spec as JSON text")
    parser.add_argument("--train", required=True, help="prepared train split (.safetensors)")
    parser.add_argument("--test", required=True, help="prepared test split (.safetensors)")
    parser.add_argument("--out", required=True, help="partition JSON to write")
    parser.add_argument("--seed", required=True, type=int)
    args = parser.parse_args()
    partition_files(json.loads(args.spec), args.train, args.test, args.out, args.seed)


if __name__ == "__main__":
    main()
