r"""The digits examples' data and models: reading the data set from a volume, saving to S3.

The training examples beside this file (tf_digits.py, xgboost_digits.py, jax_digits.py,
mpi_digits.py) import it. It gives them:

- `--data PATH`: digits.csv.gz in scikit-learn's own format (gzip'd CSV, 64 pixel columns of
  0-16 then the label, one digit a line), or a directory holding it, such as a mounted volume.
  Without it, scikit-learn's bundled copy, which the training image ships.
- `--model-uri s3://BUCKET/PREFIX/` (default: $MODEL_URI; no upload when both are unset): where
  the lead replica uploads the trained model's files, each as PREFIX + its relative path. The
  store is reached as the pods' environment says: AWS_ENDPOINT_URL (or S3_ENDPOINT),
  AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. A model version is written once:
  a prefix that holds anything already is refused before the training, and each file is put
  only where no object is (S3's conditional `If-None-Match: *`), so a served version never
  changes under its servers.

Run as a script, it puts the image's copy of the data set into the store, the setup step before
a job reads it from a volume filled from there:

    python3 digits_store.py upload-dataset s3://data/digits/

uploads scikit-learn's bundled digits.csv.gz as s3://data/digits/digits.csv.gz and prints its
size and sha256; `python3 digits_store.py list s3://models/tf-digits/` lists what a job saved.
"""

import argparse
import gzip
import hashlib
import os
import sys
import tempfile
import zlib

import numpy as np

DATASET_FILE = "digits.csv.gz"
# 8x8 pixels, then the label.
PIXELS = 64


def fail(message, hint):
    print(f"error: {message}\nhint: {hint}", file=sys.stderr)
    sys.exit(2)


def positive(kind):
    def parse(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not positive")
        return value

    return parse


def s3_uri(text):
    """(bucket, prefix) of s3://BUCKET/PREFIX; the prefix, when there is one, ends in '/'."""
    bucket, _, prefix = text.removeprefix("s3://").partition("/")
    if not text.startswith("s3://") or not bucket:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not s3://BUCKET/PREFIX/, e.g. s3://models/tf-digits/1/"
        )
    prefix = prefix.strip("/")
    return bucket, prefix + "/" if prefix else ""


def uri_text(location):
    bucket, prefix = location
    return f"s3://{bucket}/{prefix}"


def add_arguments(parser):
    """--data and --model-uri, as every example takes them."""
    parser.add_argument(
        "--data",
        metavar="PATH",
        help=f"{DATASET_FILE}, or a directory holding it (default: scikit-learn's bundled copy)",
    )
    parser.add_argument(
        "--model-uri",
        metavar="s3://BUCKET/PREFIX/",
        type=s3_uri,
        # argparse parses a string default as it would the flag.
        default=os.environ.get("MODEL_URI") or None,
        help="where the lead replica uploads the trained model (default: $MODEL_URI, if set)",
    )


def bundled_dataset():
    """scikit-learn's own digits.csv.gz, in the installed package."""
    import sklearn.datasets

    return os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", DATASET_FILE)


def load_digits_xy(path):
    """(X, y) as sklearn.datasets.load_digits(return_X_y=True) returns them: X float64 of shape
    (n, 64), y int. From PATH (digits.csv.gz or a directory holding it), or the bundled copy."""
    if path is None:
        from sklearn.datasets import load_digits

        return load_digits(return_X_y=True)
    file = os.path.join(path, DATASET_FILE) if os.path.isdir(path) else path
    if not os.path.isfile(file):
        fail(
            f"the data set {file} does not exist",
            f"put {DATASET_FILE} there (`digits_store.py upload-dataset s3://BUCKET/PREFIX/` puts"
            " the image's copy in the store, for a volume to fetch), or leave out --data for it",
        )
    try:
        # As scikit-learn reads its own copy: every value a float, the last column the label.
        with gzip.open(file, "rt") as text:
            data = np.loadtxt(text, delimiter=",", ndmin=2)
    except (OSError, EOFError, zlib.error, ValueError) as error:
        fail(f"{file} is not a gzip'd CSV of digits: {error}", f"write it as sklearn's own")
    if data.shape[1] != PIXELS + 1 or len(data) == 0:
        fail(
            f"{file} has {data.shape[1]} columns in {len(data)} rows",
            f"each line holds {PIXELS} pixel values, then the label, as sklearn's {DATASET_FILE}",
        )
    return data[:, :-1], data[:, -1].astype(int)


