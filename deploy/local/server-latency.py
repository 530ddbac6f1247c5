#!/usr/bin/env python3
"""The server's own view of a load round: Endcap's endcap_http_request_duration_seconds histogram of one route,
read before and after the round.

    server-latency.py snapshot URL ROUTE FILE   # before the round: writes the histogram's buckets to FILE
    server-latency.py report URL ROUTE FILE     # after it: prints the round's requests as the server timed them

The report gives the requests the server finished during the round, the share slower than 10 ms and 25 ms, and
the p50/p99 interpolated within the buckets. The server times a request from its first middleware to the end of
its handler (body read, auction, answer written). What a client measures on top of that is the time before the
handler ran (the kernel's accept and receive queues, the Go scheduler) and the client's own delays: when the
client's p99 is far above the server's, the tail is outside the handler.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from metrics import samples  # noqa: E402

NAME = "endcap_http_request_duration_seconds_bucket"


def buckets(url, route):
    out = {}
    for name, labels, value in samples(url):
        if name == NAME and labels.get("route") == route and labels.get("method") == "POST":
            le = labels["le"]
            out[le] = out.get(le, 0) + value
    return out


def quantile(bounds, counts, q):
    """bounds: upper bounds ascending (inf last), counts: cumulative; linear within the bucket."""
    total = counts[-1]
    if total == 0:
        return float("nan")
    rank = q * total
    lo, prev = 0.0, 0.0
    for b, c in zip(bounds, counts):
        if c >= rank:
            if b == float("inf"):
                return lo
            return lo + (b - lo) * ((rank - prev) / (c - prev) if c > prev else 0)
        lo, prev = b, c
    return lo


def main():
    mode, url, route, path = sys.argv[1:5]
    now = buckets(url, route)
    if mode == "snapshot":
        json.dump(now, open(path, "w"))
        return
    before = json.load(open(path))
    les = sorted(now, key=lambda s: float(s))
    bounds = [float(s) for s in les]
    counts = [now[s] - before.get(s, 0) for s in les]
    total = counts[-1] if counts else 0
    if total <= 0:
        print("    server: no requests timed")
        return

    def over(sec):
        for b, c in zip(bounds, counts):
            if abs(b - sec) < 1e-12:
                return 100 * (total - c) / total
        return float("nan")

    print(f"    server (handler) view: {total:.0f} requests  p50 {1000 * quantile(bounds, counts, 0.5):.2f}"
          f"  p99 {1000 * quantile(bounds, counts, 0.99):.2f} ms  over 10 ms {over(0.01):.2f} %"
          f"  over 25 ms {over(0.025):.2f} %")


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError) as e:  # metrics unreachable, a snapshot missing: the bench goes on without it
        print(f"    server view unavailable: {e}")
