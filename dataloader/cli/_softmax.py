"""Multinomial logistic regression in NumPy: softmax + cross-entropy, minibatch SGD or Adam.

The model of ``python -m dataloader demo``: logits ``z = x @ W + b`` with
``W`` of shape (d, C) and ``b`` of shape (C,), probabilities ``softmax(z)``,
loss the mean cross-entropy plus ``weight_decay / 2 * ||W||^2``.  The
gradient of the mean cross-entropy with respect to ``z`` is
``(softmax(z) - onehot(y)) / B``.  Features should be standardised (the demo
does it with the training split's mean and standard deviation).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SoftmaxRegression"]

OPTIMIZERS = ("adam", "sgd")


class SoftmaxRegression:
    """A linear classifier trained one minibatch at a time.

    Args:
        d: features per row (>= 1).
        classes: number of classes C (>= 2); labels are ints in ``[0, C)``.
        lr: step size (Adam's alpha, or SGD's learning rate).
        optimizer: ``"adam"`` (beta1 0.9, beta2 0.999, eps 1e-8) or ``"sgd"``.
        weight_decay: L2 penalty on ``W``.

    Not thread-safe: call ``step`` from one thread.
    """

    def __init__(
        self,
        d: int,
        classes: int,
        lr: float = 0.01,
        optimizer: str = "adam",
        weight_decay: float = 1e-4,
    ) -> None:
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"{optimizer=} must be one of {OPTIMIZERS}")
        if d < 1 or classes < 2:
            raise ValueError(f"need d >= 1 and classes >= 2, got {d=} {classes=}")
        if not lr > 0:
            raise ValueError(f"{lr=} must be > 0")
        self.w = np.zeros((d, classes))
        self.b = np.zeros(classes)
        self.lr = lr
        self.optimizer = optimizer
        self.weight_decay = weight_decay
        self._t = 0
        self._m = [np.zeros_like(self.w), np.zeros_like(self.b)]
        self._v = [np.zeros_like(self.w), np.zeros_like(self.b)]

    def logits(self, x: np.ndarray) -> np.ndarray:
        """``x @ W + b`` for x of shape (B, d); shape (B, C)."""
        return x @ self.w + self.b

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The most likely class of each row, int64 of shape (B,)."""
        return np.argmax(self.logits(x), axis=1)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One optimiser step on a minibatch; returns its mean cross-entropy (before the step).

        Args:
            x: float64 of shape (B, d).
            y: integer class ids of shape (B,).
        """
        z = self.logits(x)
        z -= z.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(z).sum(axis=1))
        rows = np.arange(len(y))
        loss = float(np.mean(log_norm - z[rows, y]))
        grad_z = np.exp(z - log_norm[:, None])
        grad_z[rows, y] -= 1.0
        grad_z /= len(y)
        grads = [x.T @ grad_z + self.weight_decay * self.w, grad_z.sum(axis=0)]
        self._apply(grads)
        return loss

    def _apply(self, grads: list[np.ndarray]) -> None:
        params = [self.w, self.b]
        if self.optimizer == "sgd":
            for p, g in zip(params, grads, strict=True):
                p -= self.lr * g
            return
        self._t += 1
        b1, b2, eps = 0.9, 0.999, 1e-8
        for p, g, m, v in zip(params, grads, self._m, self._v, strict=True):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            m_hat = m / (1 - b1**self._t)
            v_hat = v / (1 - b2**self._t)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + eps)
