"""Partition one prepared dataset per client (spec file written by the workflow), then
draw its label histogram (the partition's figure item)."""

import argparse
import json
from pathlib import Path

from fedrepro.data.partitions.make import partition_files
from fedrepro.report.figures import make_figure

p = argparse.ArgumentParser(description=__doc__)
p.add_argument("--spec-json", required=True, help='JSON text {"spec": {...}, "seed": N}')
p.add_argument("--train", required=True, help="prepared train split (.safetensors)")
p.add_argument("--test", required=True, help="prepared test split (.safetensors)")
p.add_argument("--out", required=True, help="partition JSON to write")
p.add_argument("--figure-json", help="the histogram's figure manifest (JSON text)")
a = p.parse_args()
job = json.loads(a.spec_json)
partition_files(job["spec"], a.train, a.test, a.out, job["seed"])
if a.figure_json:
    for path in make_figure(json.loads(a.figure_json), Path(a.out).with_suffix("")):
        print(path)
