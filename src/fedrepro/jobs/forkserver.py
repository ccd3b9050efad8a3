"""A fork server for the workflow's job scripts: torch imported once, every job a fork.

A mini job spends more time starting than working: ``import torch`` and the rest of the
stack take 2–4 s of a 5 s job, and the first optimiser step imports ``torch._dynamo``
(about 1 s more). The server imports all of that once and forks a child per job; the
child runs the job's script as ``python script args`` would, in the job's directory, with
the job's environment and its stdin/stdout/stderr (so its log is where Snakemake put it).
Numbers are those of a fresh process: every job seeds what it draws, and nothing runs in
the server before it forks (tests/jobs/test_forkserver.py compares the saved files).

Client (what a rule's shell runs): ``python -m fedrepro.jobs.forkserver SCRIPT ARGS…``.
With ``FEDREPRO_FORKSERVER`` naming a live server that runs the same Python in the same
Slurm allocation (or both outside one), the job runs there; otherwise (no server, another
node, another interpreter, a Slurm job beside a server outside it, whose work would escape
the job's limits and accounting) the client replaces itself with ``python SCRIPT ARGS…``,
the plain command. Killing the client kills its job.

A job's resources: Snakemake's ``benchmark:`` file samples the shell's process tree, which
under the server holds only this client (about 17 MB and 0.03 CPU-s for any job). The server
reaps each job with ``os.wait4`` and sends its resource usage back; the client writes it as
the last line of its standard error, the job's log (``USAGE``: the job's peak resident memory,
CPU seconds and block input/output, the benchmark file's ``max_rss``, ``cpu_time``, ``io_in``
and ``io_out`` columns, its descendants included). A plain command needs none: the benchmark
file measures the job.

Server: ``python -m fedrepro.jobs.forkserver --serve SOCKET``, started and stopped by the
Snakefile (config ``forkserver``, ``ForkServer``); it exits with the process that started
it. Jobs that start before it is ready run the plain command.

This module imports only the standard library at load time: the client must start fast.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import resource
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ENV = "FEDREPRO_FORKSERVER"
ALLOCATION = "SLURM_JOB_ID"  # a Slurm job's processes have it, and only they
PRELOAD = (
    "torch",
    "torch._dynamo",  # imported lazily by the first optimiser step otherwise
    "safetensors.torch",
    "timm",
    "fedrepro.jobs.train",
    "fedrepro.jobs.adapt",
    "fedrepro.data.partitions.make",
    "fedrepro.report.figures",  # matplotlib: a partition job draws its histogram
)
MAX_MESSAGE = 1 << 20
USAGE = (
    "job usage (fork server, wait4): max_rss {max_rss:.1f} MiB, cpu_time {cpu_time:.2f} s, "
    "io_in {io_in:.1f} MiB, io_out {io_out:.1f} MiB"
)


def interpreter() -> list[str]:
    """What makes two Pythons the same for a job: the binary and the environment."""
    return [os.path.realpath(sys.executable), sys.prefix]


def same_place(request: dict) -> bool:
    """Whether a client's job may run here: the same Python, and the same Slurm allocation
    or none (a job forked here is accounted and limited where this server is)."""
    same_python = request.get("python") == interpreter()
    return same_python and request.get("env", {}).get(ALLOCATION) == os.environ.get(ALLOCATION)


class ForkServer:
    """A server for the calling process's jobs (the Snakemake driver): ``start`` launches it
    without waiting (its socket in a fresh temporary directory, named in ``ENV`` for the
    jobs), ``stop`` ends it and its running jobs."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.dir: str | None = None

    def start(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="fedrepro-forkserver-")
        path = str(Path(self.dir) / "socket")
        log = open(Path(self.dir) / "server.log", "wb")  # noqa: SIM115 - the server's own
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fedrepro.jobs.forkserver", "--serve", path],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )  # fmt: skip
        log.close()
        os.environ[ENV] = path

    def stop(self) -> None:
        os.environ.pop(ENV, None)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.proc = self.dir = None


# ---------------------------------------------------------------- client


