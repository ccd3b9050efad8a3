"""Client vectors in 2-D (FedPCE Figs. 1 and 3): each client's local tensors of a trained run,
projected by PCA and by t-SNE, coloured by the client's group (degradation) and sized by its
level within the group.

Spec keys (figure ``embeddings``): ``vectors`` maps a panel-row title to the prefix of the
client-local tensor names it concatenates (``embedding``; FedBN's ``norm1.`` gives that
layer's γ and β); of the runs ``where`` leaves, the first seed (fold) is drawn. The run's
``config.json`` names its partition and cohort, so the clients of its state are matched to
their partition records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.figure import Figure
from safetensors.numpy import load_file

from fedrepro.geometry import pca_2d, silhouette, tsne_2d
from fedrepro.report import results
from fedrepro.report.panels import empty_panel, finish, panel_grid

__all__ = ["client_levels", "plot_embeddings"]


def client_levels(record: dict[str, Any], counts: list[int]) -> float:
    """How strong a client's degradation is: the noise variance, the jitter factors' distance
    from the identity, −log α of a class-imbalance client's Dirichlet draw, or else the label
    imbalance (1 − normalised entropy of its class counts)."""
    spec = record.get("transform") or {}
    if record.get("alpha") is not None:
        return float(-np.log(record["alpha"]))
    if spec.get("kind") == "fedpce_noise":
        return float(spec["var"])
    if spec.get("kind") == "color_jitter":
        factors = [spec[k] - 1.0 for k in ("brightness", "contrast", "saturation")]
        return float(np.abs([*factors, spec["hue"]]).sum())
    p = np.asarray(counts, float)
    p = p[p > 0] / max(p.sum(), 1.0)
    return float(1.0 - (-(p * np.log(p)).sum()) / np.log(max(len(counts), 2)))


def _clients(manifest: dict[str, Any], run: dict[str, Any]) -> list[tuple[dict, list[int]]]:
    """The partition records (and class counts) of the run's cohort, in the engine's order."""
    config = results.read_metrics(run["files"]["config"]) or {}
    files = {p["id"]: p["file"] for p in manifest.get("partitions", [])}
    part = results.read_metrics(files.get(config.get("partition_id"))) or {"clients": []}
    cohort = config.get("cohort", "all")
    out = []
    for record, counts in zip(part["clients"], part["histogram"]["train"], strict=True):
        if cohort == "all" or bool(record.get("new", False)) == (cohort == "new"):
            out.append((record, counts))
    return out


def _vectors(state: dict[str, np.ndarray], prefix: str, n: int) -> np.ndarray:
    rows = []
    for k in range(n):
        keys = sorted(key for key in state if key.startswith(f"client{k}.{prefix}"))
        rows.append(np.concatenate([state[key].ravel() for key in keys]) if keys else [])
    return np.asarray(rows, dtype=np.float64)


def plot_embeddings(manifest: dict[str, Any]) -> Figure:
    spec = manifest.get("spec", {})
    vectors: dict[str, str] = spec.get("vectors", {"embedding": "embedding"})
    runs = [r for r in manifest.get("runs", []) if "state" in r.get("files", {})]
    runs.sort(key=lambda r: r.get("labels", {}).get("seed", 0))
    fig, axes = panel_grid(len(vectors), 2)
    used = {(i, j) for i in range(len(vectors)) for j in range(2)}
    state_file = runs[0]["files"]["state"] if runs else None
    try:
        state = load_file(state_file) if state_file else None
    except OSError:
        state = None
    if state is None:
        for ax in axes.ravel():
            empty_panel(ax, "no finished run")
        finish(fig, axes, used, manifest)
        return fig
    clients = _clients(manifest, runs[0])
    groups = [str(rec.get("group")) for rec, _ in clients]
    names = list(dict.fromkeys(groups))
    levels = np.array([client_levels(rec, counts) for rec, counts in clients])
    sizes = np.zeros(len(levels))
    for g in names:  # the level's rank within its group: 20 (mildest) to 120 (strongest)
        idx = [i for i, x in enumerate(groups) if x == g]
        ranks = np.argsort(np.argsort(levels[idx]))
        sizes[idx] = 20 + 100 * ranks / max(len(idx) - 1, 1)
    notes = []
    for i, (title, prefix) in enumerate(vectors.items()):
        x = _vectors(state, prefix, len(clients))
        if x.ndim != 2 or x.shape[1] == 0:
            for j in range(2):
                empty_panel(axes[i, j], f"no client tensors {prefix!r}")
            continue
        for j, (method, y) in enumerate((("PCA", pca_2d(x)), ("t-SNE", tsne_2d(x)))):
            ax = axes[i, j]
            for c, g in enumerate(names):
                pick = [k for k, x_ in enumerate(groups) if x_ == g]
                ax.scatter(y[pick, 0], y[pick, 1], s=sizes[pick], color=f"C{c}", alpha=0.7, label=g)
            ax.set_title(f"{title} · {method}", fontsize=9)
            ax.set_xticks([])
            ax.set_yticks([])
        if len(names) > 1 and len(names) < len(groups):
            notes.append(f"{title}: silhouette {silhouette(x, groups):.2f}")
    axes[0, 0].legend(fontsize=7, loc="best")
    finish(fig, axes, used, manifest, "; ".join(notes))
    return fig
