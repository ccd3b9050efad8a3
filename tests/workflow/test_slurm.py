"""The Slurm path for real: a one-node cluster built from the distribution's packages
(tests/workflow/slurm_cluster.sh; skipped, with the reason, where it cannot be built) runs
a table with training and adaptation through profiles/slurm as a user would: the embedded
default (fork server on), the profile with only what a cluster sets edited (account, and how
often a private controller may be asked for job states), Snakemake's exit status 0.

One run, watched while it works, then checked: every job of the plan was a Slurm job whose
work ran inside its allocation; each got the memory, time and CPUs its rule declares (times
the attempt); a training job cancelled with `scancel` mid-run was retried and resumed to the
files of an uninterrupted (local) run; a job over its memory was killed and retried with
twice the memory. Without slurmdbd there is no sacct: `scontrol show job` keeps every job
for MinJobAge (an hour on this cluster)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.job_helpers import run_metrics
from tests.workflow_helpers import copy_workflow, snakemake

CLUSTER = Path(__file__).with_name("slurm_cluster.sh")
# prepare_data, partition, two training jobs of two seeds each, their adaptation jobs, a table
TARGET = "fedpce_table3"
GPU_JOB = "results/bench/workloads/vitb16_ssf.json"  # a paper-shape bench job: gpu=1
# the partition job's memory, low enough for its first attempt to be killed (the job step
# holds Snakemake, about 150 MB, and the partition script, about 700 MB), its second's double
SMALL = {"scales": {"mini": {"resources": {"partition": {"mem_mb": 600, "min_minutes": 10}}}}}
# the Slurm path is under test, not learning: FedPCE's mini runs at 16 steps of batch 16 a
# client at Adam 1e-3 (its mini schedule before issue 35: the same runs) instead of the
# default's 100 of 64, 4 s a run instead of 35
SHORT = {"rounds": 4, "local_steps": 4, "batch_size": 16, "lr": 1.0e-3}


def _short_fedpce(wf: Path) -> None:
    path = wf / "config" / "experiments" / "fedpce.yaml"
    doc = yaml.safe_load(path.read_text())
    mini = doc["scales"]["mini"]["defaults"]
    mini["train"] = {**mini["train"], **SHORT}
    mini["eval_every"] = 2
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    state = tmp_path_factory.mktemp("slurm")
    up = subprocess.run(["sh", str(CLUSTER), "start", str(state)], capture_output=True,
                        text=True, timeout=900)  # fmt: skip
    if up.returncode == 3:  # documented unavailability: no root, no packages, a real Slurm
        pytest.skip(up.stderr.strip())
    assert up.returncode == 0, up.stdout + up.stderr
    yield state
    subprocess.run(["sh", str(CLUSTER), "stop", str(state)], timeout=120)


def _user_profile(wf: Path) -> Path:
    """profiles/slurm with what this cluster sets: the account (any name: no accounting), its
    partitions and status command are the template's (`cpu`, `gpu`, squeue), and the first
    status query after 5 s instead of the plugin's 40 (the chain of mini jobs would wait
    40 s at each step)."""
    path = wf / "profiles" / "slurm" / "config.yaml"
    profile = yaml.safe_load(path.read_text())
    edited = {**profile, "default-resources": {"slurm_account": "fedrepro"},
              "slurm-init-seconds-before-status-checks": 5}  # fmt: skip
    path.write_text(yaml.safe_dump(edited))
    partitions = yaml.safe_load((path.parent / "partitions.yaml").read_text())["partitions"]
    assert set(partitions) == {"cpu", "gpu"} and profile["slurm-status-command"] == "squeue"
    return path.parent


@dataclass
class Watch:
    """What the run looked like while it worked: the ancestors of every job script seen in
    the process table, any fork server (in ``workdir``: others may run beside this test), and
    the training job cancelled mid-run."""

    workdir: Path
    scripts: dict = field(default_factory=dict)  # pid -> (script, ancestor names)
    servers: set = field(default_factory=set)
    cancelled: dict = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.done.is_set():
            for pid, cmd in _processes(self.workdir):
                if "fedrepro.jobs.forkserver" in cmd and "--serve" in cmd:
                    self.servers.add(pid)
                script = re.search(r"(?:workflow|\.snakemake)/scripts/(\S+\.py)", cmd)
                if script and "fedrepro.jobs.forkserver" not in cmd and pid not in self.scripts:
                    self.scripts[pid] = (script.group(1), _ancestors(pid))
            if not self.cancelled:
                self._cancel_a_training_job_mid_run()
            time.sleep(0.2)

    def _cancel_a_training_job_mid_run(self) -> None:
        """Once a training job has finished its first seed and checkpointed its second,
        scancel its Slurm job."""
        runs = self.workdir / "results" / "mini" / "runs"
        for ckpt in runs.glob("*-s1/checkpoint.pt"):
            batch = ckpt.parent.name[: -len("-s1")]
            if not (runs / f"{batch}-s0" / "metrics.json").exists():
                continue
            jobs = _slurm("squeue", "--noheader", "--states=RUNNING", "--format=%i %k")
            for line in jobs.splitlines():
                job, comment = line.split()
                if comment == f"rule_train_wildcards_{batch}":
                    _slurm("scancel", job)
                    self.cancelled = {"batch": batch, "job": job}
                    return


def _processes(workdir: Path):
    """The processes working in ``workdir``: pid and command line."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd") != str(workdir):
                    continue
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:  # gone meanwhile
                continue
            yield int(entry), cmd.decode(errors="replace")