def run_job(argv: list[str]) -> int:
    """Run ``python argv…`` on the server when one answers, else exec it here."""
    path = os.environ.get(ENV)
    if path:
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(path)
        except OSError:
            conn = None
        if conn is not None:
            request = {"argv": argv, "cwd": os.getcwd(), "python": interpreter(),
                       "env": dict(os.environ)}  # fmt: skip
            body = json.dumps(request).encode()
            socket.send_fds(conn, [len(body).to_bytes(8, "big") + body], [0, 1, 2])
            reply = _read_reply(conn)
            if "exit" not in reply:  # the server went away mid-job: never run it twice
                print(f"fork server {path} stopped during the job", file=sys.stderr)
                return 1
            if reply["exit"] is not None:
                if "usage" in reply:
                    print(USAGE.format(**reply["usage"]), file=sys.stderr, flush=True)
                return int(reply["exit"])
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *argv])  # the plain command
    return 1  # not reached


def _read_reply(conn: socket.socket) -> dict:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return json.loads(data) if data else {}


# ---------------------------------------------------------------- server


def serve(path: str, preload: tuple[str, ...] = PRELOAD) -> None:
    """Accept jobs on the Unix socket ``path`` until the starting process exits."""
    for name in preload:
        importlib.import_module(name)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".tmp")
    os.replace(path + ".tmp", path)  # appears ready or not at all
    listener.listen(64)
    running: dict[int, socket.socket] = {}  # child pid -> its client's connection
    by_conn: dict[socket.socket, int] = {}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while os.getppid() == parent:
            ready, _, _ = select.select([listener, *by_conn], [], [], 0.05)
            for sock in ready:
                if sock is listener:
                    _accept(listener, running, by_conn)
                elif sock in by_conn:  # the client hung up (killed): so is its job
                    _kill(by_conn.pop(sock), running)
            _reap(running, by_conn)
    finally:
        for pid in list(running):
            _kill(pid, running)
        listener.close()
        if os.path.exists(path):
            os.unlink(path)


def _accept(listener, running: dict, by_conn: dict) -> None:
    conn, _ = listener.accept()
    try:
        msg, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
        size = int.from_bytes(msg[:8], "big")
        body = msg[8:]
        while len(body) < size:
            body += conn.recv(size - len(body))
        request = json.loads(body)
    except (OSError, ValueError):
        conn.close()
        return
    if not same_place(request) or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        _reply(conn, {"exit": None})  # not here: the client runs it itself
        return
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(request, fds, [listener, conn, *by_conn])
    for fd in fds:
        os.close(fd)
    running[pid] = conn
    by_conn[conn] = pid


def _child(request: dict, fds: list[int], sockets: list[socket.socket]) -> None:
    """Become the job: its stdio, directory, environment and argv; never return."""
    code = 1
    try:
        for sock in sockets:
            sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop(ENV, None)  # a job never nests
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        runpy.run_path(sys.argv[0], run_name="__main__")
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - the job's traceback goes to its log, as python's
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _reap(running: dict, by_conn: dict) -> None:
    while running:
        try:
            pid, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = running.pop(pid, None)
        if conn is None:
            continue
        by_conn.pop(conn, None)
        code = os.waitstatus_to_exitcode(status)
        _reply(conn, {"exit": code if code >= 0 else 128 - code, "usage": usage(rusage)})


def usage(rusage: resource.struct_rusage) -> dict:
    """A reaped job's peak resident memory (Linux counts ``ru_maxrss`` in KiB), CPU seconds
    (user + system) and block input and output (512-byte blocks), in the units of Snakemake's
    ``max_rss``, ``cpu_time``, ``io_in`` and ``io_out`` (MiB, s)."""
    return {
        "max_rss": rusage.ru_maxrss / 1024,
        "cpu_time": rusage.ru_utime + rusage.ru_stime,
        "io_in": rusage.ru_inblock * 512 / 2**20,
        "io_out": rusage.ru_oublock * 512 / 2**20,
    }


def _kill(pid: int, running: dict) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    conn = running.get(pid)
    if conn is not None:
        conn.close()


def _reply(conn: socket.socket, reply: dict) -> None:
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps(reply).encode())
    conn.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"] and len(argv) == 2:
        serve(argv[1])
        return 0
    if not argv:
        print("usage: python -m fedrepro.jobs.forkserver SCRIPT [ARGS…] | --serve SOCKET",
              file=sys.stderr)  # fmt: skip
        return 2
    return run_job(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
