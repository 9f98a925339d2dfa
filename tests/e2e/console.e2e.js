// End-to-end test of Kura's web console in a real browser (headless Chromium driven by
// playwright-core). Run through ./run.sh, which starts a server and sets KURA_URL.
//
// What it checks, as a new user would see it:
//   1. /ui opens the console; the overview lists tables.
//   2. Data created through the HBase REST API appears in the row browser: keys, columns,
//      versions with timestamps, values as text and as hex.
//   3. The regions page shows one region; pressing Split makes it two, and the page shows both.
//   4. The key heatmap draws for the table.
"use strict";

const fs = require("fs");
const os = require("os");
const path = require("path");
const { chromium } = require("playwright-core");

const BASE = (process.env.KURA_URL || "http://127.0.0.1:8080").replace(/\/$/, "");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const TABLE = "e2e_console";
const STEP_TIMEOUT_MS = 20000;

function b64(s) {
  return Buffer.from(s, "utf8").toString("base64");
}

async function rest(method, url, body) {
  const res = await fetch(BASE + url, {
    method,
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

async function createData() {
  await rest("PUT", `/${TABLE}/schema`, {
    name: TABLE,
    KURA_REGIONS: "1",
    ColumnSchema: [{ name: "cf", VERSIONS: "3" }],
  });
  const cell = (column, value, timestamp) =>
    timestamp === undefined
      ? { column: b64(column), $: b64(value) }
      : { column: b64(column), timestamp, $: b64(value) };
  await rest("PUT", `/${TABLE}/fakerow`, {
    Row: [
      { key: b64("user1"), Cell: [cell("cf:name", "Alice"), cell("cf:city", "Kyoto")] },
      { key: b64("user2"), Cell: [cell("cf:name", "Bob")] },
      { key: b64("user3"), Cell: [cell("cf:name", "Chiyo")] },
      { key: b64("other"), Cell: [cell("cf:name", "not a user")] },
    ],
  });
  // Thirty rows to page through, and one row whose key is not text.
  const items = [];
  for (let i = 0; i < 30; i++) {
    items.push({ key: b64("item" + String(i).padStart(2, "0")), Cell: [cell("cf:n", String(i))] });
  }
  items.push({ key: Buffer.from([0x62, 0x69, 0x6e, 0x00, 0xff, 0x01]).toString("base64"), Cell: [cell("cf:name", "binary key")] });
  await rest("PUT", `/${TABLE}/fakerow`, { Row: items });
  // Two versions of one column with explicit timestamps (newest first when read).
  await rest("PUT", `/${TABLE}/fakerow`, {
    Row: [{ key: b64("user2"), Cell: [cell("cf:mood", "sleepy", 1700000000000)] }],
  });
  await rest("PUT", `/${TABLE}/fakerow`, {
    Row: [{ key: b64("user2"), Cell: [cell("cf:mood", "awake", 1700000005000)] }],
  });
}

function check(cond, msg) {
  if (!cond) throw new Error("check failed: " + msg);
  console.log("  ok - " + msg);
}

async function main() {
  console.log(`console e2e against ${BASE} with ${CHROMIUM}`);
  await createData();
  console.log("  ok - created table and rows through the REST API");

  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "kura-e2e-chromium-"));
  // playwright adds --headless for headless: true, and takes the profile directory as
  // userDataDir (it refuses a --user-data-dir argument).
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1400, height: 900 },
  });
  const errors = [];
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    const external = [];
    page.on("request", (r) => { if (!r.url().startsWith(BASE)) external.push(r.url()); });

    // 1. The console opens from /ui and lists the table.
    const resp = await page.goto(BASE + "/ui");
    check(resp && resp.ok(), "/ui opens the console");
    check(page.url() === BASE + "/ui/", "/ui redirects to /ui/");
    check((await page.title()) === "Kura console", "the page is the Kura console");
    await page.locator(`#table-list a[data-table="${TABLE}"]`).waitFor();
    await page.locator(`#overview-tables a`, { hasText: TABLE }).waitFor();
    check(true, "the overview and the sidebar list the new table");

    // 2. The row browser shows what the REST API wrote.
    await page.click(`#table-list a[data-table="${TABLE}"]`);
    await page.locator("#t-name", { hasText: TABLE }).waitFor();
    await page.click('#tabs a[data-tab="rows"]');
    await page.fill("#scan-prefix", "user");
    await page.click("#scan-btn");
    const rows = page.locator("#rows-table tbody");
    await rows.locator("td.key", { hasText: "user3" }).waitFor();
    const keys = await rows.locator("td.key").allInnerTexts();
    check(JSON.stringify(keys) === JSON.stringify(["user1", "user2", "user3"]),
      "a prefix scan shows exactly the rows user1, user2, user3 in order (got " + JSON.stringify(keys) + ")");
    const text = await rows.innerText();
    check(text.includes("cf:name") && text.includes("Alice") && text.includes("Kyoto"), "columns and values are shown as text");
    check(text.includes("awake") && text.includes("sleepy"), "both versions of cf:mood are shown");
    check(text.includes("1700000005000") && text.includes("2023-11-14"), "timestamps are shown raw and as dates");
    const order = text.indexOf("awake") < text.indexOf("sleepy");
    check(order, "the newest version comes first");
    await page.click('#value-mode button[data-mode="hex"]');
    await rows.locator("td.val", { hasText: "41 6c 69 63 65" }).waitFor();
    check(true, "the hex toggle shows Alice as 41 6c 69 63 65");
    await page.click('#value-mode button[data-mode="text"]');
    await rows.locator("td.val", { hasText: "Alice" }).waitFor();

    // Paging: 30 rows with prefix "item", 10 a page; later pages go through a scanner.
    await page.selectOption("#scan-limit", "10");
    await page.fill("#scan-prefix", "item");
    await page.click("#scan-btn");
    await rows.locator("td.key", { hasText: "item09" }).waitFor();
    let pageKeys = await rows.locator("td.key").allInnerTexts();
    check(pageKeys.length === 10 && pageKeys[0] === "item00", "page 1 shows item00 to item09");
    await page.click("#scan-next");
    await rows.locator("td.key", { hasText: "item19" }).waitFor();
    pageKeys = await rows.locator("td.key").allInnerTexts();
    check(pageKeys.length === 10 && pageKeys[0] === "item10", "Next page shows item10 to item19");
    await page.click("#scan-next");
    await rows.locator("td.key", { hasText: "item29" }).waitFor();
    pageKeys = await rows.locator("td.key").allInnerTexts();
    check(pageKeys.length === 10 && pageKeys[0] === "item20", "the last page shows item20 to item29");
    check(await page.locator("#scan-next").isDisabled(), "there is no page after the last");
    await page.click("#scan-first");
    await rows.locator("td.key", { hasText: "item00" }).waitFor();
    await page.selectOption("#scan-limit", "25");

    // A binary row key is shown escaped and can be searched the same way.
    await page.fill("#scan-prefix", "bin\\x00");
    await page.click("#scan-btn");
    await rows.locator("td.key", { hasText: "bin" }).waitFor();
    const binKey = await rows.locator("td.key").allInnerTexts();
    check(binKey.length === 1 && binKey[0] === "bin\\x00\\xff\\x01", "a binary key is shown as " + binKey[0] + " and found by an escaped prefix");

    // 3. Split the region and see two.
    await page.click('#tabs a[data-tab="regions"]');
    const regionRows = page.locator("#region-table tbody tr");
    await regionRows.first().waitFor();
    const before = await regionRows.count();
    check(before === 1, "the table starts with one region (got " + before + ")");
    await page.locator("#region-table tbody button[data-split]").first().click();
    await page.waitForFunction(
      (n) => document.querySelectorAll("#region-table tbody tr").length === n, before + 1);
    check(true, "after Split the regions page shows two regions");
    const ranges = await page.locator("#region-table tbody tr td:nth-child(2) > span").allInnerTexts();
    check(ranges.length === 2 && ranges[0].startsWith("[0,") && ranges[1].endsWith(")"),
      "the two regions split the bucket range: " + ranges.join(" "));
    const admin = await rest("GET", `/admin/tables/${TABLE}/regions`);
    check(admin.regions.length === 2, "the admin API agrees: two regions");
    await page.locator(`#table-list a[data-table="${TABLE}"] .count`, { hasText: "2 regions" }).waitFor();
    check(true, "the sidebar shows the new region count");

    // The data is all still there after the split.
    await page.click('#tabs a[data-tab="rows"]');
    await page.fill("#scan-prefix", "");
    await page.click("#scan-btn");
    await rows.locator("td.key", { hasText: "item00" }).waitFor();
    const allRows = await rows.locator("td.key").allInnerTexts();
    check(allRows.length === 25, "a full scan after the split fills a page of 25 rows");
    const admin2 = await rest("GET", `/${TABLE}/*?limit=100`);
    check(admin2.Row.length === 35, "and the REST API still returns all 35 rows");

    // 4. Flush from the console and see the toast; the heatmap draws.
    await page.click("#btn-flush");
    await page.locator(".toast.ok", { hasText: "Flush done" }).waitFor();
    check(true, "Flush reports success");
    await page.click('#tabs a[data-tab="heatmap"]');
    await page.locator("#hm-info", { hasText: "buckets" }).waitFor();
    const drawn = await page.evaluate(() => {
      const c = document.getElementById("hm-writes");
      return c.width > 1 && c.height > 1;
    });
    check(drawn, "the key heatmap is drawn");

    // 5. A table created from the overview's form opens with the regions and versions asked.
    await page.click(".brand");
    await page.fill('#create-form input[name="name"]', "e2e_form");
    await page.fill('#create-form input[name="families"]', "a, b");
    await page.fill('#create-form input[name="versions"]', "5");
    await page.fill('#create-form input[name="regions"]', "2");
    await page.click('#create-form button[type="submit"]');
    await page.locator("#t-name", { hasText: "e2e_form" }).waitFor();
    await page.waitForFunction(() => document.querySelectorAll("#region-table tbody tr").length === 2);
    check(true, "the create form makes a table with the two regions asked for");
    await page.click('#tabs a[data-tab="schema"]');
    const fams = await page.locator("#family-table tbody tr").allInnerTexts();
    check(fams.length === 2 && fams.every((f) => f.includes("5")), "both families keep 5 versions: " + fams.join(" | "));

    // 6. The applications section is there, and nothing was loaded from outside.
    const apps = await page.locator("#app-list li").allInnerTexts();
    check(apps.length === 4, "the four applications are one click away in the sidebar");
    check(external.length === 0, "no request left the server: " + external.join(", "));
    check(errors.length === 0, "no JavaScript errors: " + errors.join(" | "));
  } finally {
    await context.close();
    fs.rmSync(userDataDir, { recursive: true, force: true });
  }
  console.log("console e2e: all checks passed");
}

main().catch((e) => {
  console.error("console e2e FAILED: " + (e && e.stack ? e.stack : e));
  process.exit(1);
});
