r"""Downloads a model's files from the object store into a directory, keeping their paths:

    python3 -m mlkube_serving.fetch --uri s3://models/xgboost-digits/1/ --dest /models

fetches every object whose key starts with the prefix, xgboost-digits/1/model.json into
/models/model.json and so on, and prints how many files and bytes it fetched. The store is
reached as the training jobs reach it (examples/training/digits_store.py), from the environment
the object store component's ConfigMap and Secret give a pod: AWS_ENDPOINT_URL (or
S3_ENDPOINT), AWS_REGION, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.

A prefix holding no object, a missing bucket, refused keys or an unreachable store end it with
exit status 1 and one line saying what to fix (`failure`).
"""

import argparse
import os
import sys

from mlkube_serving.failure import fail


def s3_uri(text):
    """(bucket, prefix) of s3://BUCKET/PREFIX; the prefix, when there is one, ends in '/'."""
    bucket, _, prefix = text.removeprefix("s3://").partition("/")
    if not text.startswith("s3://") or not bucket:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not s3://BUCKET/PREFIX/, e.g. s3://models/xgboost-digits/1/"
        )
    prefix = prefix.strip("/")
    return bucket, prefix + "/" if prefix else ""


def uri_text(bucket, prefix):
    return f"s3://{bucket}/{prefix}"


def endpoint():
    """The store's URL as the environment gives it; None for AWS's own."""
    return os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("S3_ENDPOINT") or None


def s3_client():
    """A client for the store the environment names; path-style, as a cluster's store has no
    per-bucket host names. Few retries: an init container that fails is started again."""
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
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
        ),
    )


def local_path(dest, prefix, key):
    """Where KEY goes below DEST: its path after the prefix; None for a key that names a
    directory or would leave DEST (a '..' part)."""
    relative = key[len(prefix) :]
    parts = [part for part in relative.split("/") if part]
    if not parts or relative.endswith("/") or any(part in (".", "..") for part in parts):
        return None
    return os.path.join(dest, *parts)


def list_objects(client, bucket, prefix):
    """[(key, size)] of every object below the prefix."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [(o["Key"], o["Size"]) for page in pages for o in page.get("Contents", [])]


def explain(error, bucket, prefix):
    """The line for a failed request to the store: what happened and what to fix."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    where = uri_text(bucket, prefix)
    store = endpoint() or "AWS's S3"
    if isinstance(error, NoCredentialsError):
        return (
            f"no credentials to read {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            " (the object store's credentials Secret)"
        )
    if isinstance(error, (EndpointConnectionError, ConnectTimeoutError)):
        return (
            f"could not reach the object store at {store} to read {where}: is it running, and"
            " does AWS_ENDPOINT_URL (the object store's ConfigMap) name it?"
        )
    if isinstance(error, ClientError):
        details = error.response.get("Error", {})
        code = details.get("Code") or "error"
        hints = {
            "NoSuchBucket": f"the bucket {bucket!r} does not exist in the store at {store}:"
            " check the model's URI, or create the bucket",
            "InvalidAccessKeyId": "AWS_ACCESS_KEY_ID is not a key the store knows: use the object"
            " store's credentials Secret",
            "SignatureDoesNotMatch": "AWS_SECRET_ACCESS_KEY does not belong to AWS_ACCESS_KEY_ID:"
            " use the object store's credentials Secret",
            "AccessDenied": f"the key may not read the bucket {bucket!r}: give it read access",
        }
        if code in hints:
            return f"could not read {where}: {hints[code]}"
        return f"could not read {where}: {code}: {details.get('Message') or error}"
    return f"could not read {where} from the store at {store}: {error}"


def fetch(bucket, prefix, dest):
    """Downloads every object below the prefix into DEST; returns (files, bytes). Fails with
    one line when the store cannot be read or the prefix holds nothing."""
    from botocore.exceptions import BotoCoreError, ClientError

    where = uri_text(bucket, prefix)
    try:
        client = s3_client()
        objects = list_objects(client, bucket, prefix)
        files = [(key, size, local_path(dest, prefix, key)) for key, size in objects]
        files = [(key, size, path) for key, size, path in files if path is not None]
        if not files:
            fail(
                f"{where} holds no objects: no model was saved there; check the version's model"
                " path (the job's --model-uri)"
            )
        for key, _, path in files:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            client.download_file(bucket, key, path)
    except (BotoCoreError, ClientError) as error:
        fail(explain(error, bucket, prefix))
    except OSError as error:
        fail(f"could not write {where} into {dest}: {error}; give the container a writable volume there")
    return len(files), sum(size for _, size, _ in files)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m mlkube_serving.fetch", description=__doc__.split("\n")[0]
    )
    p.add_argument("--uri", type=s3_uri, required=True, metavar="s3://BUCKET/PREFIX/")
    p.add_argument("--dest", required=True, metavar="DIR", help="created if missing")
    args = p.parse_args(argv)
    bucket, prefix = args.uri
    count, size = fetch(bucket, prefix, args.dest)
    files = f"{count} file" + ("" if count == 1 else "s")
    print(f"fetched {files} ({size} bytes) from {uri_text(bucket, prefix)} into {args.dest}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
