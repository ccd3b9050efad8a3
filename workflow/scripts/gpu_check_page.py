"""Snakemake `script:` entry: the GPU check's page, step-time table and summary."""

from fedrepro.bench.gpu_check_page import write_page
from fedrepro.logs import log_to

sm = snakemake  # noqa: F821 (injected by Snakemake)
with log_to(sm.log[0]):
    out = {k: sm.output[k] for k in ("page", "steps", "summary")}
    passed = write_page(out, sm.params.root, sm.input.repeat, sm.input.resume, sm.input.steps,
                        sm.params.jobs, sm.params.settings)  # fmt: skip
    print(f"GPU check {'passed' if passed else 'FAILED'}: {sm.output.page}")
