"""Reads Endcap's /metrics page (Prometheus text format) for the bench scripts."""
import re
import urllib.request

_line = re.compile(r'^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)')
_labels = re.compile(r'(\w+)="([^"]*)"')


def samples(url):
    """Yields (name, labels, value) for every sample at url + "/metrics"."""
    body = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    for l in body.splitlines():
        r = _line.match(l)
        if r:
            yield r.group(1), dict(_labels.findall(r.group(2) or "")), float(r.group(3))
