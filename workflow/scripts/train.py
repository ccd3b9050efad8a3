"""Train one federated run (resumes from its checkpoint when one exists)."""

import argparse
import json
from pathlib import Path

from fedrepro.jobs.train import train_run

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--config-json", required=True, help="resolved run config (JSON text)")
p.add_argument("--data-dir", type=Path, required=True, help="dir with train/test.safetensors")
p.add_argument("--partition", type=Path, required=True, help="partition JSON")
p.add_argument("--out-dir", type=Path, required=True, help="run directory")
p.add_argument("--backbone", type=Path, default=None, help="pretrained weights (safetensors)")
p.add_argument("--device", default="auto")
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()
train_run(
    json.loads(a.config_json), a.data_dir, a.partition, a.out_dir, a.backbone, a.device, a.threads
)
