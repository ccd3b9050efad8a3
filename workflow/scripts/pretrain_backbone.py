"""Pretrain a tiny backbone on the synthetic source set (mini scale)."""

import argparse
import json
from pathlib import Path

from fedrepro.jobs.pretrain import pretrain_backbone

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--backbone", required=True)
p.add_argument("--spec-json", required=True, help="pretraining settings (JSON text)")
p.add_argument("--data-dir", type=Path, required=True)
p.add_argument("--out", type=Path, required=True)
p.add_argument("--device", default="auto")
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()
spec = json.loads(a.spec_json)
pretrain_backbone(a.backbone, a.data_dir, a.out, spec, a.device, a.threads)
