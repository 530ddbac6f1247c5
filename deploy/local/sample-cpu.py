#!/usr/bin/env python3
"""Samples, every second, the CPU of some processes and of their children, and of the whole machine.

    sample-cpu.py OUT label=pid [label=pid ...]

OUT gets a header line `# start <label> <epoch>` per process (when it started, to place its GODEBUG=gctrace=1
lines, which count seconds from the process's start), then one tab-separated line per second:
`epoch <label> ... <label>/<child comm> ... others machine` in percent of one core since the previous line
(children are found anew each second; a child that appears later gets its own column from then on, written
as `name=value` pairs; `others` lists the three busiest other processes or kernel threads, at 5 % or more). It runs until killed. Linux only (/proc).
"""
import os
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def btime():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    return 0


def stat(pid):
    """(utime+stime ticks, starttime ticks) of pid, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()  # after "pid (comm) "
    return int(fields[11]) + int(fields[12]), int(fields[19])


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def children(pid):
    """The children of every thread of pid (a child belongs to the thread that started it)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle, sum(v)


def main():
    out = open(sys.argv[1], "w", buffering=1)
    roots = []
    bt = btime()
    for arg in sys.argv[2:]:
        label, pid = arg.split("=", 1)
        roots.append((label, int(pid)))
        st = stat(int(pid))
        if st:
            out.write(f"# start {label} {bt + st[1] / TICK:.2f}\n")
    prev, prev_all = {}, {}
    prev_busy = machine_busy()
    prev_t = time.time()
    while True:
        time.sleep(1)
        now = time.time()
        cur = {}
        for label, pid in roots:
            cur[label] = (pid, stat(pid))
            for c in children(pid):
                cur[f"{label}/{comm(c)}"] = (c, stat(c))
        busy = machine_busy()
        dt = now - prev_t
        cols = [f"{now:.2f}"]
        for name, (pid, st) in cur.items():
            if st is None:
                continue
            p = prev.get(name)
            if p and p[0] == pid:
                cols.append(f"{name}={100 * (st[0] - p[1]) / TICK / dt:.0f}")
        # The busiest other processes and kernel threads of the second (the load generator, kswapd...).
        every = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = stat(int(d))
                if st:
                    every[int(d)] = st[0]
        mine = {pid for pid, _ in cur.values()}
        others = sorted(((100 * (t - prev_all[pid]) / TICK / dt, pid) for pid, t in every.items()
                         if pid in prev_all and pid not in mine), reverse=True)
        top = [f"{comm(pid)}:{v:.0f}" for v, pid in others[:3] if v >= 5]
        if top:
            cols.append("others=" + ",".join(top))
        prev_all = every
        ticks = (busy[0] - prev_busy[0], busy[1] - prev_busy[1])
        ncpu = os.cpu_count() or 1
        if ticks[1] > 0:
            cols.append(f"machine={100 * ncpu * ticks[0] / ticks[1]:.0f}")
        out.write("\t".join(cols) + "\n")
        prev = {name: (pid, st[0]) for name, (pid, st) in cur.items() if st}
        prev_busy, prev_t = busy, now


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
