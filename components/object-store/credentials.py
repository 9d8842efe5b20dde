"""The object store's credentials, before its servers start (an init container).

Makes sure the Secret named by SECRET_NAME (the administrator's keys: every bucket, read and
write) and the one named by READ_SECRET_NAME (read and list only: for fetchers and model
servers) hold AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. A missing Secret that the store
generates (the read one always; the administrator's with GENERATE set) is created with random
values and owned by nothing: like the data volume, it outlives the store, so a store deleted and
added again serves the same data with the same keys (deleting both starts afresh); a Secret
another pod created first is read instead. A missing Secret of the user's is an error that says
how to make it. So are the Secrets of WRITERS (JSON: Secret name -> "bucket/prefix" list), whose
keys may write, read and list only below those prefixes. The read one carries the annotations
of READ_SECRET_ANNOTATIONS (JSON), by which KServe's InferenceServices find the store
(`serving.kserve.io/s3-endpoint`); one made before them gets them added. Then CONFIG_FILE gets
the S3 server's identities: the read-only one and the writers' (the administrator's
comes from the server's environment). The values are never printed.

Talks to the API server with the pod's ServiceAccount token (kube_api.py), standard library only.
"""

import base64
import json
import os
import secrets
import sys

from kube_api import ACCOUNT, api

KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def create(namespace, name, labels, annotations):
    """Creates the Secret with new random values."""
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "stringData": {
            "AWS_ACCESS_KEY_ID": "mlkube" + secrets.token_hex(10),
            "AWS_SECRET_ACCESS_KEY": secrets.token_urlsafe(30),
        },
    }
    status, created = api("POST", f"/api/v1/namespaces/{namespace}/secrets", secret)
    if status == 409:
        # Another pod of the store created it first: theirs is the one.
        return api("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    return status, created


def annotate(namespace, name, secret, annotations):
    """Adds the `annotations` the Secret lacks (a merge patch of its metadata alone)."""
    have = secret.get("metadata", {}).get("annotations") or {}
    if all(have.get(key) == value for key, value in annotations.items()):
        return
    patch = {"metadata": {"annotations": annotations}}
    path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
    status, answer = api("PATCH", path, patch)
    if status != 200:
        sys.exit(f"error: annotating the Secret {namespace}/{name}: HTTP {status}: {answer.get('message', '')}")


def ensure(namespace, name, generate, annotations=None):
    """The Secret `name` with both keys, created first when `generate` and carrying
    `annotations`; exits saying what is wrong."""
    status, secret = api("GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    made = False
    if status == 404 and generate:
        labels = json.loads(os.environ.get("SECRET_LABELS", "{}"))
        status, secret = create(namespace, name, labels, annotations or {})
        made = status in (200, 201)
    if status == 404:
        sys.exit(
            f"error: the Secret {namespace}/{name} with the object store's credentials does not exist\n"
            f"hint: kubectl create secret generic {name} -n {namespace} "
            "--from-literal=AWS_ACCESS_KEY_ID=<key id> --from-literal=AWS_SECRET_ACCESS_KEY=<secret>"
        )
    if status not in (200, 201):
        sys.exit(f"error: reading the Secret {namespace}/{name}: HTTP {status}: {secret.get('message', '')}")
    values = {key: base64.b64decode(value).decode() for key, value in (secret.get("data") or {}).items()}
    missing = [key for key in KEYS if not values.get(key)]
    if missing:
        sys.exit(f"error: the Secret {namespace}/{name} has no {' and no '.join(missing)}\n"
                 "hint: the object store reads its credentials from those two keys")
    if annotations:
        annotate(namespace, name, secret, annotations)
    print(f"credentials: {'made' if made else 'found'} in Secret {namespace}/{name}")
    return values


def identity(name, keys, actions):
    """One identity of SeaweedFS's S3 configuration."""
    credential = {"accessKey": keys["AWS_ACCESS_KEY_ID"], "secretKey": keys["AWS_SECRET_ACCESS_KEY"]}
    return {"name": name, "credentials": [credential], "actions": actions}


def prefix_actions(prefixes):
    """Write, read and list below each "bucket/prefix" (SeaweedFS matches `Action:bucket/key`
    against the pattern; listing is granted per bucket)."""
    actions = []
    for prefix in prefixes:
        actions += [f"Write:{prefix}/*", f"Read:{prefix}/*", f"List:{prefix.split('/')[0]}"]
    return sorted(set(actions))


def write_identities(path, identities):
    """The S3 server's configuration file, readable by the server alone."""
    identities = {"identities": identities}
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as file:
        json.dump(identities, file)


def main():
    with open(f"{ACCOUNT}/namespace") as file:
        namespace = file.read().strip()
    ensure(namespace, os.environ["SECRET_NAME"], os.environ.get("GENERATE") == "true")
    annotations = json.loads(os.environ.get("READ_SECRET_ANNOTATIONS") or "{}")
    reader = ensure(namespace, os.environ["READ_SECRET_NAME"], True, annotations)
    identities = [identity("reader", reader, ["Read", "List"])]
    for secret, prefixes in json.loads(os.environ.get("WRITERS") or "{}").items():
        keys = ensure(namespace, secret, True)
        identities.append(identity(secret, keys, prefix_actions(prefixes)))
    write_identities(os.environ["CONFIG_FILE"], identities)


if __name__ == "__main__":
    main()