def _ancestors(pid: int) -> list[str]:
    names = []
    try:
        while pid > 1:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
            names.append(Path(f"/proc/{pid}/comm").read_text().strip())
    except OSError:
        pass
    return names


def _slurm(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60).stdout


def _slurm_jobs(workdir: Path) -> list[dict]:
    """Every Slurm job run from ``workdir``, in submission order."""
    jobs = []
    for line in _slurm("scontrol", "show", "job", "--oneliner").splitlines():
        job = dict(re.findall(r"(\w+)=(\S*)", line))
        if job.get("WorkDir") == str(workdir):
            jobs.append(job)
    return sorted(jobs, key=lambda j: int(j["JobId"]))


def _minutes(limit: str) -> int:
    days, _, hms = limit.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return (int(days or 0) * 24 + h) * 60 + m + (s > 0)


def _megabytes(mem: str) -> int:
    return int(float(mem[:-1]) * {"M": 1, "G": 1024, "T": 1024**2}[mem[-1]])


def _planned(stdout: str) -> dict[str, dict]:
    """The dry run's jobs by the comment the plugin gives a Slurm job
    (``rule_<rule>_wildcards_<values>``): rule, attempt-1 mem_mb and runtime (None: a local
    rule, which declares none)."""
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", stdout):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if not head:
            continue
        wildcards = re.search(r"^    wildcards: (.*)$", block, re.M)
        values = [kv.split("=", 1)[1] for kv in wildcards[1].split(", ")] if wildcards else []
        key = f"rule_{head[1]}" + (f"_wildcards_{'_'.join(values)}" if values else "")
        resources = dict(re.findall(r"(\w+)=([^,\s]+)", re.search(r"resources: (.*)", block)[1]))
        declared = {k: int(resources[k]) if resources.get(k, "").isdigit() else None
                    for k in ("mem_mb", "runtime")}  # fmt: skip
        jobs[key] = {"rule": head[1], **declared}
    return jobs


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    wf = copy_workflow(tmp_path_factory.mktemp("wf"))
    (wf / "small.yaml").write_text(yaml.safe_dump(SMALL))
    _short_fedpce(wf)
    profile = _user_profile(wf)
    args = ["--profile", str(profile), "--configfile", "small.yaml", "--", TARGET, GPU_JOB]
    dry = snakemake("-n", *args, cwd=wf)
    assert dry.returncode == 0, dry.stderr[-3000:]
    watch = Watch(wf)
    watcher = threading.Thread(target=watch.run, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    try:
        res = snakemake(*args, cwd=wf, timeout=1500)
    finally:
        watch.done.set()
        watcher.join()
    print(f"Slurm run: {time.monotonic() - t0:.0f} s, exit {res.returncode}")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    deadline = time.monotonic() + 60  # a cancelled job's processes get KillWait (30 s)
    while (left := dict(_processes(wf))) and time.monotonic() < deadline:
        time.sleep(1)
    planned = _planned(dry.stdout)
    local = {k for k, job in planned.items() if job["mem_mb"] is None}
    assert {planned[k]["rule"] for k in local} == {TARGET}, local  # the target only
    return {"wf": wf, "planned": {k: v for k, v in planned.items() if k not in local},
            "jobs": _slurm_jobs(wf), "watch": watch, "left": left}  # fmt: skip


def test_every_job_ran_as_a_slurm_job_with_its_work_inside_the_allocation(slurm_run):
    planned, jobs, watch = slurm_run["planned"], slurm_run["jobs"], slurm_run["watch"]
    finished = {j["Comment"] for j in jobs if j["JobState"] == "COMPLETED"}
    assert finished == set(planned)  # every planned job, no other
    rules = {"prepare_data", "partition", "train", "adapt", "table", "bench_workload"}
    assert {p["rule"] for p in planned.values()} == rules
    # the fork server (config forkserver: true) is a local run's only: none was started, and
    # every job script seen ran under a slurmstepd, not under the driver
    assert not watch.servers
    assert not slurm_run["left"], slurm_run["left"]  # no process outlived its job
    seen = {script for script, _ in watch.scripts.values()}
    assert {"train.py", "adapt.py"} <= seen, watch.scripts
    outside = {s: a for s, a in watch.scripts.values() if "slurmstepd" not in a}
    assert not outside, outside
    # Snakemake's benchmark of a training job measured the job's own process (through a fork
    # server it measured the client: 17 MB)
    for tsv in (slurm_run["wf"] / "results" / "mini" / "benchmarks" / "train").glob("*.tsv"):
        assert pd.read_csv(tsv, sep="\t")["max_rss"].iloc[-1] > 200, tsv


def test_each_job_got_the_memory_time_and_cpus_its_rule_declares(slurm_run):
    """mem_mb and runtime from the plan times the attempt, the rule's threads as CPUs, and
    the partition that fits: the GPU-shape bench job (gpu=1) on `gpu` with its GPU, the rest
    on `cpu`."""
    config = yaml.safe_load((slurm_run["wf"] / "config" / "config.yaml").read_text())
    attempts: dict[str, int] = {}
    for job in slurm_run["jobs"]:
        attempt = attempts[job["Comment"]] = attempts.get(job["Comment"], 0) + 1
        want = slurm_run["planned"][job["Comment"]]
        rule = want["rule"]
        cpus = {"bench_workload": config["bench"]["threads"], "train": config["threads"],
                "adapt": config["threads"]}.get(rule, 1)  # fmt: skip
        got = (_megabytes(job["MinMemoryNode"]), _minutes(job["TimeLimit"]), int(job["NumCPUs"]))
        assert got == (want["mem_mb"] * attempt, want["runtime"] * attempt, cpus), job
        gpu = rule == "bench_workload"
        assert job["Partition"] == ("gpu" if gpu else "cpu"), job
        assert ("gres:gpu:1" in job.get("TresPerJob", "")) == gpu, job


def test_a_cancelled_training_job_resumes_to_the_files_of_an_uninterrupted_run(slurm_run):
    wf, cancelled = slurm_run["wf"], slurm_run["watch"].cancelled
    assert cancelled, "no training job was seen between its two seeds"
    batch = cancelled["batch"]
    states = [j["JobState"] for j in slurm_run["jobs"]
              if j["Comment"] == f"rule_train_wildcards_{batch}"]  # fmt: skip
    assert states == ["CANCELLED", "COMPLETED"], "the job finished before it was cancelled"
    slurm = wf / "results" / "mini"
    record = json.loads((slurm / "runs" / f"{batch}.json").read_text())
    assert [r["kept"] for r in record["runs"]] == [True, False]  # its finished seed was kept
    assert "resumed from round" in (slurm / "logs" / "train" / f"{batch}.log").read_text()
    _same_as_an_uninterrupted_local_run(wf, batch, record)


def _same_as_an_uninterrupted_local_run(wf: Path, batch: str, record: dict, *config: str):
    """The training job ``batch`` run again locally, uninterrupted, at the same thread count
    on the same inputs (``config``: the Slurm run's config files): every run's files the
    same, timings aside."""
    slurm, local = wf / "results" / "mini", wf / "local" / "mini"
    for part in ("data", "partitions"):
        shutil.copytree(slurm / part, local / part)
    files = ["--configfile", *config] if config else []
    res = snakemake("--cores", "1", *files, "--config", f"results={wf / 'local'}", "--",
                    str(local / "runs" / f"{batch}.json"), cwd=wf)  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    for run in (r["run"] for r in record["runs"]):
        a, b = slurm / "runs" / run, local / "runs" / run
        assert {f.name for f in a.iterdir()} == {f.name for f in b.iterdir()}
        assert run_metrics(a) == run_metrics(b)
        for name in ("config.json", "state.safetensors"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
        untimed = [pd.read_csv(d / "history.csv").drop(columns="seconds") for d in (a, b)]
        pd.testing.assert_frame_equal(*untimed)


def test_a_job_over_its_memory_is_retried_with_double_and_finishes(slurm_run):
    jobs = [j for j in slurm_run["jobs"] if j["Comment"].startswith("rule_partition_")]
    assert [j["JobState"] for j in jobs] in (
        ["FAILED", "COMPLETED"],
        ["OUT_OF_MEMORY", "COMPLETED"],
    )
    assert [_megabytes(j["MinMemoryNode"]) for j in jobs] == [600, 1200]
    first = Path(jobs[0]["StdOut"]).read_text()
    assert "exceeded memory limit" in first, first[-2000:]


# A training job longer than its partition's limit: FedPCE's mini job of two seeds (10
# rounds each, 45-70 s a run on this cluster's one thread) on a `cpu` partition of 1
# minute, each member planned at 3 minutes: the job asks 1 minute on each of 6 attempts and
# the rule allows 6 retries; it finishes in 2 or 3 (4-8 minutes with requeues)
LIMITED = {"scales": {"mini": {"resources": {"train": {"mem_mb": 2000, "min_minutes": 3}}}}}


def test_a_job_longer_than_its_partitions_limit_finishes_through_resumptions(
    cluster, tmp_path_factory
):
    """On a partition whose max_runtime is 1 minute, a training job that needs several asks
    1 minute on each attempt; Slurm ends each at its limit (TIMEOUT), the next resumes from
    the last checkpoint, and the last completes: its runs' files are those of the same job
    run locally without a limit."""
    wf = copy_workflow(tmp_path_factory.mktemp("limited"))
    profile = _user_profile(wf)
    path = profile / "partitions.yaml"
    partitions = yaml.safe_load(path.read_text())
    partitions["partitions"]["cpu"]["max_runtime"] = 1
    path.write_text(yaml.safe_dump(partitions))
    (wf / "limited.yaml").write_text(yaml.safe_dump(LIMITED))
    config = ("--configfile", "limited.yaml")
    dry = snakemake("-n", "--profile", str(profile), *config, "--", TARGET, cwd=wf)
    assert dry.returncode == 0, dry.stderr[-3000:]
    batch = min(k.removeprefix("rule_train_wildcards_") for k, job in _planned(dry.stdout).items()
                if job["rule"] == "train")  # fmt: skip
    target = f"results/mini/runs/{batch}.json"
    t0 = time.monotonic()
    res = snakemake("--profile", str(profile), *config, "--", target, cwd=wf, timeout=1500)
    print(f"Slurm run under a 1-minute limit: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    jobs = [j for j in _slurm_jobs(wf) if j["Comment"] == f"rule_train_wildcards_{batch}"]
    states = [j["JobState"] for j in jobs]
    print(f"the training job's Slurm attempts: {states}")
    assert len(states) >= 2 and set(states[:-1]) == {"TIMEOUT"} and states[-1] == "COMPLETED"
    assert {_minutes(j["TimeLimit"]) for j in jobs} == {1}
    assert {_megabytes(j["MinMemoryNode"]) for j in jobs} == {2000}  # a timeout is no OOM
    log = (wf / "results" / "mini" / "logs" / "train" / f"{batch}.log").read_text()
    # the last attempt carried work over from the killed ones: a run resumed from its last
    # round's checkpoint, or a run an earlier attempt finished (kept): which one depends on
    # where the limit fell (a run that ends just before it leaves the next no checkpoint)
    assert "resumed from round" in log or ": kept," in log, log
    record = json.loads((wf / "results" / "mini" / "runs" / f"{batch}.json").read_text())
    _same_as_an_uninterrupted_local_run(wf, batch, record, "limited.yaml")


# Small jobs share an allocation: every mini job is under its least request (no GPU model),
# so FedPCE's jobs reading the same inputs for the same item pack, four runs at most: Table 3
# needs the pack of Table 1's FedPCE and FedPer runs (Table 1 reads them first)
PACKED = {"scales": {"mini": {"resources": {"pack": {"minutes": 1000, "runs": 4}}}}}


def test_a_pack_of_small_training_jobs_runs_as_one_slurm_job_with_the_same_results(
    cluster, tmp_path_factory
):
    """With resources.pack, a pack's runs of two configurations train in one Slurm job, one
    after another (their adaptation in another), and each run's files are those of the same
    runs trained in their own jobs, locally and without packs."""
    wf = copy_workflow(tmp_path_factory.mktemp("packed"))
    _short_fedpce(wf)
    profile = _user_profile(wf)
    (wf / "packed.yaml").write_text(yaml.safe_dump(PACKED))
    config = ("--configfile", "packed.yaml")
    dry = snakemake("-n", "--profile", str(profile), *config, "--", TARGET, cwd=wf)
    assert dry.returncode == 0, dry.stderr[-3000:]
    packs = [k for k, job in _planned(dry.stdout).items()
             if job["rule"] in ("train", "adapt") and "pack-" in k]  # fmt: skip
    assert packs, "no pack planned"
    t0 = time.monotonic()
    res = snakemake("--profile", str(profile), *config, "--", TARGET, cwd=wf, timeout=1500)
    print(f"Slurm run with packs: {time.monotonic() - t0:.0f} s")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    jobs = _slurm_jobs(wf)
    for key in packs:  # the pack's training and its adaptation: one Slurm job each
        assert [j["JobState"] for j in jobs if j["Comment"] == key] == ["COMPLETED"], key
    batch = next(k for k in packs if k.startswith("rule_train_")).removeprefix(
        "rule_train_wildcards_"
    )
    record = json.loads((wf / "results" / "mini" / "runs" / f"{batch}.json").read_text())
    runs = [r["run"] for r in record["runs"]]
    groups = sorted({r.rsplit("-s", 1)[0] for r in runs})
    assert len(runs) == 4 and len(groups) == 2, runs
    # the same runs, each configuration in its own job (no packs), locally
    slurm, local = wf / "results" / "mini", wf / "local" / "mini"
    for part in ("data", "partitions"):
        shutil.copytree(slurm / part, local / part)
    alone = snakemake("--cores", "1", "--config", f"results={wf / 'local'}", "--",
                      *(str(local / "runs" / f"{g}.json") for g in groups), cwd=wf)  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-3000:]
    for run in runs:
        a, b = slurm / "runs" / run, local / "runs" / run
        assert run_metrics(a) == run_metrics(b)
        assert (a / "state.safetensors").read_bytes() == (b / "state.safetensors").read_bytes()
