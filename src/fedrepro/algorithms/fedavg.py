"""FedAvg: the engine's default behaviour, named."""

from fedrepro.fl.algorithm import Algorithm


class FedAvg(Algorithm):
    """McMahan et al. 2017; every difference of the other algorithms is relative to this."""

    name = "fedavg"
