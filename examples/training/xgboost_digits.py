"""Train gradient-boosted trees on scikit-learn's digits, distributed over an XGBoostJob.

Every replica runs this same script with the environment the operator injects: MASTER_ADDR
and MASTER_PORT (the Master's service and port), WORLD_SIZE and RANK (the Master is rank 0,
Worker i is rank i+1). The Master also runs XGBoost's tracker on MASTER_PORT, which introduces
the replicas to each other; then every replica joins XGBoost's collective and trains on its
own shard of the rows. Each round the replicas all-reduce their gradient histograms, so they
grow the same trees. The Master evaluates on a held-out split and prints
`metric accuracy=<value>`.

Run it locally as a Master and one Worker on 127.0.0.1 (no cluster needed):

    export MASTER_ADDR=127.0.0.1 MASTER_PORT=23476 WORLD_SIZE=2
    RANK=0 python3 xgboost_digits.py & RANK=1 python3 xgboost_digits.py

Without those variables it trains alone, in one process.

With --data the digits come from that digits.csv.gz (or the directory holding it), such as a
mounted volume, instead of scikit-learn's bundled copy. With --model-uri (default: $MODEL_URI)
the Master saves the booster as model.json (XGBoost's JSON format, which MLServer's XGBoost
runtime loads) and uploads it there (digits_store.py says how the store is reached). The model
takes the 64 pixels as they are, 0-16, and gives the probabilities of the digits 0-9
(multi:softprob).
"""

import argparse
import hashlib
import itertools
import os
import socket
import time

import numpy as np
import xgboost as xgb
from sklearn.model_selection import train_test_split
from xgboost import collective
from xgboost.tracker import RabitTracker

# The data set and model storage every digits example shares, beside this script.
from digits_store import add_arguments, export_model, fail, load_digits_xy, parse_checked, positive

ENV = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")
# Seconds to wait for every replica to reach the tracker: pods start at different times.
JOIN_TIMEOUT = 300
# Seconds a port stays taken by closed connections (TIME_WAIT), with some margin.
TIME_WAIT_MAX = 90


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=positive(int), default=50, help="boosting rounds")
    p.add_argument("--learning-rate", type=positive(float), default=0.3)
    p.add_argument("--max-depth", type=positive(int), default=4)
    # One thread per replica, as each has one CPU: more OpenMP threads than CPUs spin-wait
    # against each other and make training many times slower.
    p.add_argument("--threads", type=positive(int), default=1)
    add_arguments(p)
    return parse_checked(p)


def cluster():
    """(rank, world size, tracker address), or None when the operator's variables are absent."""
    present = [name for name in ENV if name in os.environ]
    if not present:
        return None
    if len(present) < len(ENV):
        missing = ", ".join(name for name in ENV if name not in os.environ)
        fail(
            f"{', '.join(present)} set, but not {missing}",
            "run this as an XGBoostJob, which sets all four, or set them all by hand",
        )
    tracker_addr = (os.environ["MASTER_ADDR"], env_int("MASTER_PORT"))
    return env_int("RANK"), env_int("WORLD_SIZE"), tracker_addr


def env_int(name):
    try:
        return int(os.environ[name])
    except ValueError:
        fail(
            f"{name}={os.environ[name]!r} is not a whole number",
            "the operator sets it; when running by hand, set it as the XGBoostJob would",
        )


def load_data(path):
    """The same deterministic split on every replica: 1,347 digits to train on, 450 held out."""
    x, y = load_digits_xy(path)
    return train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)


def train(args, rank, size, data):
    x_train, x_test, y_train, y_test = data
    # Row-split: each replica holds every rank-th row. The test shards make XGBoost's own
    # per-round evaluation a global one, summed over the replicas.
    dtrain = xgb.DMatrix(x_train[rank::size], label=y_train[rank::size])
    dtest = xgb.DMatrix(x_test[rank::size], label=y_test[rank::size])
    params = {
        "objective": "multi:softprob",
        "num_class": 10,
        "tree_method": "hist",
        "eta": args.learning_rate,
        "max_depth": args.max_depth,
        "eval_metric": "merror",
        "nthread": args.threads,
    }
    # In a collective, XGBoost prints the evaluation from rank 0 only.
    return xgb.train(params, dtrain, args.rounds, evals=[(dtest, "test")], verbose_eval=5)


