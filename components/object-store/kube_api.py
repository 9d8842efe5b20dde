"""Requests to the API server as the pod's ServiceAccount, for the store's scripts: standard
library only, the token and CA the kubelet mounts."""

import json
import os
import ssl
import urllib.error
import urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def request(method, path, body=None):
    """One request to the API server, with the token and CA, not sent yet."""
    with open(f"{ACCOUNT}/token") as token:
        headers = {"Authorization": "Bearer " + token.read().strip(), "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        merge = method == "PATCH"
        headers["Content-Type"] = "application/merge-patch+json" if merge else "application/json"
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ["KUBERNETES_SERVICE_PORT"]
    return urllib.request.Request(f"https://{host}:{port}{path}", data, headers, method=method)


def context():
    """TLS that trusts the cluster's CA alone."""
    return ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")


def api(method, path, body=None):
    """(status, JSON body) of one request to the API server."""
    try:
        with urllib.request.urlopen(request(method, path, body), context=context(), timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"message": text.decode(errors="replace")}


def watch_lines(path, timeout):
    """The events of a watch (`path` with watch=1), one JSON object each, until the server ends
    it; raises OSError when it cannot start or breaks off (no event for `timeout` seconds)."""
    with urllib.request.urlopen(request("GET", path), context=context(), timeout=timeout) as response:
        for line in response:
            if line.strip():
                yield json.loads(line)
