"""KServe's own Python SDK (the `kserve` wheel, unchanged) driving mlkube's InferenceService
controller on the real nodes, as a KServe user's notebook would:

    python3 kserve_sdk.py --kubeconfig K --namespace NS --gateway http://127.0.0.1:30080 \
        --endpoint object-store:9000 --access-key A --secret-key S

`set_credentials` writes the store's keys (a Secret annotated with the endpoint, and the
ServiceAccount that lists it), `create` an InferenceService of the digits model's v1,
`wait_isvc_ready` waits for it, `get` reads its `status.url`, and KServe's `InferenceRESTClient`
predicts at that URL (its connections go to the gateway's port, the host name kept: this
machine has no DNS for example.com). `patch` then makes v2 a canary at 20%, `replace` promotes it
with canaryTrafficPercent 100, and `delete` takes it all away. One JSON line of what it measured;
an AssertionError, exit status 1, when anything differs from what KServe promises.

One thing a KServe user must know, which this script does as they would: `set_credentials`
puts the keys into the Secret's `data` as they are, and the API server expects base64 there,
so the credentials file holds the keys base64-encoded.
"""

import argparse
import asyncio
import base64
import json
import os
import tempfile
import time

import httpx
from kubernetes import client as k8s
from kserve import (
    InferenceRESTClient,
    InferInput,
    InferRequest,
    KServeClient,
    RESTConfig,
    V1beta1InferenceService,
    V1beta1InferenceServiceSpec,
    V1beta1ModelFormat,
    V1beta1ModelSpec,
    V1beta1PredictorSpec,
    constants,
)

ACCOUNT = "sdk-models"
TIMEOUT = 300


def inference_service(name, namespace, version, uri, canary=None):
    """The digits model's `version` at `uri` on MLServer (V2), as KServe's SDK writes one."""
    model = V1beta1ModelSpec(
        model_format=V1beta1ModelFormat(name="xgboost"),
        protocol_version="v2",
        storage_uri=uri,
        args=["--version", version],
        resources={"requests": {"cpu": "100m", "memory": "256Mi"}},
    )
    predictor = V1beta1PredictorSpec(
        service_account_name=ACCOUNT, model=model, canary_traffic_percent=canary
    )
    return V1beta1InferenceService(
        api_version=constants.KSERVE_V1BETA1,
        kind=constants.KSERVE_KIND_INFERENCESERVICE,
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        spec=V1beta1InferenceServiceSpec(predictor=predictor),
    )


class ToGateway(httpx.AsyncHTTPTransport):
    """Connections to the gateway's address, the URL's host name kept in the Host header."""

    def __init__(self, gateway):
        super().__init__()
        self.gateway = httpx.URL(gateway)

    async def handle_async_request(self, request):
        request.headers["host"] = request.url.netloc.decode()
        request.url = request.url.copy_with(host=self.gateway.host, port=self.gateway.port)
        return await super().handle_async_request(request)


async def predictions(url, name, gateway, count):
    """What `count` V2 predictions at `url` answered, by KServe's REST client: each answer's
    probabilities, rounded. (Its InferResponse drops the server's model_version, so a version is
    told by what it predicts: v1 and v2 were trained differently.)"""
    rest = InferenceRESTClient(RESTConfig(protocol="v2", transport=ToGateway(gateway)))
    pixels = [float(i % 17) for i in range(64)]
    seen = []
    for _ in range(count):
        request = InferRequest(
            model_name=name,
            infer_inputs=[InferInput("pixels", [1, 64], "FP32", pixels)],
        )
        response = await rest.infer(url, request, model_name=name)
        assert response.model_name == name, response.model_name
        seen.append(tuple(round(float(p), 5) for p in response.outputs[0].data))
    return seen


def status_of(kserve, name, namespace):
    return kserve.get(name, namespace=namespace).get("status", {})


def traffic(status):
    return [
        (t["revisionName"], t["percent"])
        for t in status.get("components", {}).get("predictor", {}).get("traffic", [])
    ]


