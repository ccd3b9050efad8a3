"""Federated algorithms: each file holds one family and only what differs from FedAvg."""

from __future__ import annotations

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
    """Build from a run config's `algorithm` block: {"name": ..., **parameters}."""
    params = dict(cfg)
    name = params.pop("name")
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm.name: unknown '{name}' (allowed: {', '.join(ALGORITHMS)})")
    return ALGORITHMS[name](**params)
