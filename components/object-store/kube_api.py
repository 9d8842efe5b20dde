"""Requests to the API server as the pod's ServiceAccount, for the store's scripts: standard
library only, the token and CA the kubelet mounts."""

import json
import os
import ssl
import urllib.error
import urllib.request

ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def api(method, path, body=None):
    """(status, JSON body) of one request to the API server."""
    with open(f"{ACCOUNT}/token") as token:
        headers = {"Authorization": "Bearer " + token.read().strip(), "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        merge = method == "PATCH"
        headers["Content-Type"] = "application/merge-patch+json" if merge else "application/json"
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ["KUBERNETES_SERVICE_PORT"]
    request = urllib.request.Request(f"https://{host}:{port}{path}", data, headers, method=method)
    context = ssl.create_default_context(cafile=f"{ACCOUNT}/ca.crt")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, {"message": text.decode(errors="replace")}
