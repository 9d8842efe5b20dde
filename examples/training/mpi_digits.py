"""Train a softmax classifier on scikit-learn's digits, data-parallel over an MPIJob's ranks.

mpirun starts one process per slot on the MPIJob's Workers; each is an MPI rank (mpi4py).
Every rank takes its own shard of the training rows, and each step the ranks sum their
gradients with MPI's all-reduce, so every rank takes the same step and holds the same model.
Each rank prints where it ran; rank 0 evaluates on a held-out split and prints
`metric accuracy=<value>`.

Run it locally on two ranks (no cluster needed):

    mpirun -np 2 python3 mpi_digits.py

With --data the digits come from that digits.csv.gz (or the directory holding it), such as a
mounted volume, instead of scikit-learn's bundled copy. With --model-uri (default: $MODEL_URI)
rank 0 saves weights.npz (numpy: `weights`, 64x10, and `bias`, 10; the logits are
pixels / 16 @ weights + bias) and uploads it there (digits_store.py says how the store is
reached).
"""

import argparse
import os
import socket

import numpy as np
from mpi4py import MPI
from sklearn.model_selection import train_test_split

# The data set and model storage every digits example shares, beside this script.
from digits_store import add_arguments, export_model, load_digits_xy, parse_checked, positive


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=positive(int), default=300, help="gradient steps")
    p.add_argument("--learning-rate", type=positive(float), default=0.5)
    add_arguments(p)
    return parse_checked(p)


def shard(comm, path):
    """This rank's training rows, and the whole held-out split (the same on every rank)."""
    x, y = load_digits_xy(path)
    x_train, x_test, y_train, y_test = train_test_split(
        x / 16.0, y, test_size=0.25, random_state=0, stratify=y
    )
    rows = slice(comm.rank, None, comm.size)
    return x_train[rows], y_train[rows], len(y_train), x_test, y_test


def softmax(logits):
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def train(comm, x, y, total_rows, steps, learning_rate):
    """Full-batch gradient descent whose gradient is the sum of every rank's."""
    classes = 10
    weights = np.zeros((x.shape[1] + 1, classes))
    x = np.hstack([x, np.ones((len(x), 1))])
    onehot = np.eye(classes)[y]
    gradient = np.empty_like(weights)
    for _ in range(steps):
        local = x.T @ (softmax(x @ weights) - onehot)
        comm.Allreduce(local, gradient, op=MPI.SUM)
        weights -= learning_rate * gradient / total_rows
    return weights


def accuracy(weights, x, y):
    x = np.hstack([x, np.ones((len(x), 1))])
    return float(np.mean(np.argmax(x @ weights, axis=1) == y))


def write_weights(weights, directory):
    # The last row multiplies the constant 1 the training appends to each digit: the bias.
    np.savez(os.path.join(directory, "weights.npz"), weights=weights[:-1], bias=weights[-1])


def main():
    args = parse_args()
    comm = MPI.COMM_WORLD
    x, y, total_rows, x_test, y_test = shard(comm, args.data)
    print(f"rank {comm.rank} of {comm.size} on {socket.gethostname()}: {len(y)} rows", flush=True)
    weights = train(comm, x, y, total_rows, args.steps, args.learning_rate)
    # Every rank took the same steps: the models agree to the last bit.
    first = comm.bcast(weights if comm.rank == 0 else None, root=0)
    assert np.array_equal(first, weights), f"rank {comm.rank} diverged from rank 0"
    if comm.rank == 0:
        print(f"metric accuracy={accuracy(weights, x_test, y_test):.4f}", flush=True)
        export_model(args.model_uri, lambda out: write_weights(weights, out))


if __name__ == "__main__":
    main()
