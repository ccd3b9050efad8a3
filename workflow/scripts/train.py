"""Train one federated run (resumes from its checkpoint when one exists)."""

import json

from fedrepro.jobs.cli import job_files, job_parser
from fedrepro.jobs.train import train_run

p = job_parser(__doc__)
p.add_argument("--config-json", required=True, help="resolved run config (JSON text)")
a = p.parse_args()
train_run(json.loads(a.config_json), **job_files(a))
