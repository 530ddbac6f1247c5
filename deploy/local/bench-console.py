#!/usr/bin/env python3
"""Times every page of the web console against a running Endcap (`make run`, or the seeded stack of
deploy/local/bench-auctions.sh: 1M products, 100k campaigns, 10k vendors) and prints p50, p95 and the
slowest of N sequential requests per page, over one keep-alive connection on loopback (the client adds
well under a millisecond: the figures are the server's time plus that).

  deploy/local/bench-console.py [--url http://127.0.0.1:8080] [--credentials .endcap/dev/credentials.json]
                                [--mail http://127.0.0.1:11080] [-n 100]

It signs in as the demo admin of the credentials file; for the vendor pages it invites a user of vendor
--vendor (default v-1) through the console, reads the link from the maildev inbox and accepts it (once: a later
run signs that user in with the password it set)."""
import argparse, http.client, json, re, statistics, sys, time, urllib.parse, urllib.request
from datetime import date, timedelta

ap = argparse.ArgumentParser()
ap.add_argument("--url", default="http://127.0.0.1:8080")
ap.add_argument("--credentials", default=".endcap/dev/credentials.json")
ap.add_argument("--mail", default="http://127.0.0.1:11080")
ap.add_argument("--vendor", default="v-1")
ap.add_argument("-n", type=int, default=100)
args = ap.parse_args()
creds = json.load(open(args.credentials))
u = urllib.parse.urlparse(args.url)


class Browser:
    def __init__(self):
        self.c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        self.cookies = {}

    def req(self, method, path, form=None):
        body = urllib.parse.urlencode(form) if form is not None else None
        h = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        if body is not None:
            h["Content-Type"] = "application/x-www-form-urlencoded"
        t = time.perf_counter()
        try:
            self.c.request(method, path, body=body, headers=h)
            r = self.c.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # The server closed an idle keep-alive connection: a new one, not timed.
            self.c.close()
            t = time.perf_counter()  # the retry is timed alone
            self.c.request(method, path, body=body, headers=h)
            r = self.c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t
        for k, v in r.getheaders():
            if k.lower() == "set-cookie":
                name, val = v.split(";", 1)[0].split("=", 1)
                self.cookies[name] = val
        return r.status, r.getheader("Location"), data.decode(), dt

    def csrf(self, path):
        _, _, body, _ = self.req("GET", path)
        return re.search(r'name="csrf" value="([^"]+)"', body).group(1)

    def login(self, email, password):
        st, loc, body, dt = self.req("POST", "/console/login", {"csrf": self.csrf("/console/login"), "email": email, "password": password})
        if st != 303:
            sys.exit(f"sign-in of {email}: {st}")
        return dt


def vendor_browser(admin):
    email = f"bench-{args.vendor}@vendor.example"
    password = "bench vendor password"
    b = Browser()
    st, _, _, _ = b.req("POST", "/console/login", {"csrf": b.csrf("/console/login"), "email": email, "password": password})
    if st == 303:
        return b
    st, _, _, _ = admin.req("POST", "/console/users/invite", {"csrf": admin.csrf("/console/users"), "email": email, "vendor": args.vendor, "role": "vendor_analyst"})
    if st != 303:
        sys.exit(f"invite: {st}")
    link = None
    for _ in range(100):
        mails = json.load(urllib.request.urlopen(args.mail + "/api/email"))
        for m in mails:
            if any(t["address"] == email for t in m.get("to", [])):
                link = re.search(r"https?://\S+/console/invite/\S+", m.get("text", ""))
        if link:
            break
        time.sleep(0.2)
    if not link:
        sys.exit("no invitation e-mail in the inbox")
    path = urllib.parse.urlparse(link.group(0)).path
    st, _, _, _ = b.req("POST", path, {"csrf": b.csrf(path), "password": password, "password2": password})
    if st != 303:
        sys.exit(f"accept: {st}")
    return b


admin = Browser()
login_times = [admin.login(creds["adminEmail"], creds["adminPassword"])]  # once: sign-ins are throttled (10 per address per 15 min)
vendor = vendor_browser(admin)
_, _, body, _ = admin.req("GET", f"/console/vendors/{args.vendor}")
campaign = re.search(r'href="/console/campaigns/([^"]+)"', body)
campaign = campaign.group(1) if campaign else "none"
today = date.today()
d90 = (today - timedelta(days=89)).isoformat()
pages = [
    (admin, "/console/keys"), (admin, "/console/settings"), (admin, "/console/vendors"), (admin, "/console/vendors?q=v-99"),
    (admin, f"/console/vendors/{args.vendor}"), (admin, f"/console/vendors/{args.vendor}/performance"),
    (admin, f"/console/vendors/{args.vendor}/performance?from={d90}&to={today.isoformat()}"),
    (admin, "/console/products?q=p-000000012"), (admin, f"/console/products?vendor={args.vendor}&q=a"),
    (admin, f"/console/products?vendor={args.vendor}"),
    (admin, f"/console/campaigns/{campaign}"), (admin, "/console/campaigns"), (admin, "/console/campaigns?status=archived"),
    (admin, "/console/campaigns?name=no-such-name"), (admin, f"/console/campaigns?vendor_id={args.vendor}&status=running"),
    (admin, "NEXT /console/campaigns"), (admin, "/console/explain"), (admin, "/console/users"), (admin, "/console/webhooks"), (admin, "/console/files"),
    (admin, "/console/exports"), (admin, "/console/exports?status=completed"),
    (admin, "/console/health"), (admin, "/console/audit"), (admin, "/console/account"),
    (vendor, "/console/performance"), (vendor, f"/console/performance?from={d90}&to={today.isoformat()}"),
    (vendor, "/console/campaigns"), (vendor, "/console/performance.csv"), (vendor, "/console/exports"), (vendor, "/console/files"),
]
print(f"{'page':<72} {'who':<7} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
worst = 0
# The second page of the campaigns list (its link carries a cursor).
_, _, body, _ = admin.req("GET", "/console/campaigns")
nxt = re.search(r'href="(/console/campaigns\?[^"]+)" rel="next"', body)
nxt = nxt.group(1).replace("&amp;", "&") if nxt else "/console/campaigns"
# The explain form: ten products, the first ten of the vendor's.
_, _, body, _ = admin.req("GET", f"/console/products?vendor={args.vendor}")
explain_ids = ", ".join(re.findall(r'<td class="mono">([^<]+)</td>', body)[:10]) or "p-1"
explain_csrf = admin.csrf("/console/explain")
pages.append((admin, "POST /console/explain"))
for who, path in pages:
    ts = []
    for _ in range(args.n):
        if path == "POST /console/explain":
            st, _, _, dt = who.req("POST", "/console/explain", {"csrf": explain_csrf, "type": "listings", "slots": "4", "products": explain_ids})
        else:
            st, _, _, dt = who.req("GET", nxt if path == "NEXT /console/campaigns" else path)
        if st != 200:
            sys.exit(f"{path}: {st}")
        ts.append(dt * 1000)
    ts.sort()
    p95 = ts[max(0, int(round(0.95 * len(ts))) - 1)]
    worst = max(worst, p95)
    print(f"{path:<72} {'admin' if who is admin else 'vendor':<7} {statistics.median(ts):8.1f} {p95:8.1f} {ts[-1]:8.1f}")
print(f"sign-in (argon2id, once): {statistics.median(login_times) * 1000:.0f} ms")
print(f"slowest page p95: {worst:.1f} ms")
