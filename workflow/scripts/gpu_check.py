"""The GPU check's jobs (fedrepro.bench.gpu_check): `repeat` a training or adaptation job and
compare, `resume` a training run killed after its first round, time a run family's `steps`."""

import json
from pathlib import Path

from fedrepro.atomic import write_json
from fedrepro.bench import gpu_check
from fedrepro.jobs.cli import job_files, job_parser

p = job_parser(__doc__)
p.add_argument("what", choices=["repeat", "resume", "steps"])
p.add_argument("--members-json", required=True, help="the job's members (JSON text)")
p.add_argument("--stage", choices=["train", "adapt"], default="train")
p.add_argument("--root", type=Path, help="where the second runs go")
p.add_argument("--train", help="the training job's script (resume)")
p.add_argument("--timing", default="{}", help="config gpu_check.step_time (JSON text)")
p.add_argument("--out", type=Path, required=True)
a = p.parse_args()
members = json.loads(a.members_json)
files = job_files(a)
if a.what == "repeat":
    gpu_check.repeat(a.stage, members, files.pop("data_dir"), a.root, a.out, **files)
elif a.what == "resume":
    flags = [f"--data-dir={files['data_dir']}", f"--device={a.device}", f"--threads={a.threads}"]
    flags += ["--backbone", *map(str, a.backbone)] if a.backbone else []
    gpu_check.resume(members[0], [gpu_check.PYTHON, a.train, *flags], a.root, a.out)
else:
    m, timing = members[0], json.loads(a.timing)
    found = gpu_check.step_time(
        m["config"],
        m["batch"],
        files.pop("data_dir"),
        m["partition"],
        int(timing.get("warmup", 2)),
        int(timing.get("timed", 5)),
        **files,
    )
    print(json.dumps(found, indent=1))
    write_json(a.out, {"run": Path(m["out_dir"]).name, **found})
