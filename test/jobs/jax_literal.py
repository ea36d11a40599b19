"""A JAX classifier written from scratch, run as a module (`python -m jax_literal`): no flag, no
config, its batch size a plain assignment in the code (`batch_size = 128`) that a generator of
shuffled batches reads, and a jitted update over a list of (w, b) pairs."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np


def init_params(sizes, rng):
    return [(0.1 * rng.randn(m, n).astype(np.float32), np.zeros(n, np.float32)) for m, n in zip(sizes[:-1], sizes[1:])]


def predict(params, x):
    for w, b in params[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = params[-1]
    logits = x @ w + b
    return logits - jax.scipy.special.logsumexp(logits, axis=1, keepdims=True)


def loss(params, batch):
    x, y = batch
    return -jnp.mean(jnp.sum(predict(params, x) * y, axis=1))


@jax.jit
def update(params, batch):
    grads = jax.grad(loss)(params, batch)
    return [(w - 0.05 * dw, b - 0.05 * db) for (w, b), (dw, db) in zip(params, grads)]


def main():
    rng = np.random.RandomState(0)
    images = rng.randn(6000, 64).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[np.argmax(images[:, :10], axis=1)]
    batch_size = 128
    num_batches = len(images) // batch_size

    def batches():
        while True:
            order = rng.permutation(len(images))
            for i in range(num_batches):
                idx = order[i * batch_size:(i + 1) * batch_size]
                yield images[idx], labels[idx]

    params = init_params([64, 256, 10], rng)
    stream = batches()
    for epoch in itertools.count():
        for _ in range(num_batches):
            params = update(params, next(stream))
        print("epoch %d loss %.4f" % (epoch, float(loss(params, (images, labels)))), flush=True)


if __name__ == "__main__":
    main()
