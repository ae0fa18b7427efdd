#!/usr/bin/env python3
"""Publishes the web console's build (console/dist) to the stack's bucket, with the
config.json that points it at the stack's API and user pool; `make deploy` runs it after
`sam deploy`. `--empty` removes every object and version instead (`make delete` runs it, since
CloudFormation cannot delete a bucket that holds files).

The stack and region come from samconfig.toml (what `sam deploy --guided` saved), or from
--stack-name and --region. With an external user pool (UserPoolArn), name the pool, the
console's app client (authorization code flow with PKCE, callback the ConsoleUrl output) and
the pool's hosted UI domain: CONSOLE_USER_POOL_ID, CONSOLE_CLIENT_ID and CONSOLE_AUTH_DOMAIN.
"""

import argparse
import json
import mimetypes
import os
import pathlib
import sys
import tomllib

import boto3
from botocore.exceptions import ClientError

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIST = ROOT / "console" / "dist"
# Files whose names do not change between builds: browsers and CloudFront must ask again.
NO_CACHE = {"index.html", "config.json"}


def saved_settings():
    path = ROOT / "samconfig.toml"
    if not path.exists():
        return {}
    params = tomllib.loads(path.read_text()).get("default", {}).get("deploy", {}).get("parameters", {})
    return {"stack_name": params.get("stack_name"), "region": params.get("region")}


def outputs(cfn, stack):
    described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def console_config(out):
    pool = out.get("UserPoolId") or os.environ.get("CONSOLE_USER_POOL_ID")
    client = out.get("UserPoolClientId") or os.environ.get("CONSOLE_CLIENT_ID")
    domain = out.get("UserPoolDomain") or os.environ.get("CONSOLE_AUTH_DOMAIN")
    if not (pool and client and domain):
        sys.exit(
            "The stack uses an external user pool: set CONSOLE_USER_POOL_ID, CONSOLE_CLIENT_ID "
            "and CONSOLE_AUTH_DOMAIN for the console (see the module's docstring)."
        )
    # A pool id is "{region}_{id}": an external pool may live in another region.
    region = pool.split("_", 1)[0]
    return {
        "api": out["ApiUrl"],
        "auth": "cognito",
        "authority": f"https://cognito-idp.{region}.amazonaws.com/{pool}",
        "client_id": client,
        "auth_domain": domain.rstrip("/"),
    }


def cache_control(key):
    if key in NO_CACHE:
        return "no-cache"
    if key.startswith("assets/"):
        # Vite names every asset by its content's hash.
        return "public, max-age=31536000, immutable"
    return "public, max-age=300"


def publish(s3, bucket, config):
    if not (DIST / "index.html").is_file():
        sys.exit(f"{DIST} has no build: run `make console` first.")
    for path in sorted(p for p in DIST.rglob("*") if p.is_file()):
        key = path.relative_to(DIST).as_posix()
        if key == "config.json":
            continue
        kind = mimetypes.guess_type(key)[0] or "application/octet-stream"
        s3.upload_file(str(path), bucket, key, ExtraArgs={"ContentType": kind, "CacheControl": cache_control(key)})
    # Last, so a page never reads a config naming a build that is not there yet.
    s3.put_object(
        Bucket=bucket,
        Key="config.json",
        Body=json.dumps(config, indent=2).encode(),
        ContentType="application/json",
        CacheControl=cache_control("config.json"),
    )


def empty(s3, bucket):
    paginator = s3.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=bucket):
        doomed = [
            {"Key": v["Key"], "VersionId": v["VersionId"]}
            for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
        ]
        if doomed:
            answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": doomed, "Quiet": True})
            if answer.get("Errors"):
                sys.exit(f"Could not delete from s3://{bucket}: {answer['Errors'][:3]}")


def main():
    saved = saved_settings()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack-name", default=saved.get("stack_name"))
    parser.add_argument("--region", default=saved.get("region") or os.environ.get("AWS_REGION"))
    parser.add_argument("--empty", action="store_true", help="remove the console's files (before deleting the stack)")
    args = parser.parse_args()
    if not args.stack_name:
        sys.exit("No stack name: pass --stack-name, or deploy once with `make deploy` (samconfig.toml).")
    session = boto3.session.Session(region_name=args.region)
    try:
        out = outputs(session.client("cloudformation"), args.stack_name)
    except ClientError as e:
        # Only a stack that is not there leaves nothing to empty; any other error (access,
        # credentials) must stop `make delete` before `sam delete` meets a full bucket.
        if args.empty and "does not exist" in e.response["Error"].get("Message", ""):
            # Nothing to empty: let `sam delete` go on (and say what it finds).
            print(f"No console bucket to empty ({e.response['Error']['Message']})")
            return
        raise
    bucket = out.get("ConsoleBucketName")
    if not bucket:
        if args.empty:
            print(f"Stack {args.stack_name} has no console bucket: nothing to empty")
            return
        sys.exit(f"Stack {args.stack_name} has no ConsoleBucketName output: deploy this version first.")
    s3 = session.client("s3")
    if args.empty:
        empty(s3, bucket)
        print(f"Emptied s3://{bucket}")
        return
    publish(s3, bucket, console_config(out))
    print(f"The console is at {out['ConsoleUrl']}")


if __name__ == "__main__":
    main()