def endpoint():
    """The store's URL as the environment gives it; None for AWS's own."""
    return os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("S3_ENDPOINT") or None


def s3_client():
    """An S3 client for the store the environment names; path-style, as a cluster's store has
    no per-bucket host names."""
    import boto3
    from botocore.config import Config

    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.client(
        "s3",
        endpoint_url=endpoint(),
        region_name=region,
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=10,
            # Six tries, the pauses growing to 16 s (about 15 s in all, 31 s at most): where
            # NetworkPolicies are enforced, a new pod is admitted a moment after it starts, and
            # its first connections are refused until then.
            retries={"max_attempts": 6, "mode": "standard"},
        ),
    )


def bucket_exists(client, bucket):
    """Raises NoSuchBucket for a bucket that is not there: some stores, SeaweedFS among them,
    would otherwise make one for the first object put into it, so a mistyped URI went unseen.
    A key that may write but not look at the bucket (403), or a wrong key, is left to the
    writes, whose answers say more."""
    from botocore.exceptions import ClientError

    try:
        client.head_bucket(Bucket=bucket)
    except ClientError as error:
        # A HEAD answer has no body, so no error code: only the status tells.
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if status == 404:
            message = f"the bucket {bucket!r} does not exist"
            error.response["Error"] = {"Code": "NoSuchBucket", "Message": message}
        if status != 403:
            raise


def check_model_uri(location):
    """Fails at once, before any training, when the bucket a model is to be saved in does not
    exist (a mistyped URI), rather than at the upload after the training. Anything else (a
    store not up yet, a key that may not look) is left to the upload, whose answers say more."""
    if location is None:
        return
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = location
    try:
        client = s3_client()
        bucket_exists(client, bucket)
        taken = first_key(client, bucket, prefix)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "NoSuchBucket":
            fail(
                f"cannot save the model to {uri_text(location)}: the bucket {bucket!r} does not"
                " exist (nothing was trained)",
                f"check the model's URI (a job's modelPath), or create the bucket {bucket!r}",
            )
        return
    except BotoCoreError:
        return
    if taken is not None:
        fail(
            f"cannot save the model to {uri_text(location)}: a model is saved there already"
            f" (s3://{bucket}/{taken}), and a model version is written once (nothing was trained)",
            VERSION_HINT,
        )


VERSION_HINT = "give the job a version of its own (a new modelPath, e.g. .../v2); the saved one stays as it is"


def first_key(client, bucket, prefix):
    """The first key below PREFIX, or None where there is none. A key that may not list (403)
    finds none: the conditional puts still refuse to replace anything."""
    from botocore.exceptions import ClientError

    try:
        listed = client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except ClientError as error:
        if error.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 403:
            return None
        raise
    return next((o["Key"] for o in listed.get("Contents", [])), None)


def parse_checked(parser):
    """PARSER's arguments, the model's bucket checked before the training starts."""
    args = parser.parse_args()
    check_model_uri(args.model_uri)
    return args


