"""Train the runs of one training job, one after the other, each into its own directory
(a run resumes from its checkpoint; a job resumed after a kill keeps the runs it finished)."""

import json
from pathlib import Path

from fedrepro.jobs.cli import job_files, job_parser
from fedrepro.jobs.train import train_runs

p = job_parser(__doc__)
p.add_argument("--runs-json", required=True, help="[{config, partition, out_dir}] (JSON text)")
p.add_argument("--record", type=Path, default=None, help="the job's record, written last")
a = p.parse_args()
train_runs(json.loads(a.runs_json), record=a.record, **job_files(a))
