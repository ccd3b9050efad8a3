"""Domain schemes: one domain per client (or m clients per domain) and leave-one-domain-out."""

from __future__ import annotations

from typing import Any

import numpy as np

from fedrepro.data.partitions.common import (
    ClientPart,
    Params,
    PartitionData,
    mark_new_clients,
    stratified_split,
)


def domain(p: Params, data: PartitionData, rng: np.random.Generator) -> list[ClientPart]:
    """Each selected domain is split uniformly (class-stratified) into ``clients_per_domain``
    clients (FedBN/FedICON Digits: 1; FedPCE Digits: K). The test split follows by domain via
    the caller's per-(domain, class) allocation; ``new_fraction`` flags FedPCE's new clients
    per domain; ``group_by_domain`` reports each client under its domain (FedICON's columns:
    accuracy pooled per domain)."""
    train_domains = _require_domains(p, data)
    per_domain = p.number("clients_per_domain", 1, lo=1, integer=True)
    new_fraction = p.number("new_fraction", 0.0, lo=0, hi=1)
    group_by_domain = p.raw("group_by_domain", False, allowed="true or false")
    if not isinstance(group_by_domain, bool):
        raise p.error("group_by_domain", f"is {group_by_domain!r}; expected true or false")
    given = p.raw("domains", None)
    if given is not None and not (isinstance(given, list | tuple) and given):
        raise p.error("domains", f"is {given!r}; expected a non-empty list of domain names")
    selected = [_domain_index(p, "domains", d, data) for d in given or []]
    selected = selected or list(range(len(data.domain_names)))
    if len(set(selected)) != len(selected):
        raise p.error("domains", f"repeats a domain: {given!r}")
    p.resolved["domains"] = [data.domain_names[d] for d in selected]
    if data.num_clients != len(selected) * per_domain:
        raise ValueError(
            f"partition scheme 'domain': key 'clients' is {data.num_clients}; expected "
            f"{len(selected)} domains x {per_domain} clients_per_domain"
        )
    members_of = {d: np.flatnonzero(train_domains == d) for d in selected}
    for d in selected:
        _require_members(d, members_of[d], data)
    if p.has("cap_fraction"):
        fraction = p.number("cap_fraction", lo=0, hi=1, lo_open=True)
        cap = int(min(len(m) for m in members_of.values()) * fraction)
        if cap < per_domain:
            raise p.error("cap_fraction", f"is {fraction}: {cap} images per domain is too few")
        p.resolved["cap"] = cap
        members_of = {d: m[:cap] for d, m in members_of.items()}
    clients = []
    for d in selected:
        # a lone client of a domain tests on all of that domain's test images, even the
        # classes a capped training share happens to miss
        test = np.flatnonzero(data.test_domains == d) if per_domain == 1 else None
        for part in stratified_split(members_of[d], data.train_labels, per_domain, rng):
            name = data.domain_names[d]
            clients.append(
                ClientPart(part, test, domain=name, group=name if group_by_domain else None)
            )
    mark_new_clients(clients, per_domain, new_fraction, rng)
    return clients


def leave_one_domain_out(
    p: Params, data: PartitionData, rng: np.random.Generator
) -> list[ClientPart]:
    """Each domain but ``held_out`` is one client; every client tests on all test images of
    the held-out domain (FedICON's Office-10 domain shift, Tan et al. NeurIPS 2023 §5.1)."""
    train_domains = _require_domains(p, data)
    held_out = _domain_index(
        p, "held_out", p.raw("held_out", allowed="a domain name or index"), data
    )
    p.resolved["held_out"] = data.domain_names[held_out]
    remaining = [d for d in range(len(data.domain_names)) if d != held_out]
    if data.num_clients != len(remaining):
        raise ValueError(
            f"partition scheme 'leave_one_domain_out': key 'clients' is {data.num_clients}; "
            f"expected {len(remaining)} (one per remaining domain)"
        )
    assert data.test_domains is not None  # checked by _require_domains
    held_test = np.flatnonzero(data.test_domains == held_out)
    clients = []
    for d in remaining:
        members = np.flatnonzero(train_domains == d)
        _require_members(d, members, data)
        clients.append(ClientPart(rng.permutation(members), held_test, domain=data.domain_names[d]))
    return clients


def _require_domains(p: Params, data: PartitionData) -> np.ndarray:
    if data.train_domains is None or data.test_domains is None:
        raise ValueError(f"partition scheme {p.scheme!r} needs a dataset with domain ids")
    return data.train_domains


def _require_members(d: int, members: np.ndarray, data: PartitionData) -> None:
    if not len(members):
        raise ValueError(f"partition: domain {data.domain_names[d]!r} has no training samples")


def _domain_index(p: Params, key: str, value: Any, data: PartitionData) -> int:
    """A domain given by name or by index, as an index."""
    names = data.domain_names
    if isinstance(value, str) and value in names:
        return names.index(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return value
    raise p.error(key, f"has {value!r}; expected a domain name in {names} or an index")
