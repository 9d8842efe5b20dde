"""Recompute a served digits model's held-out accuracy through its server's V2 API.

Sends the 450 held-out digits (the same split the training examples hold out: test_size 0.25,
random_state 0, stratified) to POST <url>/v2/models/<model>/infer in batches, as one FP32
tensor `pixels` of shape [n, 64], takes the most probable digit of each answer's first output
and prints `metric accuracy=<value>`, the form the training jobs print theirs in, then which
versions answered (each answer's model_version), e.g. `answered by v1=450`.

    python3 digits_predict.py --url http://digits-v1:8080 --model digits            # XGBoost
    python3 digits_predict.py --url http://digits-v1:8080 --model digits --scale 16 # TensorFlow

--scale divides the pixels (0-16) first, as tf_digits.py and jax_digits.py train on them;
xgboost_digits.py trains on them as they are. A refused connection is tried again for about
15 s: where NetworkPolicies are enforced, a new pod is admitted a moment after it starts. Exits
2, saying why, when the server still refuses or answers with an error.
"""

import argparse
import collections
import json
import time
import urllib.error
import urllib.request

from digits_store import fail, load_digits_xy, positive
from sklearn.model_selection import train_test_split


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="the server, e.g. http://digits-v1:8080")
    p.add_argument("--model", required=True, help="the model's name in the server")
    p.add_argument("--scale", type=positive(float), default=1.0, help="divide the pixels by it")
    p.add_argument("--batch", type=positive(int), default=50, help="digits per request")
    p.add_argument("--data", default=None, help="digits.csv.gz, or a directory holding it")
    return p.parse_args()


def urlopen_retrying(request, tries=6):
    """urllib's urlopen, a refused connection tried again, the pauses growing from 0.5 s to 8 s
    (about 15 s in all); any other error is raised at once."""
    for attempt in range(tries):
        try:
            return urllib.request.urlopen(request, timeout=60)
        except urllib.error.URLError as e:
            if not isinstance(e.reason, ConnectionRefusedError) or attempt == tries - 1:
                raise
        time.sleep(0.5 * 2**attempt)


def infer(url, model, rows):
    body = {"inputs": [{"name": "pixels", "shape": [len(rows), 64], "datatype": "FP32",
                        "data": [v for row in rows for v in row]}]}
    request = urllib.request.Request(
        f"{url.rstrip('/')}/v2/models/{model}/infer",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urlopen_retrying(request) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        fail(f"{request.full_url} answered {e.code}: {e.read().decode(errors='replace')[:300]}",
             "check the model's name and that the server is ready")
    except OSError as e:
        fail(f"cannot reach {request.full_url}: {e}", "check the URL and that the server runs")


def main():
    args = parse_args()
    x, y = load_digits_xy(args.data)
    _, x_test, _, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    x_test = (x_test / args.scale).tolist()
    correct, versions = 0, collections.Counter()
    for start in range(0, len(x_test), args.batch):
        rows = x_test[start:start + args.batch]
        answer = infer(args.url, args.model, rows)
        output = answer["outputs"][0]
        classes = output["shape"][1]
        data = output["data"]
        for i, label in enumerate(y_test[start:start + len(rows)]):
            scores = data[i * classes:(i + 1) * classes]
            correct += int(max(range(classes), key=scores.__getitem__) == label)
        versions[answer.get("model_version", "?")] += len(rows)
    print(f"metric accuracy={correct / len(x_test):.4f}")
    print("answered by " + " ".join(f"{v}={n}" for v, n in sorted(versions.items())))


if __name__ == "__main__":
    main()
