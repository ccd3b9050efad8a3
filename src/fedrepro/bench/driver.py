"""The Snakemake process as the jobs see it: its pid and start, for the bench budget's timed
run; and its pending scheduler wake-ups, cancelled when the run ends. Standard library only
(the workflow imports it when it starts)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

ENV = "FEDREPRO_DRIVER"


def mark_driver() -> None:
    """Name the calling process (the Snakemake driver), its host and its start to the jobs
    it starts."""
    os.environ[ENV] = json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    )


def driver() -> dict | None:
    """The driver of this job: when it started (epoch seconds), wall seconds since then and
    its CPU seconds (Linux /proc on the driver's host; None elsewhere, e.g. a cluster job on
    another node, where that pid is another process), or None outside a workflow run."""
    spec = os.environ.get(ENV)
    if not spec:
        return None
    info = json.loads(spec)
    started = float(info["started"])
    out = {"started": started, "wall_seconds": time.time() - started, "cpu_seconds": None}
    if info.get("host") != socket.gethostname():
        return out
    try:
        fields = Path(f"/proc/{int(info['pid'])}/stat").read_text().rsplit(")", 1)[1].split()
        out["cpu_seconds"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    return out


def cancel_wakeups() -> int:
    """Cancel the process's pending ``threading.Timer`` wake-ups; returns how many. Snakemake
    9's rate limiter arms one per scheduling pass (profiles/default sets a minute's timespan,
    see there), and Python waits for these non-daemon timers at exit: without this a run
    would end up to a minute after its last job. Called when the run has ended (onsuccess,
    onerror), when nothing is left to wake."""
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    for t in timers:
        t.cancel()
    return len(timers)
