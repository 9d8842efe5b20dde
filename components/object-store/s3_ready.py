"""The object store's readiness: a signed S3 request answered, and every bucket there.

Lists the buckets at S3_ENDPOINT with the credentials in the environment (boto3) and exits 1,
saying why, when the request fails or a bucket of S3_BUCKETS (comma-separated) is missing. So
the store is Ready, and `mlkube status` healthy, only while it answers S3 requests.
"""

import os
import sys

import boto3
from botocore.config import Config


def main():
    client = boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT"],
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        config=Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1}),
    )
    try:
        names = {bucket["Name"] for bucket in client.list_buckets()["Buckets"]}
    except Exception as error:  # any failure means not ready; say which
        sys.exit(f"not ready: ListBuckets at {os.environ['S3_ENDPOINT']} failed: {error}")
    wanted = [name for name in os.environ.get("S3_BUCKETS", "").split(",") if name]
    missing = [name for name in wanted if name not in names]
    if missing:
        sys.exit(f"not ready: no bucket {', '.join(missing)} yet")


if __name__ == "__main__":
    main()
