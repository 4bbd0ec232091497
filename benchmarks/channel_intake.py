"""Channel webhook intake, pure part: the cost of verify + parse per signed request, and the
cold import of the intake path next to `import boto3`.

Usage: python benchmarks/channel_intake.py [--requests N] [--runs N]
Prints, per provider, p50/p99 µs of `intake.receive` (installation lookup, HMAC verify, parse,
ack) over N distinct signed requests, then the median cold import ms of the webhook path.
The inbox write (one DynamoDB transaction) comes on top; it is measured with the route.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from threads_aws.channels.installations import parse_installations
from threads_aws.channels.intake import receive
from threads_aws.channels.secrets import SecretResolver
from threads_aws_dev.fakes import slack as fs
from threads_aws_dev.fakes import whatsapp as fw

NOW_S = 1_790_000_000


def _installs():
    return parse_installations(
        {
            "installations": [
                {
                    "channel": "slack",
                    "installation_id": "T1",
                    "tenant": "acme",
                    "agent": "demo",
                    "secrets": {"signing_secret": {"value": "s1"}, "bot_token": {"value": "x"}},
                },
                {
                    "channel": "whatsapp",
                    "installation_id": "111",
                    "tenant": "acme",
                    "agent": "demo",
                    "secrets": {
                        "app_secret": {"value": "a1"},
                        "verify_token": {"value": "v"},
                        "access_token": {"value": "x"},
                    },
                },
            ]
        }
    )


def _slack(i: int):
    ev = fs.message_event("C1", "U1", f"message {i} " + "x" * 200, f"{NOW_S}.{i:06d}")
    doc = fs.event_callback(ev, team_id="T1", event_id=f"Ev{i}", event_time=NOW_S)
    return fs.signed_json("s1", doc, timestamp=NOW_S).request()


def _whatsapp(i: int):
    m = fw.text_message("15551234", f"message {i} " + "x" * 200, wamid=f"wamid.{i}", timestamp=NOW_S)
    return fw.signed("a1", fw.webhook("111", messages=[m])).request()


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def _cold(module: str, runs: int) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print((time.perf_counter() - t) * 1000)"
    samples = []
    for i in range(runs + 1):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        if i:
            samples.append(float(out.stdout.strip()))
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    installs, resolver = _installs(), SecretResolver(env={})
    for channel, make in (("slack", _slack), ("whatsapp", _whatsapp)):
        reqs = [make(i) for i in range(args.requests)]
        took = []
        for r in reqs:
            t = time.perf_counter()
            got = receive(channel, r, installs, resolver, NOW_S * 1000)
            took.append((time.perf_counter() - t) * 1e6)
            assert len(got.items) == 1
        p50, p99 = _pct(took, 0.5), _pct(took, 0.99)
        print(f"{channel:9} receive: p50 {p50:7.1f} µs  p99 {p99:7.1f} µs  (n={len(took)})")
    base = _cold("boto3", args.runs)
    path = _cold(
        "threads_aws.channels.intake, threads_aws.channels.slack, threads_aws.channels.whatsapp", args.runs
    )
    print(f"cold import: boto3 {base:.1f} ms, webhook intake path {path:.1f} ms ({path / base:.2f}x boto3)")


if __name__ == "__main__":
    main()
