"""Starts moto_server on 127.0.0.1 and prints `PORT=<n>` once it answers.

The test bed's one AWS endpoint: S3, SQS, EventBridge, Secrets Manager, STS and EKS. Extensions
to moto that the tests need are installed here before the server starts, so every test talks to
the same patched server:
- moto_eks_ext: EKS access entries, a real certificate authority, `accessConfig`, clusters that
  stay CREATING for a while, and presigned STS GetCallerIdentity (EKS tokens) answered;
- moto_faults: 5xx, throttling and hangs at a chosen AWS operation (`/_cellbridge/faults`);
- moto_leak: the credentials STS mints are registered as secrets for tests/leak_check.py.
"""
import argparse
import os
import sys

from moto.server import ThreadedMotoServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import moto_eks_ext  # noqa: E402  (EKS access entries, real CA, authentication mode, CREATING)
import moto_faults  # noqa: E402  (5xx, throttling and hangs at a chosen AWS operation)
import moto_leak  # noqa: E402  (STS-minted credentials registered for the leak check)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    moto_eks_ext.install()
    moto_leak.install()
    moto_faults.install()  # outermost: a fault can hit any service, the extension's too
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    port = server._server.server_port  # the real port when 0 was asked for
    print(f"PORT={port}", flush=True)
    try:
        sys.stdin.read()  # run until the parent closes our stdin (or dies)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
