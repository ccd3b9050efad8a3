"""One adaptation job: a finished training run's state in, the adapted clients' results out.

The job reads the run's ``config.json`` and ``state.safetensors`` and writes only into its
own directory (``results/<scale>/adapt/<id>/``): ``config.json`` (the run, the resolved
adaptation and the engine config it ran), ``metrics.json`` and ``history.csv`` in the
training run's format, so items read either stage alike.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from safetensors.torch import load_file

from fedrepro.atomic import write_json
from fedrepro.fl.tensors import put
from fedrepro.jobs.train import load_job, write_results
from fedrepro.tta import adapt_method


def adapt_run(
    adapt: dict,
    run_dir: Path,
    data_dir: Path,
    partition: Path,
    out_dir: Path,
    backbone: Path | None = None,
    device: str = "auto",
    threads: int = 1,
) -> dict:
    """Adapt (or resume adapting) the run in ``run_dir`` as ``adapt`` (``{"method", ...}``)."""
    t0 = time.perf_counter()
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    run_cfg = json.loads((run_dir / "config.json").read_text())
    method = adapt_method(adapt)
    cfg = method.run_config(run_cfg, adapt)
    source = {"run": run_dir.name, "adapt": method.resolve(adapt)}
    write_json(out_dir / "config.json", {**source, "engine": cfg})
    saved = load_file(run_dir / "state.safetensors")
    if any(not k.startswith("global.") for k in saved):
        raise ValueError(
            f"adapt ({method.name}): run {run_dir.name} keeps client-local tensors "
            f"({run_cfg['algorithm']['name']}); {method.name} starts from a global model only"
        )
    job = load_job(cfg, data_dir, partition, backbone, device, threads)
    put(job.model, {k.removeprefix("global."): v.to(job.device) for k, v in saved.items()})
    state = job.run(out_dir / "checkpoint.pt")
    return write_results(out_dir, job, state, time.perf_counter() - t0, **source)
