"""How long Snakemake takes to plan the paper-scale DAG as the number of jobs grows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

_TOTAL = re.compile(r"^total\s+(\d+)\s*$", re.MULTILINE)


def dry_run_seconds(target: str, repo: Path, configfile: str = "config/paper.yaml") -> dict:
    """Wall seconds of ``snakemake -n <target>`` and the number of jobs it lists."""
    exe = shutil.which("snakemake") or str(Path(sys.executable).parent / "snakemake")
    cmd = [exe, "-n", "--nolock", "--configfile", configfile, "--", target]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(
            f"snakemake -n {target} failed: {(res.stdout + res.stderr).strip()[-500:]}"
        )
    found = _TOTAL.findall(res.stdout)
    return {"target": target, "jobs": int(found[-1]) if found else 0, "seconds": seconds}
