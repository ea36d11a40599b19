"""A JAX loop over epochs whose last batch is short (100 samples, batch 32: 32, 32, 32, 4), as
jax's own examples and most hand-written loops feed data: the short batch is a new shape, so
jax.jit traces and compiles the step again in the middle of the run, once."""

import argparse

import jax
import jax.numpy as jnp

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=50)
args = p.parse_args()

xs = jax.random.normal(jax.random.PRNGKey(0), (100, 16))
ys = xs[:, :1] * 2.0
w = jnp.zeros((16, 1))


def loss_fn(w, x, y):
    return ((x @ w - y) ** 2).mean()


@jax.jit
def update(w, x, y):
    return w - 0.1 * jax.grad(loss_fn)(w, x, y)


for epoch in range(args.epochs):
    for i in range(0, 100, 32):
        w = update(w, xs[i:i + 32], ys[i:i + 32])
print("done", float(loss_fn(w, xs, ys)))
