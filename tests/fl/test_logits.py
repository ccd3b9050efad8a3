"""FedHPL's logit exchange (fedrepro.fl.logits), the invariants of its reconstruction that
hold for every unknown constant: average-upload equals all-upload, equal dimensions give
every client the same teacher, a class without correct logits gives KD 0, KD ≥ 0 and 0
exactly for logits equal up to a constant, the KD gradient scales as τ²·(1/τ), only correct
samples are uploaded, and the scalar counts of App. Table 9."""

from __future__ import annotations

import pytest
import torch

from fedrepro.fl.logits import (
    DENOMINATORS,
    WEIGHTINGS,
    aggregate,
    class_sums,
    correct,
    dimension_weights,
    download_scalars,
    has_teacher,
    kd_loss,
    upload_all,
    upload_average,
    upload_scalars,
)

C = 5


def _clients(seed: int, dims=(384, 768, 1024, 768, 384), n=40):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, C, generator=g, dtype=torch.float64) * 3,
             torch.randint(C, (n,), generator=g)) for _ in dims]  # fmt: skip


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("denominator", DENOMINATORS)
@pytest.mark.parametrize("kappa", [1.0, 0.3])
def test_average_upload_gives_the_global_logits_of_all_upload(weighting, denominator, kappa):
    dims = [384, 768, 1024, 768, 384]
    clients = _clients(0, dims)
    w = dimension_weights(dims, weighting)
    from_all = [class_sums(*upload_all(z, y), C) for z, y in clients]
    averages = [upload_average(z, y, C) for z, y in clients]
    from_avg = [(means * counts[:, None], counts) for means, counts in averages]
    a = aggregate(torch.stack([s for s, _ in from_all]), torch.stack([n for _, n in from_all]),
                  w, kappa, denominator)  # fmt: skip
    b = aggregate(torch.stack([s for s, _ in from_avg]), torch.stack([n for _, n in from_avg]),
                  w, kappa, denominator)  # fmt: skip
    assert (a - b).abs().max() < 1e-9
    cos = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0)
    assert float(cos) == pytest.approx(1.0, abs=1e-12)


def test_equal_dimensions_give_every_client_the_same_teacher():
    clients = _clients(1, dims=(768,) * 5)
    w = dimension_weights([768] * 5, "ratio")
    assert torch.equal(w, torch.ones(5, 5, dtype=torch.float64))
    sums, counts = zip(*(class_sums(*upload_all(z, y), C) for z, y in clients), strict=True)
    z = aggregate(torch.stack(sums), torch.stack(counts), w)
    assert all(torch.equal(z[0], z[k]) for k in range(1, 5))
    hetero = aggregate(
        torch.stack(sums), torch.stack(counts), dimension_weights([384, 768, 1024, 768, 384])
    )
    assert not torch.allclose(hetero[0], hetero[2])


def test_the_plain_formula_on_a_small_case():
    sums = torch.tensor([[[2.0, 0.0], [0.0, 0.0]], [[4.0, 2.0], [0.0, 6.0]]])  # [J=2, C=2, C=2]
    counts = torch.tensor([[1.0, 0.0], [2.0, 3.0]])
    w = torch.tensor([[1.0, 0.5], [0.5, 1.0]])
    z = aggregate(sums, counts, w, kappa=2.0)
    # client 0, class 0: 2·(1·[2,0] + 0.5·[4,2]) / (1·1 + 0.5·2 + 1) = [8, 2] / 3
    assert torch.allclose(z[0, 0], torch.tensor([8.0, 2.0]) / 3)
    unweighted = aggregate(sums, counts, w, kappa=2.0, denominator="unweighted")
    assert torch.allclose(unweighted[0, 0], torch.tensor([8.0, 2.0]) / 4)  # (1 + 2) + 1


def test_a_class_nobody_classifies_correctly_has_no_teacher_and_kd_zero():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(30, C, generator=g)
    labels = torch.randint(C, (30,), generator=g)
    labels[:5] = 4
    logits[labels == 4, 4] = -100.0  # class 4 never predicted
    sums, counts = class_sums(*upload_all(logits, labels), C)
    w = dimension_weights([768])
    z = aggregate(sums[None], counts[None], w)
    available = has_teacher(z[0])
    assert not bool(available[4]) and torch.equal(z[0, 4], torch.zeros(C))
    student = torch.randn(5, C, generator=g, requires_grad=True)
    loss = kd_loss(student, z[0], torch.full((5,), 4), available, temperature=3.5)
    assert float(loss.detach()) == 0.0


