"""Linear-probe a pretrained tiny backbone against random weights on the mini analogs."""

import argparse
from pathlib import Path

from fedrepro.jobs.probe import probe_backbone

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--backbone", required=True)
p.add_argument("--weights", type=Path, required=True)
p.add_argument("--data", nargs="+", required=True, help="prepared dataset folders")
p.add_argument("--out", type=Path, required=True)
p.add_argument("--device", default="auto")
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()
data = {Path(d).name: Path(d) for d in a.data}
probe_backbone(a.backbone, a.weights, data, a.out, a.device, a.threads)
