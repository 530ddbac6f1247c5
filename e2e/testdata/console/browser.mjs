// The console's browser test, run by e2e/console_test.go (TestConsoleBrowser) with node: playwright-core
// drives Debian's chromium headless. Input: one JSON argument (see console_test.go). Output: one JSON line
// on stdout with what the Go test checks further. Any failed check throws (exit 1, message on stderr).
// Screenshots of every page go to input.shots.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const input = JSON.parse(process.argv[2]);
const require = createRequire(input.playwright + "/");
const { chromium } = require("playwright-core");

const out = { checks: [] };
const check = (cond, what) => {
  if (!cond) throw new Error("check failed: " + what);
  out.checks.push(what);
};
const U = (p) => input.url + p;

const browser = await chromium.launch({
  executablePath: input.chromium,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
});
try {
  const desktop = { viewport: { width: 1280, height: 900 } };
  const phone = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };
  const shot = async (page, name) => page.screenshot({ path: `${input.shots}/${name}.png`, fullPage: true });
  // noOverflow: the page is no wider than its viewport (nothing to scroll sideways but the tables' own boxes).
  const noOverflow = async (page, what) => {
    const vw = page.viewportSize().width;
    const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    const wide = sw > vw + 1 ? await page.evaluate((vw) => [...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > vw + 1)
      .slice(0, 5).map((e) => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).join(", "), vw) : "";
    check(sw <= vw + 1 && iw <= vw + 1, `${what} ${wide}`.trim() + `: no horizontal overflow at ${vw}px (scrollWidth ${sw}, innerWidth ${iw})`);
  };
  // unlabelled: form controls with no label of any kind.
  const unlabelled = (page) => page.evaluate(() => [...document.querySelectorAll("input:not([type=hidden]):not([hidden]), select, textarea")]
    .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby"))
    .map((el) => el.name || el.id));

  // --- the admin ---
  // Errors in the pages' consoles (a script error, a refusal of the Content-Security-Policy) fail the test.
  const consoleErrors = [];
  const watch = (page) => {
    page.on("console", (m) => { if (m.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) consoleErrors.push(page.url() + ": " + m.text()); });
    page.on("pageerror", (e) => consoleErrors.push(page.url() + ": " + e.message));
    return page;
  };
  const admin = await browser.newContext(desktop);
  admin.setDefaultTimeout(15000);
  const a = watch(await admin.newPage());
  await a.goto(U("/console/keys"));
  check(a.url().startsWith(U("/console/login")), "a page without a session sends the browser to the sign-in page");
  await shot(a, "01-login");
  await a.keyboard.press("Tab");
  check(await a.evaluate(() => document.activeElement && document.activeElement.textContent === "Skip to content"), "the first Tab reaches the skip link");
  check((await unlabelled(a)).length === 0, "login: every field has a label");
  // A wrong password first: refused with a message, no session.
  await a.fill("#email", input.adminEmail);
  await a.fill("#password", "not the password at all");
  await a.click("button[type=submit]");
  check((await a.textContent("[role=alert]")).toLowerCase().includes("wrong e-mail address or password"), "a wrong password is refused");
  // Then by keyboard only: the password field, Enter.
  await a.fill("#email", input.adminEmail);
  await a.focus("#password");
  await a.keyboard.type(input.adminPassword);
  await a.keyboard.press("Enter");
  await a.waitForURL(U("/console/keys"));
  check(true, "the admin signs in (keyboard: Enter submits)");
  const cookies = await admin.cookies();
  const sc = cookies.find((c) => c.name === "endcap_session");
  check(sc && sc.httpOnly && sc.sameSite === "Lax" && sc.path === "/console", "the session cookie is HttpOnly, SameSite=Lax, Path=/console");

  // Create a marketplace key: shown once.
  await a.selectOption("#type", "marketplace");
  await a.fill("#name", "browser test");
  await a.click("form[action='/console/keys'] button[type=submit]");
  const secret = await a.inputValue("[data-testid=new-key]");
  check(/^ecm_[A-Za-z0-9]{40}$/.test(secret), "a new marketplace key is shown (ecm_ and 40 characters)");
  await shot(a, "02-keys-created");
  out.marketplaceKey = secret;
  await a.goto(U("/console/keys"));
  const keysHTML = await a.content();
  check(!keysHTML.includes(secret), "the key is not shown again");
  check(keysHTML.includes(secret.slice(0, 10) + "…"), "the key's prefix is listed");
  check(keysHTML.includes("browser test"), "the key's name is listed");
  check((await unlabelled(a)).length === 0, "keys: every field has a label");
  await shot(a, "03-keys");

  // Every admin page, at desktop width, screenshotted.
  const pages = [
    ["00-overview", "/console/overview"], ["04-settings", "/console/settings"], ["05-vendors", "/console/vendors"], ["06-vendor", `/console/vendors/${input.vendorId}`],
    ["07-vendor-performance", `/console/vendors/${input.vendorId}/performance`], ["08-products", `/console/products?vendor=${input.vendorId}&q=trail`], ["08a-products-all", "/console/products?q=BOOT"],
    ["09-campaign", `/console/campaigns/${input.ownCampaign}`], ["10-users", "/console/users"], ["11-webhooks", "/console/webhooks"],
    ["12-files", "/console/files"], ["13-health", "/console/health"], ["14-audit", "/console/audit"], ["15-account", "/console/account"],
    ["09a-campaigns", "/console/campaigns"], ["09b-campaigns-filtered", `/console/campaigns?vendor_id=${input.otherVendorId}&status=running&name=secret`],
    ["09c-explain", "/console/explain"],
    ["36-balances", "/console/balances"], ["37-balance", `/console/balances/${input.vendorId}`], ["38-refused", `/console/vendors/${input.vendorId}/refused`],
  ];
  for (const [name, path] of pages) {
    const r = await a.goto(U(path));
    check(r.status() === 200, `admin: ${path} answers 200`);
    check((await unlabelled(a)).length === 0, `${path}: every field has a label`);
    await noOverflow(a, path);
    await shot(a, name);
  }
  // The operators' campaigns: every vendor's, with spend against budget; filtered by vendor.
  const all = await (await a.goto(U("/console/campaigns"))).text();
  check(all.includes(input.ownCampaignName) && all.includes(input.otherCampaignName), "admin: the campaigns list has every vendor's");
  await a.goto(U(`/console/campaigns?vendor_id=${input.otherVendorId}`));
  const opRows = await a.locator("[data-testid=campaigns] tbody tr").allTextContents();
  check(opRows.length === 1 && opRows[0].includes(input.otherCampaignName), `admin: filtered by vendor, one campaign (${opRows.length})`);
  check(!opRows[0].includes("unavailable") && (await a.locator("[data-testid=campaigns] meter").count()) >= 1, "admin: the campaign's spend against its budget");
  // A campaign's pacing chart, drawn.
  await a.goto(U(`/console/campaigns/${input.ownCampaign}`));
  await a.waitForFunction(() => document.body.getAttribute("data-chart-ms") !== null);
  check((await a.locator("#chart-pacing canvas").count()) === 1, "the campaign's pacing chart is drawn");
  const xLabels = ((await a.getAttribute("#chart-pacing", "data-x-labels")) || "").split("|").filter(Boolean);
  check(xLabels.length > 1 && xLabels.every((l) => /^(\d\d-\d\d )?\d\d:\d\d$/.test(l)),
    "the pacing chart's time axis is in 24-hour time: " + xLabels.join(", "));
  check((await a.textContent("[data-testid=status-reason]")).trim() !== "", "the campaign's status reason is shown");
  await shot(a, "09d-campaign-pacing");
  // The explain form, by keyboard-free filling: the own product wins.
  await a.goto(U("/console/explain"));
  await a.fill("#slots", "2");
  await a.fill("#products", "p-alpha, p-beta, p-none");
  await a.click("[data-testid=explain-form] button[type=submit]");
  await a.waitForSelector("[data-testid=explain-result]");
  const explained = await a.textContent("[data-testid=explain-result]");
  check(explained.includes("won") && explained.includes(input.ownCampaignName) && explained.includes("product_not_found"), "the explain form shows the winners and the left-out product");
  await noOverflow(a, "explain result");
  await shot(a, "09e-explain-result");
  // Bad input: the message on the form, the form again.
  await a.fill("#slots", "many");
  await a.click("[data-testid=explain-form] button[type=submit]");
  await a.waitForSelector("p.error");
  check((await a.textContent("p.error")).includes("whole number") && (await a.inputValue("#slots")) === "many", "the explain form shows a bad field's message and keeps the input");
  await shot(a, "09f-explain-error");
  // The overview: the admin's landing page (the console's root), with the results, the top campaigns and vendors,
  // and what needs attention (the campaign whose bid is below the reserve).
  await a.goto(U("/console"));
  check(a.url() === U("/console/overview"), "the admin's first page is the overview");
  await a.waitForFunction(() => document.body.getAttribute("data-chart-ms") !== null);
  const periods = await a.locator("[data-testid=overview-periods] tbody tr").allTextContents();
  check(periods.length === 3 && periods[0].startsWith("Today") && periods[2].startsWith("Last 30 days"), "the overview has today, 7 and 30 days: " + periods.join(" / "));
  const topCampaigns = await a.textContent("[data-testid=top-campaigns]");
  check(topCampaigns.includes(input.ownCampaignName) && topCampaigns.includes(input.otherCampaignName), "the overview's top campaigns");
  check((await a.textContent("[data-testid=top-vendors]")).includes(input.vendorName), "the overview's top vendors by name");
  const attention = await a.textContent("[data-testid=attention]");
  check(attention.includes(input.lowCampaignName) && attention.includes("below the marketplace's CPC reserve price"), "the overview says which bid cannot win and why");
  check((await a.locator(".chart canvas").count()) === 2, "the overview's spend and sales charts are drawn, one scale each");
  await noOverflow(a, "/console/overview");
  await shot(a, "00-overview");
  // A campaign's bids with their eligibility, as the API says it.
  await a.goto(U(`/console/campaigns/${input.lowCampaign}`));
  const lowBid = await a.textContent("[data-testid=bids] tbody tr");
  check(/no\s+The bid 0\.1 is below the marketplace's CPC reserve price 0\.25\.\s*below_reserve/.test(lowBid.replace(/\s+/g, " ")), "the campaign page shows the bid is not eligible and why: " + lowBid.trim());
  check((await a.getAttribute("[data-testid=bids] tbody tr", "data-eligible")) === "false", "the bid row says not eligible");
  check((await a.textContent("[data-testid=status-reason]")).includes("none of its active bids can win"), "the status reason in words");
  check((await a.locator(`time[title='${input.timezone}']`).count()) >= 1, "times are in the marketplace's zone, named");
  await shot(a, "09g-campaign-ineligible-bid");
  // A webhook: send a test event, then send the delivery again once delivered.
  await a.goto(U(`/console/webhooks/${input.webhook}`));
  await a.click("[data-testid=webhook-test] button[type=submit]");
  await a.waitForURL(U(`/console/webhooks/${input.webhook}?done=webhook-test`));
  check((await a.textContent("[role=status]")).includes("A test event was sent"), "the webhook's test button sends a test event");
  check((await a.locator("tr[data-delivery]").count()) === 1, "the test's delivery is listed");
  for (let i = 0; i < 60 && (await a.getAttribute("tr[data-delivery]", "data-status")) !== "delivered"; i++) {
    await new Promise((r) => setTimeout(r, 500));
    await a.goto(U(`/console/webhooks/${input.webhook}`));
  }
  check((await a.getAttribute("tr[data-delivery]", "data-status")) === "delivered", "the test event was delivered");
  await shot(a, "11a-webhook-tested");
  await a.click("[data-testid=retry] button[type=submit]");
  await a.waitForURL(U(`/console/webhooks/${input.webhook}?done=webhook-retry`));
  check((await a.textContent("[role=status]")).includes("being sent again"), "the delivery's retry button sends it again");
  await noOverflow(a, "webhook page");
  await shot(a, "11b-webhook-retried");
  const audit = await (await a.goto(U("/console/audit"))).text();
  check(audit.includes("key.create") && audit.includes(input.adminEmail), "the audit log has the key's creation by the admin");

  // Frequency caps on the campaign page: a limit the API refuses (its message beside the form), one it takes,
  // then changed.
  await a.goto(U(`/console/campaigns/${input.ownCampaign}`));
  check((await a.textContent("[data-testid=caps-without]")).includes("Serve"), "the campaign page says what the caps do without a shopper");
  await a.selectOption("#cap-interaction", "clicks");
  await a.selectOption("#cap-frequency", "weekly");
  await a.fill("#cap-limit", "0");
  await a.evaluate(() => document.querySelector("#cap-limit").removeAttribute("min")); // the server's rule, not the browser's
  await a.click("[data-testid=add-cap] button[type=submit]");
  check((await a.textContent("[data-testid=caps-error]")).includes("Limit: Input should be greater than or equal to 1"), "a cap's limit of 0 is refused with the API's message beside the form");
  check((await a.inputValue("#cap-frequency")) === "weekly" && (await a.inputValue("#cap-limit")) === "0", "the refused cap form keeps what was sent");
  await shot(a, "39-caps-refused");
  await a.fill("#cap-limit", "2");
  await a.click("[data-testid=add-cap] button[type=submit]");
  await a.waitForURL(U(`/console/campaigns/${input.ownCampaign}?done=caps#frequency-caps`));
  const capRow = a.locator("[data-testid=caps] tr[data-cap]");
  check((await capRow.count()) === 1 && /clicks\s*weekly\s*the campaign\s*2\s*active/.test((await capRow.textContent()).replace(/\s+/g, " ")), "the cap is added and listed: " + (await capRow.textContent()).replace(/\s+/g, " "));
  await capRow.locator("input[name=limit]").fill("3");
  await capRow.locator("select[name=status]").selectOption("inactive");
  await capRow.locator("button[type=submit]").click();
  await a.waitForURL(U(`/console/campaigns/${input.ownCampaign}?done=caps#frequency-caps`));
  check(/3\s*inactive/.test((await a.locator("[data-testid=caps] tr[data-cap]").textContent()).replace(/\s+/g, " ")), "the cap's limit and status are changed");
  await noOverflow(a, "campaign page with caps");
  await shot(a, "40-caps");

  // Balances: off in this marketplace (the page says so); a top-up whose amount is refused, one sent twice with
  // the form's request key (credited once), a credit limit.
  await a.goto(U("/console/balances"));
  check((await a.locator("[data-testid=balances-off]").count()) === 1, "the balances page says balances are off");
  check((await a.locator(`[data-testid=balances] tr[data-vendor="${input.vendorId}"]`).count()) === 1, "the balances list has the vendor");
  await a.click(`[data-testid=balances] tr[data-vendor="${input.vendorId}"] a`);
  await a.waitForURL(U(`/console/balances/${input.vendorId}`));
  await a.fill("#amount", "12,5");
  await a.click("[data-testid=top-up] button[type=submit]");
  check((await a.textContent("[role=alert]")).includes("Amount: value is not a valid number") && (await a.inputValue("#amount")) === "12,5", "a top-up of 12,5 is refused with the API's message");
  await shot(a, "41-top-up-refused");
  await a.fill("#amount", "25");
  await a.fill("#description", "browser top-up");
  const topUpForm = await a.evaluate(() => Object.fromEntries(new FormData(document.querySelector("[data-testid=top-up]"))));
  for (let i = 0; i < 2; i++) {
    const r = await a.request.post(U(`/console/balances/${input.vendorId}/top-up`), { form: topUpForm, maxRedirects: 0 });
    check(r.status() === 303, `the top-up form, sent ${i + 1} time(s), is taken`);
  }
  await a.goto(U(`/console/balances/${input.vendorId}`));
  check(/Balance\s*25\.00/.test(await a.textContent("[data-testid=funds]")), "the top-up sent twice credits once: " + (await a.textContent("[data-testid=funds]")).replace(/\s+/g, " "));
  check((await a.locator("[data-testid=ledger] tr[data-movement]").count()) === 1, "one movement in the ledger");
  await a.fill("#credit", "10");
  await a.click("[data-testid=credit-limit] button[type=submit]");
  await a.waitForURL(U(`/console/balances/${input.vendorId}?done=credit-limit`));
  check(/Available\s*35\.00/.test(await a.textContent("[data-testid=funds]")), "the credit limit adds to what is available");
  await noOverflow(a, "balance page");
  await shot(a, "42-balance");
  // Refused charges: the vendor's invalid click, counted per reason; a bad window refused.
  await a.goto(U(`/console/vendors/${input.vendorId}/refused`));
  check((await a.textContent("[data-testid=refused-counts] tr[data-reason=invalid_too_fast]")).includes("too soon after its impression"), "the vendor's refused click is counted with its reason in words");
  check((await a.locator("[data-testid=refused] tr[data-interaction]").count()) === 1, "the refused click is listed");
  await shot(a, "43-refused");
  await a.fill("#from", input.today);
  await a.fill("#to", input.yesterday);
  await a.click("main form button[type=submit]");
  check((await a.textContent("[data-testid=refused-error]")).includes("must not be before the first"), "a window whose last day is before its first is refused");

  // Exports: a refused request (its message on the form), then one that runs; the list is read again while
  // it runs and shows it completed; the download is the file.
  const wanted = async (page, dims, mets) => {
    await page.evaluate(() => document.querySelectorAll("form.export-form input[type=checkbox]").forEach((e) => { e.checked = false; }));
    for (const n of dims) await page.check(`input[name=dimensions][value=${n}]`);
    for (const n of mets) await page.check(`input[name=metrics][value=${n}]`);
  };
  const requestExport = async (page, shotName) => {
    await page.goto(U("/console/exports"));
    check((await unlabelled(page)).length === 0, "exports: every field has a label");
    const before = await page.locator("tr[data-export]").count();
    await page.fill("#startDate", input.today);
    await page.fill("#endDate", input.today);
    await wanted(page, ["vendor_id", "campaign_id"], ["impressions", "clicks"]);
    await page.click("form.export-form button[type=submit]");
    await page.waitForURL(U("/console/exports?done=export"));
    check((await page.locator("tr[data-export]").count()) === before + 1, "the requested export is listed");
    const id = await page.locator("tr[data-export]").first().getAttribute("data-export");
    await shot(page, shotName + "-requested");
    await page.waitForSelector(`tr[data-export="${id}"][data-status="completed"]`, { timeout: 90000 });
    check(true, "the list shows the export completed without a reload");
    await noOverflow(page, "/console/exports");
    await shot(page, shotName + "-completed");
    const [dl] = await Promise.all([page.waitForEvent("download"), page.click(`tr[data-export="${id}"] a[download]`)]);
    check(dl.suggestedFilename() === `endcap-export-${id}.csv`, "the download is named after the export: " + dl.suggestedFilename());
    return [id, readFileSync(await dl.path(), "utf8")];
  };
  await a.goto(U("/console/exports"));
  await a.fill("#startDate", input.today);
  await a.fill("#endDate", "2020-01-01");
  await a.click("form.export-form button[type=submit]");
  const refusal = await a.textContent("[role=alert]");
  check(refusal.includes("Last day: endDate must be on or after startDate"), "an export whose last day is before its first is refused: " + refusal);
  check((await a.inputValue("#endDate")) === "2020-01-01", "the refused form keeps what was sent");
  await shot(a, "25-exports-refused");
  const [adminExport, adminCSV] = await requestExport(a, "26-exports");
  check(adminCSV.startsWith("vendor_id,campaign_id,impressions,clicks\n") && adminCSV.includes(input.ownCampaign) && adminCSV.includes(input.otherCampaign),
    "the admin's export has both vendors' campaigns");
  // balance_ledger's request form, a link away: its own granularity and columns; its export runs.
  await a.goto(U("/console/exports"));
  await a.click("[data-testid=export-datasets] a[href*='request=balance_ledger']");
  await a.waitForSelector("form.export-form input[name=dataset][value=balance_ledger]", { state: "attached" });
  check((await a.locator("form.export-form input[name=metrics][value=amount]").count()) === 1 &&
    (await a.locator("form.export-form input[name=metrics][value=impressions]").count()) === 0 &&
    (await a.inputValue("#granularity")) === "movement", "the balance_ledger form offers its own columns");
  check((await unlabelled(a)).length === 0, "balance_ledger's export form: every field has a label");
  await a.fill("#startDate", input.today);
  await a.fill("#endDate", input.today);
  await a.click("form.export-form button[type=submit]");
  await a.waitForURL(U("/console/exports?done=export"));
  const ledgerExport = await a.locator("tr[data-export]").first().getAttribute("data-export");
  check((await a.textContent(`tr[data-export="${ledgerExport}"]`)).includes("balance_ledger"), "the balance_ledger export is requested");
  await a.waitForSelector(`tr[data-export="${ledgerExport}"][data-status="completed"]`, { timeout: 90000 });
  await shot(a, "26b-exports-ledger");
  const adminFile = await a.request.get(U(`/console/files/${input.today}/download`));
  check(adminFile.status() === 200 && adminFile.headers()["content-disposition"] === `attachment; filename=scored-attribution-${input.today}.parquet`,
    "the admin downloads the day's scored-attribution file");
  out.adminFile = (await adminFile.body()).toString("base64");

  // A 90-day chart: drawn in the browser in under a second.
  await a.goto(U(`/console/vendors/${input.vendorId}/performance?from=${input.from90}&to=${input.today}`));
  await a.waitForFunction(() => document.body.getAttribute("data-chart-ms") !== null);
  out.chartMs90 = Number(await a.getAttribute("body", "data-chart-ms"));
  out.chartPoints90 = Number(await a.getAttribute("body", "data-chart-points"));
  check(out.chartPoints90 === 90, "the 90-day chart has 90 days");
  check(out.chartMs90 < 1000, `the 90-day charts are drawn in under 1 s (${out.chartMs90} ms)`);
  const overlaps = await a.evaluate(() => [...document.querySelectorAll(".chart")].map((n) => n.id + ":" + n.getAttribute("data-x-overlap")));
  check(overlaps.length === 6 && overlaps.every((o) => o.endsWith(":no")), "one chart per quantity, no date label over the next: " + overlaps.join(", "));
  await shot(a, "16-performance-90-days");

  // Invite a vendor's user.
  await a.goto(U("/console/users"));
  await a.fill("#email", input.vendorEmail);
  await a.fill("#vendor", input.vendorId);
  await a.selectOption("#role", "vendor_analyst");
  await a.click("form[action='/console/users/invite'] button[type=submit]");
  await a.waitForURL(U("/console/users?done=invited"));
  check((await a.content()).includes(input.vendorEmail), "the invitation is listed");
  await shot(a, "17-users-invited");

  // The e-mail, from maildev's REST API.
  let link = "", mailText = "";
  for (let i = 0; i < 150 && !link; i++) {
    const mails = await (await fetch(input.mailWeb + "/api/email")).json();
    const m = mails.find((m) => (m.to || []).some((t) => t.address === input.vendorEmail));
    if (m) { link = ((m.text || "").match(/https?:\/\/\S+\/console\/invite\/\S+/) || [""])[0]; mailText = m.text || ""; }
    if (!link) await new Promise((r) => setTimeout(r, 200));
  }
  check(link.startsWith(U("/console/invite/")), "the invitation e-mail has the link");
  check(mailText.includes(`of ${input.vendorName} (${input.vendorId}) on`), "the invitation e-mail names the vendor");
  out.inviteLink = link;

  // --- the vendor's user ---
  const vendor = await browser.newContext(desktop);
  vendor.setDefaultTimeout(15000);
  const v = watch(await vendor.newPage());
  await v.goto(link);
  check((await unlabelled(v)).length === 0, "invitation: every field has a label");
  await shot(v, "18-invitation");
  // The server's rule, not the browser's: the field's own minlength is taken off first.
  await v.evaluate(() => document.querySelectorAll("[minlength]").forEach((e) => e.removeAttribute("minlength")));
  await v.fill("#password", "short");
  await v.fill("#password2", "short");
  await v.click("button[type=submit]");
  const shortMsg = await v.textContent("[role=alert]");
  check(shortMsg.includes("at least 12"), "a short password is refused: " + shortMsg);
  await v.fill("#password", input.vendorPassword);
  await v.fill("#password2", input.vendorPassword);
  await v.click("button[type=submit]");
  await v.waitForURL(U("/console/performance"));
  await v.waitForFunction(() => document.body.getAttribute("data-chart-ms") !== null);
  const perf = await v.content();
  check(perf.includes(input.ownCampaignName), "the vendor sees its campaign's results");
  check(!perf.includes(input.otherCampaignName) && !perf.includes(input.otherVendorId), "the vendor sees nothing of the other vendor");
  const rows = await v.locator("[data-testid=campaign-table] tbody tr").count();
  check(rows === 1, "one campaign row: the vendor's own");
  const clicks = await v.textContent("[data-testid=campaign-table] tbody tr td:nth-child(3)");
  check(clicks.trim() === String(input.ownClicks), `the campaign's clicks are the rollup's (${clicks.trim()})`);
  check((await v.locator(".chart canvas").count()) === 6, "the six charts are drawn");
  await noOverflow(v, "vendor performance");
  await shot(v, "19-vendor-performance");
  const camps = await (await v.goto(U("/console/campaigns"))).text();
  check(camps.includes(input.ownCampaignName) && !camps.includes(input.otherCampaignName), "the vendor's campaigns list only its own");
  await shot(v, "20-vendor-campaigns");
  const navHTML = await v.locator("nav").innerHTML();
  check(!navHTML.includes("API keys") && !navHTML.includes("Users"), "the vendor's menu has no operator page");

  // The server refuses the rest, whatever the browser asks.
  for (const path of ["/console/keys", "/console/settings", "/console/users", "/console/vendors", `/console/vendors/${input.otherVendorId}/performance`,
    `/console/vendors/${input.otherVendorId}/performance.csv`, "/console/audit", "/console/explain", "/console/health", "/console/webhooks", "/console/products?q=a",
    "/console/balances", `/console/balances/${input.otherVendorId}`, `/console/vendors/${input.otherVendorId}/refused`]) {
    const r = await v.goto(U(path));
    check(r.status() === 403, `vendor: ${path} is 403`);
  }
  await shot(v, "21-vendor-forbidden");
  const other = await v.goto(U(`/console/campaigns/${input.otherCampaign}`));
  check(other.status() === 404, "vendor: another vendor's campaign is 404");
  const own = await v.goto(U(`/console/campaigns/${input.ownCampaign}`));
  check(own.status() === 200, "vendor: its own campaign is 200");
  check((await v.locator("[data-testid=caps] tr[data-cap]").count()) === 1, "vendor: its campaign's frequency caps are listed");
  // Its balance and ledger, read-only; its refused charges.
  await v.goto(U("/console/balance"));
  check(/Balance\s*25\.00/.test(await v.textContent("[data-testid=funds]")) && (await v.locator("[data-testid=ledger] tr[data-movement]").count()) === 2,
    "vendor: its balance and ledger (the top-up and the credit limit)");
  check((await v.locator("[data-testid=top-up], [data-testid=credit-limit]").count()) === 0, "vendor: its balance page has no form");
  await shot(v, "44-vendor-balance");
  await v.goto(U("/console/refused"));
  check((await v.locator("[data-testid=refused] tr[data-interaction]").count()) === 1, "vendor: its refused charges");
  await noOverflow(v, "vendor refused charges");
  await shot(v, "45-vendor-refused");
  // A form posted to an operator page with the vendor's own session and token is refused too.
  const csrf = await v.getAttribute("form.logout input[name=csrf]", "value");
  const post = await v.request.post(U("/console/keys"), { form: { csrf, type: "marketplace" }, maxRedirects: 0 });
  check(post.status() === 403, "vendor: creating a key is 403");
  const vTopUp = await v.request.post(U(`/console/balances/${input.vendorId}/top-up`), { form: { csrf, amount: "1000" }, maxRedirects: 0 });
  check(vTopUp.status() === 403, "vendor: topping up its own balance is 403");
  // A form without the session's token is refused.
  const noToken = await v.request.post(U("/console/account/password"), { form: { current: input.vendorPassword, password: "x".repeat(20), password2: "x".repeat(20) }, maxRedirects: 0 });
  check(noToken.status() === 403, "a form without its CSRF token is 403");
  const csv = await (await v.request.get(U(`/console/performance.csv?from=${input.today}&to=${input.today}`))).text();
  check(csv.includes(input.ownCampaign) && !csv.includes(input.otherCampaign), "the vendor's CSV has only its campaigns");

  // The vendor's own export and its rows of the day's scored-attribution file; the admin's export is not found.
  const [vendorExport, vendorCSV] = await requestExport(v, "27-vendor-exports");
  check(vendorCSV.includes(input.ownCampaign) && !vendorCSV.includes(input.otherCampaign) && !vendorCSV.includes(input.otherVendorId),
    "the vendor's export has only its own campaign");
  check(!(await v.content()).includes(adminExport), "the vendor's list has not the admin's export");
  check((await v.request.get(U(`/console/exports/${adminExport}/download`))).status() === 404, "vendor: the admin's export is 404");
  check((await a.request.get(U(`/console/exports/${vendorExport}/download`))).status() === 200, "admin: the vendor's export downloads");
  const files = await v.goto(U("/console/files"));
  check(files.status() === 200, "vendor: the files page answers 200");
  await shot(v, "28-vendor-files");
  const [fileDl] = await Promise.all([v.waitForEvent("download"), v.click(`tr[data-day="${input.yesterday}"] a[download]`)]);
  check(fileDl.suggestedFilename() === `scored-attribution-${input.yesterday}-vendor-${input.vendorUUID}.parquet`,
    "the vendor downloads its rows of a day's file from the files page: " + fileDl.suggestedFilename());
  check(readFileSync(await fileDl.path()).subarray(0, 4).toString() === "PAR1", "the vendor's download is a Parquet file");
  const vendorFile = await v.request.get(U(`/console/files/${input.today}/download`));
  check(vendorFile.status() === 200 && vendorFile.headers()["content-type"] === "application/vnd.apache.parquet", "the vendor downloads its rows of the day's file");
  out.vendorFile = (await vendorFile.body()).toString("base64");

  // At phone width.
  const mobile = await browser.newContext({ ...phone, storageState: await vendor.storageState() });
  const m = watch(await mobile.newPage());
  await m.goto(U("/console/performance"));
  await m.waitForFunction(() => document.body.getAttribute("data-chart-ms") !== null);
  await noOverflow(m, "vendor performance (phone)");
  await shot(m, "22-phone-performance");
  const ma = await browser.newContext({ ...phone, storageState: await admin.storageState() });
  const mp = await ma.newPage();
  for (const [name, path] of [["23-phone-keys", "/console/keys"], ["24-phone-users", "/console/users"], ["30-phone-campaigns", "/console/campaigns"],
    ["31-phone-campaign", `/console/campaigns/${input.ownCampaign}`], ["32-phone-explain", "/console/explain"], ["29-phone-exports", "/console/exports"],
    ["46-phone-balances", "/console/balances"], ["47-phone-balance", `/console/balances/${input.vendorId}`], ["48-phone-refused", `/console/vendors/${input.vendorId}/refused`]]) {
    await mp.goto(U(path));
    await noOverflow(mp, path + " (phone)");
    await shot(mp, name);
  }

  // The link works once.
  const again = await browser.newContext(desktop);
  const g = await again.newPage();
  const r2 = await g.goto(link);
  check(r2.status() === 410, "the invitation link works once (410 after)");

  // --- single sign-on, through the OpenID provider's own login form ---
  const sso = await browser.newContext(desktop);
  sso.setDefaultTimeout(15000);
  const so = await sso.newPage();
  await so.goto(U("/console/login"));
  await so.click("#sso");
  await so.waitForURL((u) => u.toString().startsWith(input.oidcIssuer));
  check(so.url().includes("code_challenge_method=S256") || (await so.content()).includes("username"), "single sign-on: the browser is at the provider's login form");
  await shot(so, "33-sso-provider");
  await so.fill("#username", input.ssoUser);
  await so.fill("#password", input.ssoPassword);
  await so.click("button[type=submit]");
  await so.waitForURL(U("/console/overview"));
  const ssoWho = await so.textContent(".who");
  check(ssoWho.includes("Partner Market") && ssoWho.includes(input.ssoEmail), "single sign-on: the provider's user is the partner marketplace's admin: " + ssoWho.trim());
  check(!(await so.content()).includes(input.ownCampaignName), "single sign-on: the partner marketplace sees nothing of the other marketplace");
  await shot(so, "34-sso-signed-in");
  // A user of the provider the role map gives no role: a clear refusal, no session.
  const stranger = await browser.newContext(desktop);
  stranger.setDefaultTimeout(15000);
  const st = await stranger.newPage();
  await st.goto(U("/console/login"));
  await st.click("#sso");
  await st.waitForURL((u) => u.toString().startsWith(input.oidcIssuer));
  await st.fill("#username", input.ssoStranger);
  await st.fill("#password", input.ssoPassword);
  await st.click("button[type=submit]");
  await st.waitForURL((u) => u.toString().startsWith(U("/console/sso/callback")));
  check((await st.textContent("[role=alert]")).includes("no role in this console"), "single sign-on: a user with no role is refused with a clear page");
  check(!(await stranger.cookies()).some((c) => c.name === "endcap_session"), "single sign-on: the refused user has no session");
  await shot(st, "35-sso-no-role");

  // Sign-out ends the session.
  await v.goto(U("/console/account"));
  await v.click("form.logout button");
  await v.waitForURL(U("/console/login"));
  await v.goto(U("/console/performance"));
  check(v.url().startsWith(U("/console/login")), "after sign-out the session is over");
  check(consoleErrors.length === 0, "no error in the pages' consoles (scripts, Content-Security-Policy): " + consoleErrors.join("; "));
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
