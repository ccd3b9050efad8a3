"""Partition one prepared dataset per client (spec file written by the workflow)."""

import argparse
import json
from pathlib import Path

from fedrepro.data.partition import partition_files

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--spec", type=Path, required=True, help='JSON {"spec": {...}, "seed": N}')
p.add_argument("--train", required=True, help="prepared train split (.safetensors)")
p.add_argument("--test", required=True, help="prepared test split (.safetensors)")
p.add_argument("--out", required=True, help="partition JSON to write")
a = p.parse_args()
job = json.loads(a.spec.read_text())
partition_files(job["spec"], a.train, a.test, a.out, job["seed"])