def upload(files, location, once=False):
    """Puts each (local file, key below the prefix) into the store; returns the bytes sent.
    ONCE: only where no object is, or is with the same bytes (a retried put the store had
    taken). Any failure ends the process with one line naming its cause and the destination."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    bucket, prefix = location
    sent = 0
    try:
        client = s3_client()
        bucket_exists(client, bucket)
        for file, key in files:
            if once:
                put_once(client, file, bucket, prefix + key)
            else:
                with open(file, "rb") as body:
                    client.put_object(Bucket=bucket, Key=prefix + key, Body=body)
            sent += os.path.getsize(file)
    except NoCredentialsError:
        fail(
            f"no credentials to write to {uri_text(location)}",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY to the keys of the store's secret",
        )
    except ClientError as error:
        details = error.response.get("Error", {})
        code = details.get("Code") or "error"
        hints = {
            "NoSuchBucket": f"create the bucket {bucket!r} first",
            "InvalidAccessKeyId": "AWS_ACCESS_KEY_ID is not a key the store knows",
            "SignatureDoesNotMatch": "AWS_SECRET_ACCESS_KEY does not belong to AWS_ACCESS_KEY_ID",
            "AccessDenied": f"give the key write access to the bucket {bucket!r}",
            "PreconditionFailed": VERSION_HINT,
        }
        fail(
            f"could not write to {uri_text(location)}: {code}: {details.get('Message') or error}",
            hints.get(code, "check the bucket and the AWS_* variables"),
        )
    except BotoCoreError as error:
        fail(
            f"could not write to {uri_text(location)}: {error}",
            f"is the store at {endpoint() or 'AWS'} (AWS_ENDPOINT_URL) up and reachable?",
        )
    return sent


def put_once(client, file, bucket, key):
    """Puts FILE as KEY unless an object is there; one with the same bytes counts as put."""
    from botocore.exceptions import ClientError

    with open(file, "rb") as body:
        data = body.read()
    try:
        client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "PreconditionFailed":
            raise
        there = client.head_object(Bucket=bucket, Key=key)["ETag"].strip('"')
        if there != hashlib.md5(data).hexdigest():
            message = f"s3://{bucket}/{key} is saved already, and a model version is written once"
            error.response["Error"] = {"Code": "PreconditionFailed", "Message": message}
            raise


def save_model(local_dir, uri=None):
    """Uploads every file below LOCAL_DIR to URI (s3://BUCKET/PREFIX/, parsed or as text; default
    $MODEL_URI), keys PREFIX + relative path, and prints where. Nothing when there is no URI."""
    uri = uri or os.environ.get("MODEL_URI") or None
    if uri is None:
        return
    location = uri if isinstance(uri, tuple) else s3_uri(uri)
    paths = sorted(os.path.join(d, name) for d, _, names in os.walk(local_dir) for name in names)
    files = [(path, os.path.relpath(path, local_dir).replace(os.sep, "/")) for path in paths]
    sent = upload(files, location, once=True)
    files_text = f"{len(files)} file" + ("" if len(files) == 1 else "s")
    print(f"model saved to {uri_text(location)} ({files_text}, {sent} bytes)", flush=True)


def export_model(uri, write):
    """Calls WRITE(directory) to put the model's files in a fresh temporary directory, then
    uploads them with save_model; nothing at all when there is no URI."""
    if not uri:
        return
    with tempfile.TemporaryDirectory(prefix="model-") as directory:
        write(directory)
        save_model(directory, uri)


def upload_dataset(uri):
    """The image's copy of the data set into the store, as PREFIX + digits.csv.gz."""
    file = bundled_dataset()
    with open(file, "rb") as data:
        digest = hashlib.sha256(data.read()).hexdigest()
    size = upload([(file, DATASET_FILE)], uri)
    where = uri_text(uri) + DATASET_FILE
    print(f"uploaded {DATASET_FILE} to {where} ({size} bytes, sha256 {digest})", flush=True)


def list_objects(location):
    """Prints `s3://BUCKET/KEY SIZE` for every object below the prefix; fails if there is none."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = location
    try:
        pages = s3_client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        objects = [o for page in pages for o in page.get("Contents", [])]
    except (BotoCoreError, ClientError) as error:
        fail(f"could not list {uri_text(location)}: {error}", "check the bucket and the AWS_* variables")
    if not objects:
        fail(f"nothing is stored below {uri_text(location)}", "did the job save its model there?")
    for o in objects:
        print(f"s3://{bucket}/{o['Key']} {o['Size']}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    dataset = commands.add_parser("upload-dataset", help=f"upload the bundled {DATASET_FILE}")
    dataset.add_argument("uri", type=s3_uri, metavar="s3://BUCKET/PREFIX/")
    listing = commands.add_parser("list", help="list the objects below a prefix, with their sizes")
    listing.add_argument("uri", type=s3_uri, metavar="s3://BUCKET/PREFIX/")
    args = p.parse_args()
    if args.command == "upload-dataset":
        upload_dataset(args.uri)
    else:
        list_objects(args.uri)


if __name__ == "__main__":
    main()
