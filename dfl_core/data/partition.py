"""Splitting one dataset's samples among m clients.

Every function takes the labels as an ``(N,)`` integer array and an explicit
``np.random.Generator``, and returns a list of m disjoint, sorted index arrays.

* ``iid``: a random equal split.
* ``dirichlet`` (label skew, :func:`dirichlet`), method ``"prior"`` (default): the partition of FedDyn (Acar et al.,
  2021) that DisPFL (Dai et al., 2022) reuses (``partition_data(..., "dir")`` in the rong-dai/DisPFL code);
  each client draws its class mix ~ Dir(alpha), as in Hsu et al. (2019), whom DFedSAM §5 cites; method ``"per-class"``:
  each class split among the clients (the NIID-Bench-style split many FL codes attribute to Hsu et al.).
* ``shards``: the pathological split of McMahan et al. (2017): sort by label, cut into ``m * shards_per_client``
  shards, deal each client that many shards (DFedSAM App. C: 200 shards, 100 clients, 2 each; DFedAvgM §6: 40 shards
  of 1500 MNIST images, 20 clients, 2 each).

:func:`split_like` gives every client a test set with its own training class proportions, as DisPFL does.
"""

from __future__ import annotations

import math

import numpy as np

from .datasets import DataError

__all__ = ["PARTITIONS", "DIRICHLET_METHODS", "partition", "iid", "dirichlet", "shards", "split_like"]

PARTITIONS: dict[str, str] = {
    "iid": "random equal split",
    "dirichlet": "label skew: each client's class mix ~ Dir(alpha) (alpha=0: one class per client; "
    "method 'prior' = per-client draw, equal sizes (Hsu et al. 2019; FedDyn/DisPFL), 'per-class' = per-class split, "
    "unequal sizes)",
    "shards": "pathological: sort by label, deal shards_per_client label-sorted shards to each client "
    "(McMahan et al. 2017)",
}
DIRICHLET_METHODS = ("prior", "per-class")
# The per-class split can leave a client empty (small alpha, many clients); it is redrawn
# this many times, as NIID-Bench's min_size loop does, before giving up.
_PER_CLASS_ATTEMPTS = 100
# A renormalized prior with less mass than this on the classes left is redrawn
# (see _sample_by_priors): dividing by it would lose all precision.
_DEAD_MASS = 1e-200


# ---------------------------------------------------------------------------------- Argument checks
def _check_labels(labels) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise DataError(f"labels must be a non-empty 1-D array; got shape {labels.shape}")
    if not np.issubdtype(labels.dtype, np.integer):
        raise DataError(f"labels must be integers; got dtype {labels.dtype}")
    if labels.min() < 0:
        raise DataError(f"labels must be >= 0; got {int(labels.min())}")
    return labels.astype(np.int64, copy=False)


def _check_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"{name}={value!r} must be a positive integer")
    return int(value)


def _check_m(m, n: int) -> int:
    m = _check_count(m, "m (number of clients)")
    if m > n:
        raise DataError(f"m={m} clients but only N={n} samples: every client needs at least one sample")
    return m


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise DataError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)); got {type(rng).__name__}")
    return rng


def _equal_size(n: int, m: int, client_size, name: str = "client_size") -> int:
    """Samples per client: ``client_size`` if given, else ``N // m``; each client must get one."""
    if client_size is None:
        if n // m == 0:
            raise DataError(f"m={m} clients but only N={n} samples: every client needs at least one sample")
        return n // m
    size = _check_count(client_size, name)
    if size * m > n:
        raise DataError(f"{name}={size} x m={m} clients = {size * m} samples, but only N={n} exist")
    return size


# ------------------------------- The shared sampler: draw each client's labels from its class prior
def _fallback_priors(
    count: int, pool: np.ndarray, rng: np.random.Generator, fallback_alpha: float | None
) -> np.ndarray:
    """Fresh priors (count, C) over the classes still in ``pool``."""
    avail = pool > 0
    priors = np.zeros((count, len(pool)))
    if fallback_alpha is None:  # no preference: take uniformly random remaining samples
        priors[:] = pool
    elif fallback_alpha == 0:  # the alpha -> 0 limit of Dir: one-hot on a random class left
        priors[np.arange(count), rng.choice(np.flatnonzero(avail), size=count)] = 1.0
    else:
        priors[:, avail] = rng.dirichlet(np.full(avail.sum(), fallback_alpha), size=count)
    return priors


