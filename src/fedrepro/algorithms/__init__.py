"""Federated algorithms: each file holds one family and only what differs from FedAvg."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from fedrepro.algorithms.class_means import FedGH, FedHE, FedProto
from fedrepro.algorithms.fedavg import FedAvg
from fedrepro.algorithms.feddc import FedDC
from fedrepro.algorithms.fedhpl import FedHPL
from fedrepro.algorithms.fedicon import FedICON, FedICONTest
from fedrepro.algorithms.fedins import FedIns
from fedrepro.algorithms.fedmd import FedMD
from fedrepro.algorithms.fednova import FedNova
from fedrepro.algorithms.fedpce import FedPCE
from fedrepro.algorithms.fedprox import FedProx
from fedrepro.algorithms.fedthe import FedTHE, THETest
from fedrepro.algorithms.moon import Moon
from fedrepro.algorithms.personalized import FedBABU, FedBN, FedPer, FedRep, Local, PFedPT
from fedrepro.algorithms.pfedpg import PFedPG
from fedrepro.algorithms.scaffold import Scaffold
from fedrepro.algorithms.server_generators import FedGen, FedTGP
from fedrepro.algorithms.test_time import EATA, T3A, Tent
from fedrepro.fl.algorithm import Algorithm

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        FedAvg,
        FedProx,
        Scaffold,
        FedNova,
        FedBN,
        FedPer,
        FedRep,
        Local,
        FedIns,
        Moon,
        FedDC,
        FedPCE,
        FedICON,
        FedICONTest,
        Tent,
        EATA,
        T3A,
        FedTHE,
        THETest,
        FedHPL,
        FedBABU,
        PFedPT,
        PFedPG,
        FedProto,
        FedHE,
        FedGH,
        FedTGP,
        FedGen,
        FedMD,
    )
}


def make_algorithm(cfg: dict) -> Algorithm:
    """Build from a run config's `algorithm` block: {"name": ..., **parameters}; a method from
    outside (config ``methods``) names its file: {"from": {"file", "sha256"}}."""
    params = dict(cfg)
    name = params.pop("name")
    source = params.pop("from", None)
    if source is not None:
        return outside_algorithm(name, source["file"], source["sha256"])(**params)
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm.name: unknown '{name}' (allowed: {', '.join(ALGORITHMS)})")
    return ALGORITHMS[name](**params)


def outside_algorithm(name: str, file: str, sha256: str) -> type[Algorithm]:
    """The ``Algorithm`` subclass named ``name`` that ``file`` defines, imported from the text
    the plan hashed (a file changed since is refused: its runs' ids name the old text)."""
    text = Path(file).read_bytes()
    if hashlib.sha256(text).hexdigest() != sha256:
        raise ValueError(
            f"algorithm.from: {file} changed after the plan named it (sha256 {sha256[:12]}…); "
            "run snakemake again to plan its new runs"
        )
    spec = importlib.util.spec_from_file_location(f"fedrepro_outside_{sha256[:16]}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, Algorithm) and value.name == name:
            return value
    raise ValueError(f"algorithm.from: {file} defines no Algorithm subclass named {name!r}")