def until(what, check):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def credentials(kserve, args):
    """The store's keys set KServe's way, from an AWS credentials file."""
    encode = lambda key: base64.b64encode(key.encode()).decode()  # noqa: E731
    with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as file:
        file.write(
            "[default]\n"
            f"aws_access_key_id = {encode(args.access_key)}\n"
            f"aws_secret_access_key = {encode(args.secret_key)}\n"
        )
    try:
        kserve.set_credentials(
            storage_type="s3",
            namespace=args.namespace,
            credentials_file=file.name,
            service_account=ACCOUNT,
            s3_endpoint=args.endpoint,
            s3_use_https="0",
        )
    finally:
        os.unlink(file.name)


def main():
    p = argparse.ArgumentParser()
    for flag in ["kubeconfig", "namespace", "gateway", "endpoint", "access-key", "secret-key"]:
        p.add_argument("--" + flag, required=True)
    p.add_argument("--name", default="sdk-digits")
    args = p.parse_args()
    name, ns = args.name, args.namespace
    kserve = KServeClient(config_file=args.kubeconfig)
    gone = lambda: not any(  # noqa: E731
        i["metadata"]["name"] == name for i in kserve.get(namespace=ns)["items"]
    )
    if not gone():
        kserve.delete(name, namespace=ns)  # a failed run's
        until("a failed run's InferenceService to go", gone)
    credentials(kserve, args)
    v1 = "s3://models/xgboost-digits/v1/"
    v2 = "s3://models/xgboost-digits/v2/"
    kserve.create(inference_service(name, ns, "v1", v1), namespace=ns)
    kserve.wait_isvc_ready(name, namespace=ns, timeout_seconds=TIMEOUT, polling_interval=2)
    status = status_of(kserve, name, ns)
    url = status["url"]
    assert url == f"http://{name}-{ns}.example.com", url
    first = asyncio.run(predictions(url, name, args.gateway, 20))
    assert len(set(first)) == 1, f"v1 alone answers one prediction: {set(first)}"
    v1_answer = first[0]

    # A canary of v2 at 20% by patch; then promoted by replace with 100.
    canary = inference_service(name, ns, "v2", v2, canary=20)
    kserve.patch(name, canary, namespace=ns)
    status = until("the canary's share", lambda: len(traffic(status_of(kserve, name, ns))) == 2 and status_of(kserve, name, ns))
    kserve.wait_isvc_ready(name, namespace=ns, timeout_seconds=TIMEOUT, polling_interval=2)
    split = asyncio.run(predictions(url, name, args.gateway, 400))
    v2_answers = {a for a in split if a != v1_answer}
    assert len(v2_answers) == 1, f"v2 answers one other prediction: {v2_answers}"
    share = sum(a != v1_answer for a in split) / len(split)
    assert 0.12 <= share <= 0.28, f"v2 answered {share:.1%} at canaryTrafficPercent 20"
    latest = status["components"]["predictor"]["latestCreatedRevision"]
    promoted = inference_service(name, ns, "v2", v2, canary=100)
    kserve.replace(name, promoted, namespace=ns)
    until("the promotion", lambda: traffic(status_of(kserve, name, ns)) == [(latest, 100)])
    after = until(
        "v2 alone answering",
        lambda: set(seen := asyncio.run(predictions(url, name, args.gateway, 20))) == v2_answers and seen,
    )
    final = status_of(kserve, name, ns)["components"]["predictor"]

    kserve.delete(name, namespace=ns)
    apps = k8s.AppsV1Api()
    selector = f"serving.kserve.io/inferenceservice={name}"
    until("its Deployments to go", lambda: not apps.list_namespaced_deployment(ns, label_selector=selector).items)
    print(json.dumps({
        "url": url, "canary_share": round(share, 3), "canary_requests": len(split),
        "rolled_out": final["latestRolledoutRevision"], "previous": final.get("previousRolledoutRevision"),
        "answers_after_promotion": len(after),
    }))


if __name__ == "__main__":
    main()