def _feddyn_order(sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The client served at each step of FedDyn's loop: a uniform client, skipped once full.

    That is an i.i.d. uniform stream of client ids in which only the first
    ``sizes[i]`` occurrences of client i are kept; generated in chunks.
    """
    m, total = len(sizes), int(sizes.sum())
    have = np.zeros(m, dtype=np.int64)
    kept = []
    while (have < sizes).any():
        chunk = rng.integers(m, size=max(total, 1024))
        order = np.argsort(chunk, kind="stable")
        first = np.searchsorted(chunk[order], np.arange(m))  # where each client's run starts
        rank = np.empty_like(chunk)
        rank[order] = np.arange(len(chunk)) - first[chunk[order]]  # occurrence number within the chunk
        keep = have[chunk] + rank < sizes[chunk]
        kept.append(chunk[keep])
        have += np.bincount(chunk[keep], minlength=m)
    return np.concatenate(kept)


def _sample_by_priors(
    labels: np.ndarray, priors: np.ndarray, sizes: np.ndarray, rng: np.random.Generator, fallback_alpha: float | None
) -> list[np.ndarray]:
    """Give client i ``sizes[i]`` samples whose labels are drawn from ``priors[i]``, without replacement.

    This is FedDyn's loop (Acar et al. 2021, ``utils_dataset.py``; DisPFL's ``dir`` split): pick a uniformly random
    client that still needs samples, draw a class from its prior, and if that class is used up, draw again, i.e.
    draw from the prior renormalized over the classes left. Between two exhaustions the draws are i.i.d., so they
    are made in bulk (inverse CDF) and cut at the first draw of a class past its pool; that draw is redone with the
    class removed. This is exact, with at most C + 1 bulk rounds.

    A client whose prior has (numerically) no mass left on the remaining classes gets a fresh prior over them:
    ``Dir(fallback_alpha)`` (what renormalizing a Dirichlet over a subset gives, by its neutrality), one-hot for 0,
    or the remaining pool's proportions for ``None``. FedDyn's loop would spin forever here.
    """
    m, num_classes = priors.shape
    sizes = sizes.astype(np.int64)
    pool = np.bincount(labels, minlength=num_classes)  # (C,) samples left per class
    grants = np.zeros((m, num_classes), dtype=np.int64)  # (m, C) class counts given so far
    priors = np.where(np.isfinite(priors) & (priors > 0), priors, 0.0)
    steps = _feddyn_order(sizes, rng)  # (T,) the client served at each step
    pos = 0
    while pos < len(steps):
        weights = priors * (pool > 0)  # (m, C) prior restricted to the classes left
        dead = (grants.sum(1) < sizes) & (weights.sum(1) < _DEAD_MASS)
        if dead.any():
            priors[dead] = _fallback_priors(int(dead.sum()), pool, rng, fallback_alpha)
            weights = priors * (pool > 0)
        cdf = np.cumsum(weights, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):  # rows of finished clients may be all zero
            cdf /= cdf[:, -1:]  # last column exactly 1, so a draw never falls off the end
        served = steps[pos:]  # (T',)
        u = rng.random(len(served))
        drawn = (cdf[served] <= u[:, None]).sum(1)  # (T',) inverse CDF: first class with cdf > u
        cut = len(served)
        for c in np.flatnonzero(np.bincount(drawn, minlength=num_classes) > pool):
            cut = min(cut, int(np.flatnonzero(drawn == c)[pool[c]]))  # the draw one past the pool
        np.add.at(grants, (served[:cut], drawn[:cut]), 1)
        pool -= np.bincount(drawn[:cut], minlength=num_classes)
        pos += cut

    # Hand out actual samples: a random permutation within each class, dealt in client order.
    by_class = np.argsort(labels, kind="stable")
    class_start = np.concatenate([[0], np.cumsum(np.bincount(labels, minlength=num_classes))])
    owner = np.full(len(labels), -1, dtype=np.int64)
    for c in range(num_classes):
        members = rng.permutation(by_class[class_start[c] : class_start[c + 1]])
        total = int(grants[:, c].sum())
        owner[members[:total]] = np.repeat(np.arange(m), grants[:, c])
    taken = np.flatnonzero(owner >= 0)  # ascending
    taken = taken[np.argsort(owner[taken], kind="stable")]  # grouped by client, still ascending within
    return np.split(taken, np.cumsum(sizes)[:-1])


# ------------------------------------------------------------------------------------------ Schemes
def iid(labels, m: int, rng: np.random.Generator, *, client_size: int | None = None) -> list[np.ndarray]:
    """A random split into m parts whose sizes differ by at most 1 (or ``client_size`` each)."""
    labels, rng = _check_labels(labels), _check_rng(rng)
    m = _check_m(m, len(labels))
    perm = rng.permutation(len(labels))
    if client_size is not None:
        size = _equal_size(len(labels), m, client_size)
        return [np.sort(part) for part in perm[: m * size].reshape(m, size)]
    return [np.sort(part) for part in np.array_split(perm, m)]


def dirichlet(
    labels, m: int, alpha: float, rng: np.random.Generator, method: str = "prior", *, client_size: int | None = None
) -> list[np.ndarray]:
    """Label-skewed split: client class mixes drawn from ``Dir(alpha * 1)``.

    ``method="prior"`` (FedDyn, Acar et al. 2021; DisPFL): every client gets ``N // m`` samples (or
    ``client_size``); client i draws ``p_i ~ Dir(alpha 1_C)`` and then the label of each of its samples from
    ``p_i``, renormalized over the classes not yet used up.

    ``method="per-class"`` (often attributed to Hsu et al. 2019, who draw per client, as "prior" does): each class
    is split among the clients with
    proportions ``~ Dir(alpha 1_m)``; sizes differ. A draw that leaves a client
    empty is redrawn (up to 100 times, like NIID-Bench's ``min_size`` loop).

    ``alpha = 0`` is the limit alpha -> 0: one class per client ("prior": after a seeded shuffle of the classes
    client i gets class ``i mod C``, and moves to one random class left if its class runs out; "per-class": each class
    goes whole to one client, dealt round-robin, so it needs m <= C).
    """
    labels, rng = _check_labels(labels), _check_rng(rng)
    m = _check_m(m, len(labels))
    try:
        valid = math.isfinite(float(alpha)) and float(alpha) >= 0
    except (TypeError, ValueError):  # None, or not a number
        valid = False
    if not valid:
        raise DataError(
            f"the dirichlet partition needs alpha, a finite number >= 0 (0 = one class per client); got alpha={alpha!r}"
        )
    alpha = float(alpha)
    if method not in DIRICHLET_METHODS:
        raise DataError(f"unknown dirichlet method {method!r}; allowed: {', '.join(DIRICHLET_METHODS)}")
    classes, dense = np.unique(labels, return_inverse=True)  # Dir over the classes present only
    num_classes = len(classes)
    if method == "prior":
        size = _equal_size(len(labels), m, client_size)
        if alpha == 0:
            priors = np.zeros((m, num_classes))
            priors[np.arange(m), rng.permutation(num_classes)[np.arange(m) % num_classes]] = 1.0
        else:
            priors = rng.dirichlet(np.full(num_classes, alpha), size=m)
        return _sample_by_priors(dense, priors, np.full(m, size), rng, fallback_alpha=alpha)

    if client_size is not None:
        raise DataError(
            f"client_size={client_size!r} is only for equal-size splits (iid, dirichlet 'prior'); "
            "the 'per-class' method's client sizes are random"
        )
    members = [rng.permutation(np.flatnonzero(dense == c)) for c in range(num_classes)]
    if alpha == 0:
        if m > num_classes:
            raise DataError(
                f"dirichlet method 'per-class' with alpha=0 gives each class to one client, so m={m} "
                f"clients cannot all get data from N={len(labels)} samples of {num_classes} classes; "
                "use m <= number of classes or method 'prior'"
            )
        owner_of_class = np.empty(num_classes, dtype=np.int64)
        owner_of_class[rng.permutation(num_classes)] = np.arange(num_classes) % m
        parts = [np.concatenate([members[c] for c in np.flatnonzero(owner_of_class == i)]) for i in range(m)]
        return [np.sort(p) for p in parts]
    for _ in range(_PER_CLASS_ATTEMPTS):
        pieces = [[] for _ in range(m)]
        for idx in members:
            proportions = rng.dirichlet(np.full(m, alpha))
            cuts = (np.cumsum(proportions) * len(idx)).astype(np.int64)[:-1]
            for i, piece in enumerate(np.split(idx, cuts)):
                pieces[i].append(piece)
        parts = [np.sort(np.concatenate(p)) for p in pieces]
        if min(len(p) for p in parts) > 0:
            return parts
    raise DataError(
        f"dirichlet method 'per-class' with alpha={alpha} left some of the m={m} clients without "
        f"samples (N={len(labels)}) in {_PER_CLASS_ATTEMPTS} draws; use a larger alpha, fewer clients "
        "or method 'prior'"
    )


def shards(labels, m: int, shards_per_client: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Pathological split (McMahan et al. 2017): sort by label, cut, deal ``shards_per_client`` shards each.

    The ``m * shards_per_client`` shards differ in size by at most one sample, so
    every sample is used. A shard straddles two classes when the class sizes are
    not multiples of the shard size, as with MNIST in the original paper.
    """
    labels, rng = _check_labels(labels), _check_rng(rng)
    m = _check_m(m, len(labels))
    k = _check_count(shards_per_client, "shards_per_client")
    if m * k > len(labels):
        raise DataError(
            f"m={m} clients x shards_per_client={k} = {m * k} shards, but only N={len(labels)} samples to cut"
        )
    pieces = np.array_split(np.argsort(labels, kind="stable"), m * k)
    dealt = rng.permutation(m * k).reshape(m, k)
    return [np.sort(np.concatenate([pieces[j] for j in row])) for row in dealt]


def partition(
    labels,
    m: int,
    scheme: str,
    *,
    rng: np.random.Generator,
    alpha: float | None = None,
    shards_per_client: int = 2,
    dirichlet_method: str = "prior",
    client_size: int | None = None,
) -> list[np.ndarray]:
    """Split ``labels``' indices among m clients by ``scheme`` (a key of :data:`PARTITIONS`).

    ``alpha`` and ``dirichlet_method`` are read only by "dirichlet", ``shards_per_client`` only by "shards",
    ``client_size`` by "iid" and "dirichlet"/"prior" (default: ``N // m``).
    """
    if scheme == "iid":
        return iid(labels, m, rng, client_size=client_size)
    if scheme == "dirichlet":
        return dirichlet(labels, m, alpha, rng, method=dirichlet_method, client_size=client_size)
    if scheme == "shards":
        if client_size is not None:
            raise DataError(f"client_size={client_size!r} does not apply to 'shards': sizes are set by the shards")
        return shards(labels, m, shards_per_client, rng)
    raise DataError(f"unknown partition scheme {scheme!r}; allowed: {', '.join(PARTITIONS)}")


def split_like(
    train_parts: list[np.ndarray],
    train_labels,
    test_labels,
    rng: np.random.Generator,
    test_size_per_client: int | None = None,
) -> list[np.ndarray]:
    """Per-client test sets drawn from the test split with each client's own train class proportions.

    As DisPFL's code does (rong-dai/DisPFL, ``partition_data``): client i's test labels are drawn from its train label
    histogram (normalized), without replacement, by the same sampler as the "prior" Dirichlet split. Sizes default
    to ``len(test_labels) // m``; the sets are disjoint. A client whose classes have run out in the test pool takes
    uniformly random remaining test samples.
    """
    train_labels, test_labels, rng = _check_labels(train_labels), _check_labels(test_labels), _check_rng(rng)
    m = len(train_parts)
    if m == 0:
        raise DataError("train_parts is empty: need at least one client")
    if test_size_per_client is None and len(test_labels) < m:
        raise DataError(
            f"m={m} clients but only {len(test_labels)} test samples: every client needs at least one "
            "(give a larger test_size=N, or leave it unset for the whole test split)"
        )
    size = _equal_size(len(test_labels), m, test_size_per_client, "test_size_per_client")
    num_classes = int(max(train_labels.max(), test_labels.max())) + 1
    priors = np.zeros((m, num_classes))
    for i, part in enumerate(train_parts):
        part = np.asarray(part, dtype=np.int64)
        if part.size == 0:
            raise DataError(f"client {i} has no training samples, so it has no class proportions to copy")
        priors[i] = np.bincount(train_labels[part], minlength=num_classes) / part.size
    return _sample_by_priors(test_labels, priors, np.full(m, size), rng, fallback_alpha=None)
