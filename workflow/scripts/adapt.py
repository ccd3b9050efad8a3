"""Adapt the trained runs of one adaptation job, one after the other, each into its own
directory (an adaptation resumes from its checkpoint; a job resumed after a kill keeps the
adaptations it finished)."""

import json
from pathlib import Path

from fedrepro.jobs.adapt import adapt_runs
from fedrepro.jobs.cli import job_files, job_parser

p = job_parser(__doc__)
p.add_argument(
    "--adapts-json", required=True, help="[{adapt, run_dir, partition, out_dir}] (JSON text)"
)
p.add_argument("--record", type=Path, default=None, help="the job's record, written last")
a = p.parse_args()
adapt_runs(json.loads(a.adapts_json), record=a.record, **job_files(a))
