"""Sends one command to a Redis server and returns its reply, for the bench scripts (no redis-cli needed).

python3 deploy/local/rediscmd.py HOST:PORT COMMAND [ARG...] prints the reply (a bulk string as is)."""
import socket
import sys


def _read_reply(f):
    line = f.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2].decode(errors="replace")
    if kind == b"+":
        return rest
    if kind == b"-":
        raise OSError(rest)
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise OSError(f"unexpected reply {line!r}")


def command(addr, *args, timeout=10):
    """Runs one command on the server at addr (host:port) and returns its reply."""
    host, port = addr.rsplit(":", 1)
    msg = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a.encode()), a.encode()) for a in args)
    with socket.create_connection((host, int(port)), timeout=timeout) as c:
        c.sendall(msg)
        return _read_reply(c.makefile("rb"))


def commandstats(addr):
    """The server's INFO commandstats as {command: (calls, usec)}."""
    out = {}
    for line in command(addr, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, _, fields = line[len("cmdstat_"):].partition(":")
            kv = dict(f.split("=", 1) for f in fields.split(","))
            out[name] = (int(kv["calls"]), int(kv["usec"]))
    return out


if __name__ == "__main__":
    print(command(sys.argv[1], *sys.argv[2:]))
