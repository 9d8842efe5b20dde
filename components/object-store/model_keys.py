"""Keys of its own for each training job that saves a model in the store (a container of the
store's pod, beside its servers).

A training-job component that saves its model here (objectStore and modelPath, and no
objectStoreCredentials of its own) renders a request: a ConfigMap labelled
mlkube.io/object-store=<STORE> whose `prefix` is its modelPath. For each request this makes
keys that write, read and list only below that prefix: an identity of the S3 server, kept in the
store's filer (a restart of the store keeps it; the server takes a change within a second,
without a restart), and a Secret of the request's name holding them, owned by the request, so
that Kubernetes deletes it with the request. A request whose prefix is not in one of JOB_BUCKETS,
or overlaps the prefix of an older request, gets no keys and a Warning event that says why; the
identity of a request that is gone goes with it, and a request made again under the same name
gets new keys (its identity is named by the request's uid too). Lists the requests, then
watches them: at each change, and every RESYNC seconds, compares them with the identities and
mends the difference.

The identities are changed through `weed shell`'s s3.configure, on the pod's loopback; the
values of the keys are never printed.
"""

import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.parse
from datetime import datetime, timezone

from kube_api import ACCOUNT, api, watch_lines

LABEL = "mlkube.io/object-store"
# The S3 server's names for these identities: the request's, after this.
IDENTITY = "model-keys."
# A prefix's parts: letters, digits, '.', '_' and '-' (so that it is one word of s3.configure).
PART = re.compile(r"^[A-Za-z0-9._-]+$")
RESYNC = 30
RETRY = 3


def shell(commands):
    """Runs `weed shell` commands against the pod's own master and filer; its output."""
    done = subprocess.run(
        ["weed", "shell", "-master=" + os.environ["MASTER"], "-filer=" + os.environ["FILER"]],
        input="\n".join(commands) + "\n", capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"weed shell exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def identities():
    """The keys of this container's identities in the filer: "<request>.<uid>" -> (key id,
    secret)."""
    output = shell(["s3.configure"])
    start = output.find("{")
    config = json.loads(output[start:]) if start >= 0 else {}
    keys = {}
    for identity in config.get("identities") or []:
        name = identity.get("name", "")
        credentials = identity.get("credentials") or [{}]
        if name.startswith(IDENTITY):
            keys[name[len(IDENTITY):]] = (credentials[0].get("accessKey"), credentials[0].get("secretKey"))
    return keys


def identity_of(request):
    """The S3 server's name of a request's identity, less IDENTITY: a request made again under
    the same name gets keys of its own."""
    return f"{request['metadata']['name']}.{request['metadata']['uid']}"


def refusal(prefix, granted, buckets):
    """Why `prefix` gets no keys, or None: it must be <bucket>/<prefix> in one of `buckets`,
    and overlap no prefix in `granted` (request name -> prefix)."""
    parts = prefix.split("/")
    if len(parts) < 2 or not all(PART.match(p) and p not in (".", "..") for p in parts):
        return f"its prefix {json.dumps(prefix)} is not <bucket>/<prefix> (letters, digits, '.', '_', '-' and '/')"
    if parts[0] not in buckets:
        return f"its prefix {prefix} is in no bucket that jobs may write in ({', '.join(buckets)})"
    for other, theirs in granted.items():
        if (prefix + "/").startswith(theirs + "/") or (theirs + "/").startswith(prefix + "/"):
            return (f"its prefix {prefix} overlaps {theirs}, the prefix of the older request {other}: each job's "
                    "keys write only below a prefix of its own; give the job another modelPath")
    return None


def secret(request, keys):
    """The Secret of a request's keys, owned by the request."""
    meta = request["metadata"]
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"], "uid": meta["uid"]}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": meta["name"], "labels": {LABEL: os.environ["STORE"]}, "ownerReferences": [owner]},
        "stringData": {"AWS_ACCESS_KEY_ID": keys[0], "AWS_SECRET_ACCESS_KEY": keys[1]},
    }