def test_kd_is_nonnegative_and_zero_exactly_for_logits_equal_up_to_a_constant():
    g = torch.Generator().manual_seed(3)
    teacher = torch.randn(C, C, generator=g)
    labels = torch.arange(C).repeat(3)
    available = torch.ones(C, dtype=torch.bool)
    for tau in (1.5, 3.5, 5.0):
        for _ in range(5):
            student = torch.randn(len(labels), C, generator=g)
            assert float(kd_loss(student, teacher, labels, available, tau)) > 0
        shifted = teacher[labels] + torch.randn(len(labels), 1, generator=g)  # + a constant
        assert float(kd_loss(shifted, teacher, labels, available, tau)) == pytest.approx(
            0, abs=1e-6
        )
        per_class = kd_loss(shifted, teacher, labels, available, tau, "mean_over_classes")
        assert float(per_class) == pytest.approx(0, abs=1e-6)


@pytest.mark.parametrize("tau", [1.0, 1.5, 3.5, 5.0])
def test_kd_gradient_is_tau_squared_times_one_over_tau_times_the_probability_gap(tau):
    """The τ² factor (Hinton et al.) keeps the gradient's scale: d/dz of τ²·KL(p_t ‖ p_s)
    is τ²·(1/τ)·(p_s − p_t) per sample (divided by the batch for the mean), p at τ."""
    g = torch.Generator().manual_seed(11)
    teacher = torch.randn(C, C, generator=g, dtype=torch.float64) * 2
    labels = torch.arange(C).repeat(2)
    student = torch.randn(len(labels), C, generator=g, dtype=torch.float64, requires_grad=True)
    available = torch.ones(C, dtype=torch.bool)
    kd_loss(student, teacher, labels, available, tau).backward()
    gap = torch.softmax(student.detach() / tau, 1) - torch.softmax(teacher[labels] / tau, 1)
    expected = tau * tau * (1 / tau) * gap / len(labels)
    assert torch.allclose(student.grad, expected, atol=1e-12)


def test_the_tau_squared_factor_is_a_knob():
    """Eq. 9 is lost: the τ² factor is our default (``tau_squared``); without it the KD term
    is the same KL divided by τ²."""
    g = torch.Generator().manual_seed(5)
    teacher = torch.randn(C, C, generator=g, dtype=torch.float64)
    labels = torch.arange(C).repeat(2)
    student = torch.randn(len(labels), C, generator=g, dtype=torch.float64)
    available = torch.ones(C, dtype=torch.bool)
    with_factor = kd_loss(student, teacher, labels, available, 3.5)
    without = kd_loss(student, teacher, labels, available, 3.5, tau_squared=False)
    assert float(without) > 0
    assert torch.allclose(with_factor, without * 3.5**2, rtol=1e-12)


def test_only_correct_samples_are_uploaded_unless_the_ablation_asks():
    logits = torch.tensor([[3.0, 0.0], [0.0, 3.0], [3.0, 0.0], [0.0, 1.0]])
    labels = torch.tensor([0, 0, 0, 1])
    assert correct(logits, labels).tolist() == [True, False, True, True]
    kept, kept_labels = upload_all(logits, labels)
    assert kept_labels.tolist() == [0, 0, 1] and torch.equal(kept[1], logits[2])
    means, counts = upload_average(logits, labels, 2)
    assert counts.tolist() == [2.0, 1.0] and torch.equal(means[0], torch.tensor([3.0, 0.0]))
    everything, _ = upload_all(logits, labels, correct_only=False)
    assert len(everything) == 4


def test_scalar_counts_follow_the_papers_formulas():
    """App. Table 9: all-upload 11 (C = 10) / 101 (C = 100) scalars a sample; average-upload
    110 / 10,100 a client; the download is C × C."""
    assert upload_scalars("all", 1, 10) == 11 and upload_scalars("all", 1, 100) == 101
    assert upload_scalars("all", 47_000, 10) == 517_000
    assert upload_scalars("average", 47_000, 10) == 110
    assert upload_scalars("average", 0, 100) == 10_100
    assert download_scalars(10) == 100
    with pytest.raises(ValueError, match="allowed: all, average"):
        upload_scalars("some", 1, 10)
