#!/usr/bin/env python3
"""Sets the slow seconds of bench-auctions.sh's open-loop Endcap rounds beside what the machine did then.

    auction-timeline.py OUTDIR CPU_TSV label=logfile [label=logfile ...]

OUTDIR holds the rounds' reports (open-endcap-<r>.json, with `timeline` and `measure_start`), CPU_TSV is what
sample-cpu.py wrote, and each log is a Go process's stderr run with GODEBUG=gctrace=1 (its label as in
CPU_TSV's `# start` lines). For every second with more than 1 % slow requests it prints the share and the
worst latency, the CPU of each sampled process in that second, and the collections under way; then, per
round, how many of the slow requests fell in seconds with a collection under way.
"""
import datetime
import glob
import json
import re
import sys

GC = re.compile(r"^gc (\d+) @([\d.]+)s \d+%: ([\d.]+)\+([\d.]+)\+([\d.]+) ms clock")


def parse_time(s):
    # RFC 3339 with nanoseconds: Python takes at most microseconds.
    m = re.match(r"(.*?T\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", s)
    frac = (m.group(2) or ".0")[:7]
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.datetime.fromisoformat(m.group(1) + frac + tz).timestamp()


def main():
    out, cpu_path = sys.argv[1], sys.argv[2]
    starts, cpu = {}, []
    for line in open(cpu_path):
        if line.startswith("# start "):
            _, _, label, epoch = line.split()
            starts[label] = float(epoch)
            continue
        cols = line.rstrip("\n").split("\t")
        cpu.append((float(cols[0]), dict(c.split("=", 1) for c in cols[1:])))
    cycles = []  # (label, n, start epoch, end epoch)
    for arg in sys.argv[3:]:
        label, path = arg.split("=", 1)
        if label not in starts:
            continue
        for line in open(path, errors="replace"):
            m = GC.match(line)
            if m:
                t0 = starts[label] + float(m.group(2))
                clock = sum(float(m.group(i)) for i in (3, 4, 5)) / 1000
                cycles.append((label, int(m.group(1)), t0, t0 + clock))

    def cpu_at(t):
        best = None
        for ts, vals in cpu:  # the sample that covers [ts-1, ts)
            if ts - 1 <= t < ts:
                best = vals
        return best or {}

    for path in sorted(glob.glob(f"{out}/open-endcap-*.json")):
        rep = json.load(open(path))
        if "measure_start" not in rep or not rep.get("timeline"):
            continue
        t0 = parse_time(rep["measure_start"])
        slow_all = slow_gc = 0
        print(f"{path.rsplit('/', 1)[1]}: p99 {rep['p99_ms']:.1f} ms")
        for s in rep["timeline"]:
            t = t0 + s["s"]
            under = [f"{c[0]}#{c[1]}" for c in cycles if c[2] < t + 1 and c[3] > t]
            slow_all += s["slow"]
            if under:
                slow_gc += s["slow"]
            if s["slow"] * 100 <= s["requests"]:
                continue
            # CPU during the second: the samples ending in it and the next.
            c = cpu_at(t + 0.5)
            procs = " ".join(f"{k} {v}" for k, v in sorted(c.items()) if k not in ("machine", "others") and int(v) >= 5)
            if c.get("others"):
                procs += " | others " + c["others"].replace(",", " ").replace(":", " ")
            print(f"  +{s['s']:3d}s slow {100 * s['slow'] / s['requests']:5.1f}% max {s['max_ms']:8.1f} ms | "
                  f"machine {c.get('machine', '?'):>3s} % | {procs} | gc: {' '.join(under) or '-'}")
        if slow_all:
            print(f"  slow requests in seconds with a collection under way: {slow_gc} of {slow_all}")


if __name__ == "__main__":
    main()