def start_tracker(size, port):
    # The tracker does not reuse its port while connections of a previous run (a restarted
    # container) linger in TIME_WAIT, up to a minute on Linux, so try again until they are gone.
    deadline = time.monotonic() + TIME_WAIT_MAX
    for attempt in itertools.count():
        try:
            # Every interface: the Master's own service name may not resolve yet.
            tracker = RabitTracker(
                n_workers=size, host_ip="0.0.0.0", port=port, sortby="task", timeout=JOIN_TIMEOUT
            )
        except xgb.core.XGBoostError as err:
            if "Address already in use" not in str(err) or time.monotonic() > deadline:
                raise
            if attempt == 0:
                print(f"rank 0: port {port} is still in use, waiting", flush=True)
            time.sleep(5)
            continue
        tracker.start()
        return tracker


def wait_for_name(host):
    """Until the Master's service name resolves: a headless service's name appears only once
    its pod is running, and XGBoost gives up at once on a name it cannot resolve."""
    deadline = time.monotonic() + JOIN_TIMEOUT
    while True:
        try:
            return socket.getaddrinfo(host, None)
        except socket.gaierror:
            if time.monotonic() > deadline:
                fail(
                    f"{host} did not resolve in {JOIN_TIMEOUT}s",
                    "is the Master's pod running? `kubectl get pods` shows it",
                )
            time.sleep(1)


def train_distributed(args, rank, size, tracker_addr, data):
    host, port = tracker_addr
    wait_for_name(host)
    tracker = None
    if rank == 0:
        tracker = start_tracker(size, port)
        print(f"rank 0: tracker listening on port {port} for {size} replicas", flush=True)
    # Task ids sort as text, so zero-padded ranks make XGBoost's ranks the operator's RANK.
    with collective.CommunicatorContext(
        dmlc_communicator="rabit",
        dmlc_tracker_uri=host,
        dmlc_tracker_port=port,
        dmlc_task_id=f"{rank:06d}",
        # The Master's tracker may start later than this replica. Attempt n waits 2n seconds
        # first, so 18 attempts keep trying for about five minutes. The tracker must not be
        # probed otherwise: a connection that is not a replica's stops it.
        dmlc_retry=18,
        dmlc_timeout=JOIN_TIMEOUT,
    ):
        if collective.get_rank() != rank:
            fail(
                f"XGBoost gave rank {collective.get_rank()} to RANK {rank}",
                "give every replica a different RANK, the Master 0, as the operator does",
            )
        print(f"rank {rank}: joined {collective.get_world_size()} replicas", flush=True)
        booster = train(args, rank, size, data)
    if tracker is not None:
        tracker.wait_for(JOIN_TIMEOUT)
    return booster


def main():
    args = parse_args()
    started = time.monotonic()
    data = load_data(args.data)
    placement = cluster()
    if placement is None:
        rank, booster = 0, train(args, 0, 1, data)
    else:
        rank, size, tracker_addr = placement
        booster = train_distributed(args, rank, size, tracker_addr, data)

    model = booster.save_raw("ubj")
    print(f"rank {rank}: model sha256 {hashlib.sha256(model).hexdigest()[:16]}", flush=True)
    if rank == 0:
        _, x_test, _, y_test = data
        predicted = np.argmax(booster.predict(xgb.DMatrix(x_test)), axis=1)
        accuracy = float(np.mean(predicted == y_test))
        print(f"test accuracy {accuracy:.4f} ({len(y_test)} held-out digits)")
        print(f"metric accuracy={accuracy:.4f}")
        # The format follows the name: JSON, which MLServer's XGBoost runtime loads.
        export_model(args.model_uri, lambda out: booster.save_model(f"{out}/model.json"))
    print(f"rank {rank}: done in {time.monotonic() - started:.1f}s", flush=True)


if __name__ == "__main__":
    main()
