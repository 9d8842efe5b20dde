"""Train a small MLP on scikit-learn's digits with data parallelism across a JAXJob's Workers.

Every Worker runs this same script and joins `jax.distributed` from the environment the
operator injects: COORDINATOR_ADDRESS and COORDINATOR_PORT (Worker 0, which hosts the
coordinator), NUM_PROCESSES and PROCESS_ID. Each process trains on its own shard of the data;
a `shard_map` over a mesh of every process's CPU averages the gradients with `pmean` (gloo
collectives over TCP), so every process applies the same update and holds the same weights.
Process 0 evaluates on a held-out split and prints `metric accuracy=<value>`.

Run it locally as two processes on 127.0.0.1 (no cluster needed):

    export COORDINATOR_ADDRESS=127.0.0.1 COORDINATOR_PORT=23466 NUM_PROCESSES=2
    PROCESS_ID=0 python3 jax_digits.py & PROCESS_ID=1 python3 jax_digits.py

Without those variables it trains alone, in one process.

With --data the digits come from that digits.csv.gz (or the directory holding it), such as a
mounted volume, instead of scikit-learn's bundled copy. With --model-uri (default: $MODEL_URI)
process 0 saves the parameters as params.npz (numpy; w0, b0, w1, b1, ...: input @ w + b, ReLU
between the layers, logits out) and model.json describing them, and uploads both there
(digits_store.py says how the store is reached). The input is the 64 pixels divided by 16.
"""

import argparse
import hashlib
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sklearn.model_selection import train_test_split

# The data set and model storage every digits example shares, beside this script.
from digits_store import add_arguments, export_model, fail, load_digits_xy, parse_checked, positive

ENV = ("COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=positive(int), default=10)
    p.add_argument("--learning-rate", type=positive(float), default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=positive(int), default=64, help="units per hidden layer")
    p.add_argument("--hidden-layers", type=positive(int), default=1)
    p.add_argument("--batch-size", type=positive(int), default=64, help="global, all processes")
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p)
    return parse_checked(p)


def join_cluster():
    """Joins the JAXJob's processes, or stays alone when the operator's variables are absent."""
    present = [name for name in ENV if name in os.environ]
    if not present:
        return
    if len(present) < len(ENV):
        missing = ", ".join(name for name in ENV if name not in os.environ)
        fail(
            f"{', '.join(present)} set, but not {missing}",
            "run this as a JAXJob, which sets all four, or set them all by hand",
        )
    # CPU collectives across processes need an implementation; gloo needs nothing but TCP.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"{os.environ['COORDINATOR_ADDRESS']}:{env_int('COORDINATOR_PORT')}",
        num_processes=env_int("NUM_PROCESSES"),
        process_id=env_int("PROCESS_ID"),
    )


def env_int(name):
    try:
        return int(os.environ[name])
    except ValueError:
        fail(
            f"{name}={os.environ[name]!r} is not a whole number",
            "the operator sets it; when running by hand, set it as the JAXJob would",
        )


def load_data(path):
    """The same deterministic split in every process: 1,347 digits to train on, 450 held out."""
    x, y = load_digits_xy(path)
    x = (x / 16.0).astype("float32")
    return train_test_split(x, y.astype("int32"), test_size=0.25, random_state=0, stratify=y)


def init_params(args):
    # The same seed in every process gives the same start, so no broadcast is needed.
    rng = np.random.default_rng(args.seed)
    sizes = [64] + [args.hidden] * args.hidden_layers + [10]
    return [
        (rng.normal(0, np.sqrt(2 / m), (m, n)).astype("float32"), np.zeros(n, "float32"))
        for m, n in zip(sizes[:-1], sizes[1:], strict=True)
    ]


def forward(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def loss_fn(params, x, y):
    logits = forward(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))


def make_train_step(mesh, args):
    def shard_grads(params, x, y):
        # Runs once per process on its part of the global batch; pmean is the all-reduce.
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return jax.lax.pmean(loss, "data"), jax.lax.pmean(grads, "data")

    grads_fn = jax.shard_map(
        shard_grads, mesh=mesh, in_specs=(P(), P("data"), P("data")), out_specs=(P(), P())
    )

    @jax.jit
    def train_step(params, velocity, x, y):
        loss, grads = grads_fn(params, x, y)
        velocity = jax.tree.map(lambda v, g: args.momentum * v + g, velocity, grads)
        params = jax.tree.map(lambda p, v: p - args.learning_rate * v, params, velocity)
        return params, velocity, loss

    return train_step


