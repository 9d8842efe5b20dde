"""Keys of its own for each training job that saves a model in the store (a container of the
store's pod, beside its servers).

A training-job component that saves its model here (objectStore and modelPath, and no
objectStoreCredentials of its own) renders a request: a ConfigMap labelled
mlkube.io/object-store=<STORE> whose `prefix` is its modelPath. For each request this makes
keys that write, read and list only below that prefix: an identity of the S3 server, kept in the
store's filer (a restart of the store keeps it; the server takes a change within a second,
without a restart), and a Secret of the request's name holding them, owned by the request, so
that Kubernetes deletes it with the request. A request whose prefix is not in one of JOB_BUCKETS,
overlaps the prefix of an older request, or holds a file in the store already (a model version is
written once: new keys never write over one) gets no keys and a Warning event that says why; the
identity of a request that is gone goes with it, and a request made again under the same name
gets new keys (its identity is named by the request's uid too) if its prefix is still empty.
The keys write only in the paths of the jobs a request names (its `jobs`: a sweep's each save
below the prefix), and no longer in a job's path once that job has finished (succeeded or
failed): its version is written once. Lists the requests, then watches them: at each change, and
every RESYNC seconds (FOLLOW while a job that may write runs, so that its keys stop writing soon
after it ends),
compares them with the identities (and their jobs) and mends the difference.

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
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

from kube_api import ACCOUNT, api, watch_lines

LABEL = "mlkube.io/object-store"
# The S3 server's names for these identities: the request's, after this.
IDENTITY = "model-keys."
# A prefix's parts: letters, digits, '.', '_' and '-' (so that it is one word of s3.configure).
PART = re.compile(r"^[A-Za-z0-9._-]+$")
# A job's kind and name, as the API server would take them.
KIND = re.compile(r"^[A-Za-z]+$")
NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
RESYNC = 30
FOLLOW = 5
# The filer's mode bit of a directory (Go's os.ModeDir).
DIRECTORY = 1 << 31
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
    """The keys of this container's identities in the filer, "<request>.<uid>" -> (key id,
    secret), and the Write actions each holds."""
    output = shell(["s3.configure"])
    start = output.find("{")
    config = json.loads(output[start:]) if start >= 0 else {}
    keys, writes = {}, {}
    for identity in config.get("identities") or []:
        name = identity.get("name", "")
        credentials = identity.get("credentials") or [{}]
        if name.startswith(IDENTITY):
            made = name[len(IDENTITY):]
            keys[made] = (credentials[0].get("accessKey"), credentials[0].get("secretKey"))
            writes[made] = {a for a in identity.get("actions") or [] if a.startswith("Write:")}
    return keys, writes


def jobs_of(request):
    """The Kubeflow jobs the request names (its `jobs`, JSON) whose path lies below its prefix:
    [{apiVersion, kind, name, path}]. Anything else it says is left out: a request is anyone's
    ConfigMap, and one written by hand must neither stop this container nor read other kinds."""
    prefix = request["data"]["prefix"]
    try:
        jobs = json.loads(request["data"].get("jobs") or "[]")
    except ValueError:
        return []
    return [j for j in jobs if a_job(j, prefix)] if isinstance(jobs, list) else []


def a_job(job, prefix):
    """Whether `job` names a Kubeflow job, and a path below `prefix` for it."""
    fields = ("apiVersion", "kind", "name", "path")
    if not isinstance(job, dict) or not all(isinstance(job.get(f), str) for f in fields):
        return False
    return (job["apiVersion"] == "kubeflow.org/v1" and KIND.match(job["kind"]) and NAME.match(job["name"])
            and (job["path"] + "/").startswith(prefix + "/") and well_formed(job["path"]))


def writable(request, namespace, held):
    """The Write actions the request's keys should hold, given those they hold (`held`): one for
    the path of each job it names (its whole prefix when it names none) whose job has not
    finished and, unless held already, that holds no file: a version is written once, so a path
    never gets write access back (a job made again in it, a sweep grown over it). A job is read
    only when its path may still be written. Also whether one of those jobs runs."""
    jobs = jobs_of(request)
    paths = [(j, j["path"]) for j in jobs] or [(None, request["data"]["prefix"])]
    want, running = set(), False
    for job, path in paths:
        action = f"Write:{path}/*"
        if action in held or not written(path):
            state = job_state(job, namespace) if job else "running"
            running = running or (job is not None and state == "running")
            if state != "finished":
                want.add(action)
    return want, running


def job_state(job, namespace):
    """"gone", "running" or "finished" (its condition Succeeded or Failed is true)."""
    plural = job["kind"].lower() + "s"
    status, read = api("GET", f"/apis/{job['apiVersion']}/namespaces/{namespace}/{plural}/{job['name']}")
    if status not in (200, 404):
        print(f"model keys: reading the job {job['name']}: HTTP {status}: {read.get('message', '')}",
              file=sys.stderr, flush=True)
    if status != 200:
        return "gone"
    conditions = (read.get("status") or {}).get("conditions") or []
    ended = any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)
    return "finished" if ended else "running"


def identity_of(request):
    """The S3 server's name of a request's identity, less IDENTITY: a request made again under
    the same name gets keys of its own."""
    return f"{request['metadata']['name']}.{request['metadata']['uid']}"


def well_formed(path):
    """Whether `path` is <bucket>/<prefix> of parts that are words of s3.configure."""
    parts = path.split("/")
    return len(parts) >= 2 and all(PART.match(p) and p not in (".", "..") for p in parts)


def refusal(prefix, granted, buckets):
    """Why `prefix` gets no keys, or None: it must be <bucket>/<prefix> in one of `buckets`,
    and overlap no prefix in `granted` (request name -> prefix)."""
    if not well_formed(prefix):
        return f"its prefix {json.dumps(prefix)} is not <bucket>/<prefix> (letters, digits, '.', '_', '-' and '/')"
    if prefix.split("/")[0] not in buckets:
        return f"its prefix {prefix} is in no bucket that jobs may write in ({', '.join(buckets)})"
    for other, theirs in granted.items():
        if (prefix + "/").startswith(theirs + "/") or (theirs + "/").startswith(prefix + "/"):
            return (f"its prefix {prefix} overlaps {theirs}, the prefix of the older request {other}: each job's "
                    "keys write only below a prefix of its own; give the job another modelPath")
    return None


def written(prefix):
    """Why new keys for `prefix` would write over a model, or None: a file below it in the
    store (a version is written once; the keys of the request that wrote it stay its own)."""
    pending = [f"/buckets/{prefix}"]
    while pending:
        path = pending.pop()
        entries = listing(path)
        files = [path] if entries is None else [e["FullPath"] for e in entries if not e.get("Mode", 0) & DIRECTORY]
        if files:
            return (f"{prefix} holds a model already ({files[0][len('/buckets/'):]}), and a model version is "
                    "written once: give the job a new modelPath, or delete that version from the store first")
        pending.extend(e["FullPath"] for e in entries)
    return None


def listing(path):
    """The entries of the directory `path` of the store's filer: none when nothing is there,
    None when it is a file."""
    entries, last = [], ""
    while True:
        query = urllib.parse.urlencode({"limit": 1000, "lastFileName": last})
        url = f"http://{os.environ['FILER']}{urllib.parse.quote(path)}/?{query}"
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = answer.read()
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return entries
            raise RuntimeError(f"listing {path} in the store's filer: HTTP {error.code}") from error
        page = directory(body, path)
        if page is None:
            return None
        entries.extend(page.get("Entries") or [])
        last = page.get("LastFileName", "")
        if not page.get("ShouldDisplayLoadMore") or not last:
            return entries


def directory(body, path):
    """The filer's listing of the directory `path` in `body`, or None when `body` is a file's
    content (the filer answers a file's path with it)."""
    try:
        page = json.loads(body)
    except ValueError:
        return None
    return page if isinstance(page, dict) and page.get("Path") == path else None


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
        self.running = False  # whether a job that may write runs

    def mend(self, requests):
        """Gives every acceptable request its identity and Secret, and takes the identities of
        the others away."""
        have, writes = identities()
        by_identity = {identity_of(r): r for r in requests}
        commands, granted = self.grant(requests, have)
        wanted = {m for m, r in by_identity.items() if r["metadata"]["name"] in granted}
        self.minted &= wanted
        self.delivered &= wanted
        self.warned = {m: why for m, why in self.warned.items() if m in by_identity}
        for gone in sorted(set(have) - wanted):
            commands.append(f"s3.configure -user={IDENTITY}{gone} -delete -apply")
            print(f"model keys: the keys of {gone.rsplit('.', 1)[0]} withdrawn", flush=True)
        if commands:
            shell(commands)
            # Only keys the server now holds are handed out (a refused command is retried).
            have, writes = identities()
        for m in sorted(wanted & set(have)):
            self.deliver(by_identity[m], have[m])
        self.narrow({m: by_identity[m] for m in wanted & set(have)}, writes)

    def narrow(self, requests, writes):
        """Gives the keys of `requests` (identity -> request) write access to the paths of their
        jobs that may still be written ([writable]), and to no other; notes whether one of
        those jobs runs."""
        commands = []
        self.running = False
        for made, request in sorted(requests.items()):
            held = writes.get(made, set())
            want, running = writable(request, self.namespace, held)
            self.running = self.running or running
            if want - held:
                commands.append(f"s3.configure -user={IDENTITY}{made} -actions={','.join(sorted(want - held))} -apply")
            if held - want:
                commands.append(f"s3.configure -user={IDENTITY}{made} -actions={','.join(sorted(held - want))} "
                                "-delete -apply")
                paths = ", ".join(sorted(a[len("Write:"):-len("/*")] for a in held - want))
                print(f"model keys: {request['metadata']['name']}'s keys no longer write below {paths}", flush=True)
        if commands:
            shell(commands)

    def grant(self, requests, have):
        """The s3.configure commands that make the identities of the acceptable requests that
        have none (their keys put in `have`), and the acceptable requests' prefixes by name,
        oldest first; the others get a Warning event."""
        granted = {}
        commands = []
        buckets = json.loads(os.environ["JOB_BUCKETS"])
        for request in sorted(requests, key=lambda r: (r["metadata"]["creationTimestamp"], r["metadata"]["name"])):
            name, made = request["metadata"]["name"], identity_of(request)
            prefix = (request.get("data") or {}).get("prefix", "")
            why = refusal(prefix, granted, buckets)
            if not why and made not in have:
                why = written(prefix)
            if why:
                self.warn(request, why)
                continue
            self.warned.pop(made, None)
            granted[name] = prefix
            if made not in have:
                keys = have[made] = ("mlkube" + secrets.token_hex(10), secrets.token_urlsafe(30))
                reads = [f"Read:{prefix}/*", f"List:{prefix.split('/')[0]}"]
                actions = ",".join(sorted(writable(request, self.namespace, set())[0]) + reads)
                commands.append(f"s3.configure -user={IDENTITY}{made} -access_key={keys[0]} "
                                f"-secret_key={keys[1]} -actions={actions} -apply")
                self.minted.add(made)
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
            # Secret still to create (the old one of its name not yet deleted) is tried again soon,
            # and a running job is read again soon: its keys stop writing once it has finished.
            wait = RETRY if keys.minted else FOLLOW if keys.running else RESYNC
            for _ in watch_lines(f"{path}&watch=1&resourceVersion={version}&timeoutSeconds={wait}", wait + 30):
                break
        except (OSError, RuntimeError, ValueError, subprocess.SubprocessError) as error:
            print(f"model keys: {error}; again in 5 s", file=sys.stderr, flush=True)
            time.sleep(5)


if __name__ == "__main__":
    main()
