r"""Train a small Keras MLP on scikit-learn's digits across the Workers of a TFJob.

Every Worker runs this same script. `tf.distribute.MultiWorkerMirroredStrategy` reads the
cluster and this process's place in it from TF_CONFIG, which the operator injects; each step
the Workers' gradients are all-reduced over gRPC, so every Worker holds the same weights.
Worker 0 (the chief, as the job has no Chief) evaluates on a held-out split and prints
`metric accuracy=<value>`.

Run it locally as two Workers on 127.0.0.1 (no cluster needed):

    cfg() { echo '{"cluster": {"worker": ["127.0.0.1:23456", "127.0.0.1:23457"]},'\
        '"task": {"type": "worker", "index": '$1'}}'; }
    TF_CONFIG="$(cfg 0)" python3 tf_digits.py & TF_CONFIG="$(cfg 1)" python3 tf_digits.py

Without TF_CONFIG it trains alone, as a single Worker.

With --data the digits come from that digits.csv.gz (or the directory holding it), such as a
mounted volume, instead of scikit-learn's bundled copy. With --model-uri (default: $MODEL_URI)
the chief also exports the trained network as a TensorFlow SavedModel, as TF Serving loads it,
and uploads it there (digits_store.py says how the store is reached). Its signature
`serving_default` takes `pixels`, float32 [N, 64]: the 8x8 pixels of 0-16 divided by 16, as
trained; it returns `probabilities`, float32 [N, 10], the softmax over the digits 0-9. Give the
URI a version as its last part, s3://models/tf-digits/1/, as TF Serving's model base path wants.
"""

import argparse
import hashlib
import os
import time

# TensorFlow's C++ start-up chatter would bury the progress lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

# The data set and model storage every digits example shares, beside this script.
from digits_store import (  # noqa: E402
    add_arguments,
    export_model,
    fail,
    load_digits_xy,
    parse_checked,
    positive,
)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=positive(int), default=15)
    p.add_argument("--learning-rate", type=positive(float), default=0.01)
    p.add_argument("--hidden", type=positive(int), default=128, help="units per hidden layer")
    p.add_argument("--hidden-layers", type=positive(int), default=1)
    p.add_argument("--batch-size", type=positive(int), default=64, help="global, all Workers")
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p)
    return parse_checked(p)


def load_data(path=None):
    """The same deterministic split on every Worker: 1,347 digits to train on, 450 held out."""
    x, y = load_digits_xy(path)
    x = (x / 16.0).astype("float32")
    return train_test_split(x, y.astype("int64"), test_size=0.25, random_state=0, stratify=y)


def is_chief(resolver):
    # As TensorFlow's multi-worker guide decides it: the Chief if there is one, else worker 0.
    if resolver.task_type in (None, "chief"):
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def build_model(args):
    layers = [tf.keras.Input((64,))]
    for _ in range(args.hidden_layers):
        layers.append(tf.keras.layers.Dense(args.hidden, activation="relu"))
    layers.append(tf.keras.layers.Dense(10))
    return tf.keras.Sequential(layers)


def weights_digest(model):
    """Equal on every Worker when the all-reduce kept them in step."""
    data = b"".join(np.ascontiguousarray(w).tobytes() for w in model.get_weights())
    return hashlib.sha256(data).hexdigest()[:16]


class ServedMLP(tf.Module):
    """The trained dense layers, ReLU between them, as a SavedModel with no Keras inside."""

    def __init__(self, weights):
        super().__init__()
        # [kernel, bias, kernel, bias, ...], as Keras's get_weights() lists a Sequential's.
        self.weights = [tf.Variable(w, trainable=False) for w in weights]

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32, name="pixels")])
    def serve(self, pixels):
        x, layers = pixels, list(zip(self.weights[::2], self.weights[1::2], strict=True))
        for kernel, bias in layers[:-1]:
            x = tf.nn.relu(tf.matmul(x, kernel) + bias)
        kernel, bias = layers[-1]
        return {"probabilities": tf.nn.softmax(tf.matmul(x, kernel) + bias)}


def export_saved_model(weights, uri):
    """The chief's export: from plain copies of the weights, so no other Worker takes part
    (MultiWorkerMirroredStrategy's own saving would need every Worker to save with it)."""

    def write(directory):
        module = ServedMLP(weights)
        tf.saved_model.save(module, directory, signatures={"serving_default": module.serve})

    export_model(uri, write)


def make_train_step(strategy, model, optimizer, global_batch):
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            per_example = loss_fn(y, model(x, training=True))
            # Scaled by the global batch, so the all-reduced sum is the global mean.
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        # Under the strategy this all-reduces the gradients before applying them.
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(iterator):
        x, y = next(iterator)
        losses = strategy.run(replica_step, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return train_step


def distributed_batches(strategy, x, y, args):
    """An endless iterator of this Worker's batches, each its part of a global batch."""

    def dataset_fn(ctx):
        # Each Worker keeps its own shard of the training set, as the guide's input_context does.
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        batch = ctx.get_per_replica_batch_size(args.batch_size)
        return ds.shuffle(len(x), seed=args.seed).repeat().batch(batch)

    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def main():
    args = parse_args()
    started = time.monotonic()
    tf.keras.utils.set_random_seed(args.seed)
    # Keras 3's model.fit cannot drive this strategy (keras-team/keras#20585), so this is the
    # custom training loop of TensorFlow's multi-worker guide.
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver, replicas = strategy.cluster_resolver, strategy.num_replicas_in_sync
    name = f"{resolver.task_type or 'worker'} {resolver.task_id or 0}"
    print(f"{name}: {replicas} replica(s) in sync", flush=True)
    if args.batch_size % replicas:
        fail(
            f"--batch-size {args.batch_size} does not split over {replicas} replicas",
            f"pass a multiple of {replicas}",
        )

    x_train, x_test, y_train, y_test = load_data(args.data)
    batches = distributed_batches(strategy, x_train, y_train, args)
    with strategy.scope():
        # Created in scope, the variables are mirrored: initialised alike and updated together.
        model = build_model(args)
        optimizer = tf.keras.optimizers.Adam(args.learning_rate)
    train_step = make_train_step(strategy, model, optimizer, args.batch_size)

    # Every Worker must run the same number of steps, or the all-reduce waits forever.
    steps = max(1, len(x_train) // args.batch_size)
    for epoch in range(1, args.epochs + 1):
        total = sum(float(train_step(batches)) for _ in range(steps))
        print(f"{name}: epoch {epoch}/{args.epochs} loss {total / steps:.4f}", flush=True)

    print(f"{name}: weights sha256 {weights_digest(model)}", flush=True)
    if is_chief(resolver):
        predicted = np.argmax(model(x_test, training=False).numpy(), axis=1)
        accuracy = float(np.mean(predicted == y_test))
        print(f"test accuracy {accuracy:.4f} ({len(y_test)} held-out digits)")
        print(f"metric accuracy={accuracy:.4f}")
        export_saved_model(model.get_weights(), args.model_uri)
    print(f"{name}: done in {time.monotonic() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()