def local(tree):
    """This process's copy of replicated arrays (other processes' copies are not addressable)."""
    return jax.tree.map(lambda a: np.asarray(a.addressable_data(0)), tree)


def write_params(params, directory):
    """params.npz, and model.json saying how to apply it."""
    arrays = {}
    for i, (w, b) in enumerate(params):
        arrays[f"w{i}"], arrays[f"b{i}"] = w, b
    np.savez(os.path.join(directory, "params.npz"), **arrays)
    model = {
        "input": {"shape": [64], "dtype": "float32", "scale": "pixels (0-16) / 16"},
        "layers": [
            {"weights": f"w{i}", "bias": f"b{i}", "shape": list(w.shape), "activation": "relu"}
            for i, (w, _) in enumerate(params)
        ],
        "output": "logits of the digits 0-9",
    }
    model["layers"][-1]["activation"] = None
    with open(os.path.join(directory, "model.json"), "w") as out:
        json.dump(model, out, indent=2)


def weights_digest(params):
    """Equal in every process when the averaged gradients kept them in step."""
    data = b"".join(a.tobytes() for a in jax.tree.leaves(params))
    return hashlib.sha256(data).hexdigest()[:16]


def train(args, mesh, x_shard, y_shard, name):
    """Trains on this process's shard in step with the others; returns the replicated params."""
    size, rank = jax.process_count(), jax.process_index()
    batch_sharding, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())

    def global_array(sharding, local_data):
        # This process's rows become its part of one array spread over every process.
        return jax.make_array_from_process_local_data(sharding, local_data)

    params = jax.tree.map(lambda a: global_array(replicated, a), init_params(args))
    velocity = jax.tree.map(jnp.zeros_like, params)
    train_step = make_train_step(mesh, args)

    per_process = args.batch_size // size
    # Every process must run the same number of steps, or the all-reduce waits forever.
    steps = len(x_shard) // per_process
    rng = np.random.default_rng(args.seed + rank)
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(x_shard))
        total = 0.0
        for step in range(steps):
            rows = order[step * per_process : (step + 1) * per_process]
            x = global_array(batch_sharding, x_shard[rows])
            y = global_array(batch_sharding, y_shard[rows])
            params, velocity, loss = train_step(params, velocity, x, y)
            total += float(local(loss))
        print(f"{name}: epoch {epoch}/{args.epochs} loss {total / steps:.4f}", flush=True)
    return params


def main():
    args = parse_args()
    join_cluster()
    started = time.monotonic()
    rank, size = jax.process_index(), jax.process_count()
    name = f"process {rank}"
    print(f"{name}: {size} process(es), {jax.device_count()} device(s) in the mesh", flush=True)

    x_train, x_test, y_train, y_test = load_data(args.data)
    # Each process keeps its own shard, trimmed so that all shards have the same length.
    shard_len = len(x_train) // size
    if args.batch_size % size or args.batch_size // size > shard_len:
        fail(
            f"--batch-size {args.batch_size} does not split over {size} processes",
            f"pass a multiple of {size} up to {shard_len * size}",
        )
    x_shard, y_shard = x_train[rank::size][:shard_len], y_train[rank::size][:shard_len]

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    weights = local(train(args, mesh, x_shard, y_shard, name))
    print(f"{name}: weights sha256 {weights_digest(weights)}", flush=True)
    if rank == 0:
        predicted = np.argmax(np.asarray(forward(weights, x_test)), axis=1)
        accuracy = float(np.mean(predicted == y_test))
        print(f"test accuracy {accuracy:.4f} ({len(y_test)} held-out digits)")
        print(f"metric accuracy={accuracy:.4f}")
        export_model(args.model_uri, lambda out: write_params(weights, out))
    print(f"{name}: done in {time.monotonic() - started:.1f}s", flush=True)
    if size > 1:
        # Waits for the others, so the coordinator (process 0) does not vanish under them.
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
