"""A small Gaussian process (RBF kernel, fixed noise) and the acquisition functions the Bayesian
agents use. numpy/scipy only; inputs are short vectors in [0, 1] (a choice per unit, scaled).

Who calls what: :mod:`leap.search.agents.bayes` (expected improvement) and :mod:`leap.search.agents.swift`
(UCB with kappa 2.5, as SWIFT) fit on the trials so far and score random candidates.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["GaussianProcess", "upper_confidence_bound"]


class GaussianProcess:
    """GP regression with an RBF kernel on standardised targets."""

    def __init__(self, lengthscale: float = 1.0, noise: float = 1e-2) -> None:
        self.lengthscale, self.noise = float(lengthscale), float(noise)

    def _k(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return np.exp(-0.5 * d2 / self.lengthscale**2)

    def fit(self, X: np.ndarray, y: np.ndarray) -> GaussianProcess:
        self.X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        self.mean, self.scale = y.mean(), y.std() or 1.0
        K = self._k(self.X, self.X) + self.noise * np.eye(len(self.X))
        self.chol = linalg.cho_factor(K, lower=True)
        self.alpha = linalg.cho_solve(self.chol, (y - self.mean) / self.scale)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        Ks = self._k(np.asarray(X, dtype=float), self.X)
        mu = Ks @ self.alpha
        v = linalg.cho_solve(self.chol, Ks.T)
        var = np.clip(1.0 - (Ks * v.T).sum(-1), 1e-12, None)
        return mu * self.scale + self.mean, np.sqrt(var) * self.scale


def upper_confidence_bound(mu: np.ndarray, sigma: np.ndarray, kappa: float = 2.5) -> np.ndarray:
    return mu + kappa * sigma
