"""Partition one prepared dataset per client (spec file written by the workflow)."""

import argparse
import json

from fedrepro.data.partition import partition_files

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--spec-json", required=True, help='JSON text {"spec": {...}, "seed": N}')
p.add_argument("--train", required=True, help="prepared train split (.safetensors)")
p.add_argument("--test", required=True, help="prepared test split (.safetensors)")
p.add_argument("--out", required=True, help="partition JSON to write")
a = p.parse_args()
job = json.loads(a.spec_json)
partition_files(job["spec"], a.train, a.test, a.out, job["seed"])
