r"""Serves one version of a model over the V2 (Open Inference) protocol with MLServer:

    python3 -m mlkube_serving.serve --name digits --version 2 --format xgboost --model-dir /models

checks that the directory holds a model of that format (xgboost: model.json, model.ubj or
model.bst; lightgbm: model.bst, LightGBM's text model; sklearn: model.joblib, model.pkl or
model.pickle; tensorflow: a SavedModel's saved_model.pb; `--format auto` takes the one format
whose files it holds, as a KServe runtime serving several formats needs, a model.bst going to
LightGBM when it is LightGBM's text), writes MLServer's settings.json and
model-settings.json into a fresh directory below $TMPDIR (or /tmp: a pod's root file system is
read-only), and runs MLServer on them in this process: REST on --http-port (8080), gRPC on
--grpc-port (8081), Prometheus metrics on --metrics-port (8082; 0 turns them off), every
address of the pod unless --host says otherwise. One process, no inference workers beside it
(parallel_workers 0): a model is in memory once.

XGBoost models are served by MLServer's XGBoost runtime (with their tensors listed in the
metadata: `mlkube_serving.xgboost`), scikit-learn and LightGBM models by MLServer's runtimes as
they are, TensorFlow SavedModels by ours (`mlkube_serving.tensorflow`). GET /v2/models/NAME/ready answers 200 once the model has loaded;
POST /v2/models/NAME/infer and /v2/models/NAME/versions/VERSION/infer both reach it, and every
response names the version that answered (model_version); without --version, only the first.

A directory without the format's files, or a model that fails to load, ends the process with
exit status 1 and one line saying what to fix (`failure`). SIGTERM stops the servers, exit 0.
"""

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile

from mlkube_serving import failure
from mlkube_serving.failure import fail

# What each format's directory holds, and the runtime that serves it.
FORMATS = {
    "xgboost": (["model.json", "model.ubj", "model.bst"], "mlkube_serving.xgboost.XGBoostModel"),
    "lightgbm": (["model.bst"], "mlserver_lightgbm.LightGBMModel"),
    "sklearn": (["model.joblib", "model.pkl", "model.pickle"], "mlserver_sklearn.SKLearnModel"),
    "tensorflow": (["saved_model.pb"], "mlkube_serving.tensorflow.TensorFlowModel"),
}
# Both XGBoost and LightGBM name their model model.bst (KServe's convention); LightGBM's is
# text that begins with this.
LIGHTGBM_TEXT = b"tree"
# Names and versions appear in URL paths.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Entries of a directory listed in a failure's line, at most.
LISTED = 10


def listing(directory):
    """What DIRECTORY holds, for a failure's line: its first entries, directories with a '/'."""
    names = sorted(os.listdir(directory))
    if not names:
        return "nothing (it is empty)"
    shown = [n + "/" if os.path.isdir(os.path.join(directory, n)) else n for n in names[:LISTED]]
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(shown) + more


def holds(model_format, directory):
    """Whether DIRECTORY holds a file of the format at its top (a model.bst counts for LightGBM
    when it is LightGBM's text, for XGBoost otherwise)."""
    needed, _ = FORMATS[model_format]
    for name in needed:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        if name != "model.bst":
            return True
        with open(path, "rb") as file:
            text = file.read(len(LIGHTGBM_TEXT)) == LIGHTGBM_TEXT
        if text == (model_format == "lightgbm"):
            return True
    return False


def check_model_dir(model_format, directory):
    """Fails unless DIRECTORY holds one of the files the format needs."""
    needed, _ = FORMATS[model_format]
    if not os.path.isdir(directory):
        fail(
            f"the model directory {directory} does not exist: fetch the model into it first"
            " (python3 -m mlkube_serving.fetch --dest DIR)"
        )
    if not holds(model_format, directory):
        fail(
            f"{directory} holds no {model_format} model: the {model_format} format needs"
            f" {' or '.join(needed)} at its top, and it holds {listing(directory)};"
            " check the version's format and model path"
        )


