"""Adapt one trained run (resumes from its checkpoint when one exists)."""

import json
from pathlib import Path

from fedrepro.jobs.adapt import adapt_run
from fedrepro.jobs.cli import job_files, job_parser

p = job_parser(__doc__)
p.add_argument("--adapt-json", required=True, help="the adapt block (JSON text)")
p.add_argument("--run-dir", type=Path, required=True, help="the trained run's directory")
a = p.parse_args()
adapt_run(json.loads(a.adapt_json), a.run_dir, **job_files(a))
