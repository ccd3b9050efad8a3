"""Write the prepared split files of one dataset (synthetic at mini scale, parsed at paper)."""

import argparse
import sys
from pathlib import Path

from fedrepro.data.build import SCALES, prepare

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--dataset", required=True, help="registry key, e.g. cifar10")
p.add_argument("--scale", required=True, choices=SCALES)
p.add_argument("--out-dir", type=Path, required=True, help="writes <out-dir>/<split>.safetensors")
p.add_argument("--raw-dir", type=Path, help="downloaded/staged raw files (paper scale)")
p.add_argument("--per-class-train", type=int, default=300, help="mini: train images per class")
p.add_argument("--per-class-test", type=int, default=100, help="mini: test images per class")
p.add_argument("--size", type=int, help="resize images to size×size (default: native)")
p.add_argument("--seed", type=int, default=0, help="mini: which synthetic images are drawn")
a = p.parse_args()
try:
    paths = prepare(
        a.dataset,
        a.scale,
        a.out_dir,
        a.raw_dir,
        a.per_class_train,
        a.per_class_test,
        a.size,
        a.seed,
    )
except (FileNotFoundError, ValueError) as err:
    sys.exit(f"fedrepro prepare error ({type(err).__name__}): {err}")  # one line
print("\n".join(map(str, paths)))