def detect_format(directory):
    """The one format whose files DIRECTORY holds at its top (`--format auto`, as KServe's
    runtimes serve several formats from one container); fails naming what it holds otherwise."""
    if not os.path.isdir(directory):
        fail(f"the model directory {directory} does not exist: fetch the model into it first")
    found = [name for name in sorted(FORMATS) if holds(name, directory)]
    if len(found) != 1:
        expected = "; ".join(f"{n}: {' or '.join(needed)}" for n, (needed, _) in sorted(FORMATS.items()))
        what = "no model" if not found else f"models of several formats ({', '.join(found)})"
        fail(
            f"{directory} holds {what}: it holds {listing(directory)}, and each format needs its"
            f" files at the top ({expected}); check the model's storage URI, or name the format"
        )
    return found[0]


def settings(args, directory):
    """MLServer's server settings: its scratch directories in DIRECTORY, not the working one."""
    return {
        "debug": False,
        "host": args.host,
        "http_port": args.http_port,
        "grpc_port": args.grpc_port,
        "parallel_workers": 0,
        "metrics_endpoint": "/metrics" if args.metrics_port else None,
        "metrics_port": args.metrics_port or 8082,
        "metrics_dir": os.path.join(directory, "metrics"),
        "environments_dir": os.path.join(directory, "environments"),
        "load_models_at_startup": True,
    }


def model_settings(args):
    _, implementation = FORMATS[args.format]
    return {
        "name": args.name,
        "implementation": implementation,
        "parameters": {"uri": os.path.abspath(args.model_dir)}
        | ({"version": args.version} if args.version else {}),
    }


def write_settings(args):
    """A fresh directory with settings.json, and NAME/model-settings.json (MLServer expects a
    model's folder to bear its name); returns its path."""
    directory = tempfile.mkdtemp(prefix="mlserver-")
    os.mkdir(os.path.join(directory, args.name))
    for path, content in [
        ("settings.json", settings(args, directory)),
        (os.path.join(args.name, "model-settings.json"), model_settings(args)),
    ]:
        with open(os.path.join(directory, path), "w") as file:
            json.dump(content, file, indent=2)
    return directory


async def run(directory):
    """`mlserver start DIRECTORY`, in this process; returns once the servers have stopped."""
    from mlserver.cli.serve import load_settings
    from mlserver.server import MLServer

    server_settings, models = await load_settings(directory)
    await MLServer(server_settings).start(models)


def name_or_version(what):
    def parse(text):
        if not NAME.match(text):
            raise argparse.ArgumentTypeError(
                f"{text!r} cannot name a {what}: use letters, digits, '.', '_' and '-'"
            )
        return text

    return parse


def port(text):
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port")
    return value


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m mlkube_serving.serve", description=__doc__.split("\n")[0]
    )
    p.add_argument("--name", type=name_or_version("model"), required=True, help="the model's name in the V2 paths")
    p.add_argument("--version", type=name_or_version("version"), help="the version this server serves (default: none)")
    p.add_argument(
        "--format",
        choices=sorted(FORMATS) + ["auto"],
        required=True,
        help="the model's format; auto: the one whose files the model directory holds",
    )
    p.add_argument("--model-dir", required=True, metavar="DIR", help="the model's files")
    p.add_argument("--host", default="0.0.0.0", help="the address to listen on (default: every one)")
    p.add_argument("--http-port", type=port, default=8080)
    p.add_argument("--grpc-port", type=port, default=8081)
    p.add_argument("--metrics-port", type=port, default=8082, help="0: no metrics")
    args = p.parse_args(argv)
    if args.format == "auto":
        args.format = detect_format(args.model_dir)
    check_model_dir(args.format, args.model_dir)
    directory = write_settings(args)
    version = f" version {args.version}" if args.version else ""
    print(
        f"serving {args.format} model {args.name}{version} from {args.model_dir}"
        f" (settings in {directory})",
        flush=True,
    )
    from mlserver.logging import configure_logger
    from mlserver.utils import install_uvloop_event_loop

    # As MLServer's own command line starts.
    configure_logger()
    install_uvloop_event_loop()
    asyncio.run(run(directory))
    # MLServer logs a model that failed to load and stops its servers; the runtime recorded why.
    if failure.recorded is not None:
        sys.exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
