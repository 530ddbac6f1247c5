// Drives Endcap with the official JS SDK (@topsort/sdk 0.3.8) the way a
// marketplace's server would, and prints one JSON summary on stdout for
// e2e/sdk_test.go to check. Nothing is asserted here: every call's outcome,
// success or thrown error, is reported as it is.
//
// Input: one JSON argument {"url", "apiKey", "productIds", "slots", "eventPrefix"}.
import { TopsortClient } from "@topsort/sdk";

const cfg = JSON.parse(process.argv[2]);

// attempt runs one SDK call and reports its value or the error it threw.
async function attempt(fn) {
  try {
    return { ok: true, value: await fn() };
  } catch (e) {
    return { ok: false, error: describe(e) };
  }
}

// describe turns a thrown value into JSON: the SDK's AppError is
// {status, statusText, body, retry}; anything else (a SyntaxError on a body
// that is not JSON) keeps its name and message.
function describe(e) {
  if (e !== null && typeof e === "object" && "status" in e) {
    return { kind: "AppError", status: e.status, statusText: e.statusText, body: e.body, retry: e.retry };
  }
  return { kind: e?.name ?? typeof e, message: String(e?.message ?? e) };
}

// tamper changes the character in the middle of a resolvedBidId to another
// base64url character.
function tamper(id) {
  const i = Math.floor(id.length / 2);
  return id.slice(0, i) + (id[i] === "A" ? "B" : "A") + id.slice(i + 1);
}

const event = (kind, id, resolvedBidId) => ({
  [kind]: [{ id: `${cfg.eventPrefix}-${id}`, occurredAt: new Date().toISOString(), opaqueUserId: "sdk-user-1", resolvedBidId }],
});
const firstWinner = (r) => (r.ok ? r.value?.results?.[0]?.winners?.[0] : undefined);

const auction = { auctions: [{ type: "listings", slots: cfg.slots, products: { ids: cfg.productIds } }] };
// redirect: "error" (keepalive is the SDK's default fetchOptions): a path
// must be served where it is posted, not redirected, which fetch would
// otherwise follow silently and a browser's CORS preflight could not.
const fetchOptions = { keepalive: true, redirect: "error" };
const client = new TopsortClient({ apiKey: cfg.apiKey, host: cfg.url, timeout: 10_000, fetchOptions });
// A host with a trailing slash: the SDK then posts to //v2/auctions.
const slashed = new TopsortClient({ apiKey: cfg.apiKey, host: `${cfg.url}/`, timeout: 10_000, fetchOptions });

const out = {};
out.auction = await attempt(() => client.createAuction(auction));
const winner = firstWinner(out.auction);
if (winner) {
  out.impression = await attempt(() => client.reportEvent(event("impressions", "imp", winner.resolvedBidId)));
  out.click = await attempt(() => client.reportEvent(event("clicks", "clk", winner.resolvedBidId)));
  out.tamperedBidId = tamper(winner.resolvedBidId);
  out.tampered = await attempt(() => client.reportEvent(event("clicks", "clk-tampered", out.tamperedBidId)));
}
out.slashedAuction = await attempt(() => slashed.createAuction(auction));
const slashedWinner = firstWinner(out.slashedAuction);
if (slashedWinner) {
  out.slashedImpression = await attempt(() => slashed.reportEvent(event("impressions", "imp-slashed", slashedWinner.resolvedBidId)));
}

// The SDK's timeout timers are never cleared: exit once the summary is out
// instead of waiting for them.
process.stdout.write(`${JSON.stringify(out)}\n`, () => process.exit(0));
