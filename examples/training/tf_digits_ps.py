r"""Train a small MLP on scikit-learn's digits with parameter servers: a Chief, PS and Workers.

TensorFlow 2's parameter-server training: the PS tasks hold the variables, the Workers run the
training steps the Chief (the coordinator) schedules on them, and the Chief evaluates on a
held-out split and prints `metric accuracy=<value>`. Every task runs this same script and reads
its place from TF_CONFIG; PS and Workers serve until they are stopped, so the Chief's end is the
job's, and the Chief also leaves its metric as its container's termination message. Keras 3's
model.fit cannot drive this strategy, so the model is plain TensorFlow: two dense layers and
SGD, its steps `tf.function`s the Workers run.

Run it locally (no cluster needed), one process per task on 127.0.0.1:

    cluster='{"chief": ["127.0.0.1:2220"], "ps": ["127.0.0.1:2221"], "worker": ["127.0.0.1:2222"]}'
    cfg() { echo '{"cluster": '"$cluster"', "task": {"type": "'$1'", "index": 0}}'; }
    for t in ps worker; do TF_CONFIG="$(cfg $t)" python3 tf_digits_ps.py & done
    TF_CONFIG="$(cfg chief)" python3 tf_digits_ps.py

--data and --model-uri are tf_digits.py's: the digits from a digits.csv.gz instead of the bundled
copy, and the Chief's SavedModel (the same serving signature) uploaded to an S3 URI.
"""

import argparse
import json
import os
import socket
import time

# TensorFlow's C++ start-up chatter would bury the progress lines.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from digits_store import add_arguments, fail, parse_checked, positive  # noqa: E402

# The same split of the digits and the same SavedModel as the Workers' example beside it.
from tf_digits import export_saved_model, load_data  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=positive(int), default=20)
    p.add_argument("--learning-rate", type=positive(float), default=0.5)
    p.add_argument("--hidden", type=positive(int), default=64, help="units of the hidden layer")
    p.add_argument("--batch-size", type=positive(int), default=64, help="per step, on a Worker")
    p.add_argument("--seed", type=int, default=0)
    add_arguments(p)
    return parse_checked(p)


def task_of(config):
    """This process's (type, index) and the cluster, from TF_CONFIG."""
    cluster = config.get("cluster") or {}
    task = config.get("task") or {}
    for needed in ("chief", "ps", "worker"):
        if not cluster.get(needed):
            fail(f"TF_CONFIG's cluster has no {needed!r} task", "give it a chief, ps and workers")
    if task.get("type") not in cluster:
        fail(f"TF_CONFIG's task type {task.get('type')!r} is not in its cluster", "see --help")
    return task["type"], int(task.get("index", 0)), cluster


def serve(kind, index, cluster):
    """A PS or a Worker: a gRPC server that runs what the Chief sends it, until stopped."""
    spec = tf.train.ClusterSpec(cluster)
    server = tf.distribute.Server(spec, job_name=kind, task_index=index, protocol="grpc", start=True)
    print(f"{kind} {index}: serving at {cluster[kind][index]}", flush=True)
    server.join()


def make_model(args):
    """The variables, created under the strategy's scope: they live on the PS tasks."""
    init = tf.random.stateless_normal
    return [
        tf.Variable(init((64, args.hidden), seed=(args.seed, 1)) * 0.1, name="w1"),
        tf.Variable(tf.zeros((args.hidden,)), name="b1"),
        tf.Variable(init((args.hidden, 10), seed=(args.seed, 2)) * 0.1, name="w2"),
        tf.Variable(tf.zeros((10,)), name="b2"),
    ]


def logits(variables, x):
    w1, b1, w2, b2 = variables
    return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2


def make_step(variables, learning_rate):
    @tf.function
    def step(iterator):
        x, y = next(iterator)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits(variables, x))
            )
        for variable, grad in zip(variables, tape.gradient(loss, variables), strict=True):
            variable.assign_sub(learning_rate * grad)
        return loss

    return step


def wait_for_tasks(cluster, seconds=300):
    """Until every PS and Worker accepts connections: their pods may start after the Chief's,
    and their names resolve only once they run."""
    deadline = time.monotonic() + seconds
    for address in cluster["ps"] + cluster["worker"]:
        host, port = address.rsplit(":", 1)
        while True:
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                break
            except OSError as error:
                if time.monotonic() > deadline:
                    fail(f"{address} does not answer after {seconds}s: {error}", "is its task running?")
                time.sleep(1)


def coordinate(args, cluster):
    """The Chief: schedules every step on the Workers, then evaluates."""
    started = time.monotonic()
    wait_for_tasks(cluster)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    print(f"chief: {len(cluster['ps'])} PS, {len(cluster['worker'])} worker(s)", flush=True)
    x_train, x_test, y_train, y_test = load_data(args.data)

    def dataset_fn():
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        return ds.shuffle(len(x_train), seed=args.seed).repeat().batch(args.batch_size)

    with strategy.scope():
        variables = make_model(args)
    step = make_step(variables, args.learning_rate)
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    steps = max(1, len(x_train) // args.batch_size)
    for epoch in range(1, args.epochs + 1):
        losses = [coordinator.schedule(step, args=(iterator,)) for _ in range(steps)]
        coordinator.join()
        loss = sum(float(r.fetch()) for r in losses) / steps
        print(f"chief: epoch {epoch}/{args.epochs} loss {loss:.4f}", flush=True)

    values = [v.read_value() for v in variables]
    predicted = np.argmax(logits(values, tf.constant(x_test)).numpy(), axis=1)
    accuracy = float(np.mean(predicted == y_test))
    print(f"test accuracy {accuracy:.4f} ({len(y_test)} held-out digits)")
    print(f"metric accuracy={accuracy:.4f}")
    export_saved_model([v.numpy() for v in values], args.model_uri)
    print(f"chief: done in {time.monotonic() - started:.1f}s", flush=True)
    keep_in_status(f"metric accuracy={accuracy:.4f}")


def keep_in_status(line):
    """Also the container's termination message: FrameworkController's pods are deleted once the
    Framework completes, and the message stays in the Task's completion status."""
    try:
        with open("/dev/termination-log", "w") as log:
            log.write(line)
    except OSError:
        pass  # not in a pod


def main():
    args = parse_args()
    if "TF_CONFIG" not in os.environ:
        fail("TF_CONFIG is not set", "run each task with its TF_CONFIG, as the docstring shows")
    kind, index, cluster = task_of(json.loads(os.environ["TF_CONFIG"]))
    if kind == "chief":
        coordinate(args, cluster)
    else:
        serve(kind, index, cluster)


if __name__ == "__main__":
    main()