class Keys:
    """The requests of one namespace and the identities they were given."""

    def __init__(self, namespace):
        self.namespace = namespace
        self.warned = {}  # identity_of(request) -> the refusal its last event gave
        self.minted = set()  # identities made by this process whose Secret it has not created
        self.delivered = set()  # identities whose Secret exists

    def mend(self, requests):
        """Gives every acceptable request its identity and Secret, and takes the identities of
        the others away."""
        have = identities()
        commands, granted = self.grant(requests, have)
        wanted = {identity_of(r) for r in requests if r["metadata"]["name"] in granted}
        self.minted &= wanted
        self.delivered &= wanted
        self.warned = {made: why for made, why in self.warned.items() if made in {identity_of(r) for r in requests}}
        for gone in sorted(set(have) - wanted):
            commands.append(f"s3.configure -user={IDENTITY}{gone} -delete -apply")
            print(f"model keys: the keys of {gone.rsplit('.', 1)[0]} withdrawn", flush=True)
        if commands:
            shell(commands)
            # Only keys the server now holds are handed out (a refused command is retried).
            have = identities()
        for request in requests:
            if identity_of(request) in wanted and identity_of(request) in have:
                self.deliver(request, have[identity_of(request)])

    def grant(self, requests, have):
        """The s3.configure commands that make the identities of the acceptable requests that
        have none (their keys put in `have`), and the acceptable requests' prefixes by name,
        oldest first; the others get a Warning event."""
        granted = {}
        commands = []
        buckets = json.loads(os.environ["JOB_BUCKETS"])
        for request in sorted(requests, key=lambda r: (r["metadata"]["creationTimestamp"], r["metadata"]["name"])):
            name = request["metadata"]["name"]
            prefix = (request.get("data") or {}).get("prefix", "")
            why = refusal(prefix, granted, buckets)
            if why:
                self.warn(request, why)
                continue
            self.warned.pop(identity_of(request), None)
            granted[name] = prefix
            if identity_of(request) not in have:
                keys = have[identity_of(request)] = ("mlkube" + secrets.token_hex(10), secrets.token_urlsafe(30))
                actions = f"Write:{prefix}/*,Read:{prefix}/*,List:{prefix.split('/')[0]}"
                commands.append(f"s3.configure -user={IDENTITY}{identity_of(request)} -access_key={keys[0]} "
                                f"-secret_key={keys[1]} -actions={actions} -apply")
                self.minted.add(identity_of(request))
                print(f"model keys: {name} may write below {prefix}", flush=True)
        return commands, granted

    def deliver(self, request, keys):
        """Creates the request's Secret, unless it did before. A Secret of that name that
        exists already was created by an earlier run of this container, unless this one made
        the keys: then it is the Secret of an earlier request of that name, which Kubernetes
        deletes with it, and this tries again at the next change or resync."""
        made = identity_of(request)
        if made in self.delivered:
            return
        status, answer = api("POST", f"/api/v1/namespaces/{self.namespace}/secrets", secret(request, keys))
        if status == 201 or (status == 409 and made not in self.minted):
            self.delivered.add(made)
            self.minted.discard(made)
        elif status != 409:
            print(f"model keys: creating the Secret {request['metadata']['name']}: HTTP {status}: "
                  f"{answer.get('message', '')}", file=sys.stderr, flush=True)

    def warn(self, request, why):
        """A Warning event on the request, once per reason."""
        meta = request["metadata"]
        if self.warned.get(identity_of(request)) == why:
            return
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": meta["name"] + "."},
            "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": meta["name"],
                               "namespace": self.namespace, "uid": meta["uid"]},
            "type": "Warning",
            "reason": "ModelKeysRefused",
            "message": f"no keys for the request {meta['name']}: {why}",
            "source": {"component": os.environ["STORE"] + "-model-keys"},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        status, answer = api("POST", f"/api/v1/namespaces/{self.namespace}/events", event)
        print(f"model keys: {event['message']}", file=sys.stderr, flush=True)
        if status == 201:
            self.warned[identity_of(request)] = why
        else:
            print(f"model keys: the event: HTTP {status}: {answer.get('message', '')}", file=sys.stderr, flush=True)


def main():
    with open(f"{ACCOUNT}/namespace") as file:
        namespace = file.read().strip()
    selector = urllib.parse.quote(f"{LABEL}={os.environ['STORE']}")
    path = f"/api/v1/namespaces/{namespace}/configmaps?labelSelector={selector}"
    keys = Keys(namespace)
    while True:
        try:
            status, listed = api("GET", path)
            if status != 200:
                raise RuntimeError(f"listing the requests: HTTP {status}: {listed.get('message', '')}")
            keys.mend(listed.get("items") or [])
            version = listed["metadata"]["resourceVersion"]
            # The first change ends the watch; the list after it sees every change since. A
            # Secret still to create (the old one of its name not yet deleted) is tried again soon.
            wait = RETRY if keys.minted else RESYNC
            for _ in watch_lines(f"{path}&watch=1&resourceVersion={version}&timeoutSeconds={wait}", wait + 30):
                break
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
            print(f"model keys: {error}; again in 5 s", file=sys.stderr, flush=True)
            time.sleep(5)


if __name__ == "__main__":
    main()
