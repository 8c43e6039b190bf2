// Drives Runnel's web console in Debian's chromium with playwright-core, or
// in Debian's firefox-esr with puppeteer-core (WebDriver BiDi) when args
// say browser "firefox", for integration/test_console.py.
// usage: node console.js SCENARIO 'JSON ARGS'
// Prints one JSON line with what the page showed; exits 1 on a failure.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const FIREFOX = process.env.FIREFOX || "/usr/bin/firefox-esr";

// The few page calls the scenarios make, on puppeteer's page, with
// playwright's signatures.
function puppeteerPage(page) {
  return {
    goto: url => page.goto(url),
    waitForSelector: (sel, opts) => page.waitForSelector(sel, opts),
    $$eval: (sel, fn) => page.$$eval(sel, fn),
    $eval: (sel, fn) => page.$eval(sel, fn),
    click: sel => page.click(sel),
    screenshot: opts => page.screenshot(opts),
    evaluate: fn => page.evaluate(fn),
    textContent: sel => page.$eval(sel, e => e.textContent),
    selectOption: (sel, value) => page.select(sel, value),
    waitForFunction: (fn, arg, opts) => page.waitForFunction(fn, opts || {}, arg),
    waitForTimeout: ms => new Promise(resolve => setTimeout(resolve, ms)),
  };
}

async function withFirefox(args, fn) {
  const puppeteer = require("puppeteer-core");
  const browser = await puppeteer.launch({ browser: "firefox", executablePath: FIREFOX, headless: true });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    const errors = [];
    page.on("pageerror", e => errors.push(String(e)));
    const out = await fn(puppeteerPage(page));
    out.pageErrors = errors;
    out.browser = await browser.version();
    return out;
  } finally {
    await browser.close();
  }
}

async function withPage(args, fn) {
  if (args.browser === "firefox") return withFirefox(args, fn);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  try {
    const ctx = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      httpCredentials: args.user ? { username: args.user, password: args.password } : undefined,
    });
    const page = await ctx.newPage();
    const errors = [];
    page.on("pageerror", e => errors.push(String(e)));
    const out = await fn(page);
    out.pageErrors = errors;
    return out;
  } finally {
    await browser.close();
  }
}

async function shot(page, args, name) {
  const file = path.join(args.shots, (args.prefix || "") + name);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

async function messageAfter(page, action) {
  await page.evaluate(() => { document.getElementById("message").hidden = true; });
  await action();
  await page.waitForSelector("#message:not([hidden])", { timeout: 10000 });
  return page.evaluate(() => {
    const m = document.getElementById("message");
    return { text: m.textContent, error: m.classList.contains("error") };
  });
}

// Topics, one topic's records (the binary one shown as hex), the group's
// lag chart, then a reset to earliest (allowed or refused).
async function browse(page, args) {
  const out = { screenshots: [] };
  await page.goto(args.url);
  await page.waitForSelector("#topics-table");
  out.topics = await page.$$eval("#topics-table tbody tr", rows => rows.map(r => r.dataset.key));
  out.mode = await page.textContent("#mode");
  await page.click(`#topics-table a[href="#/topics/${encodeURIComponent(args.topic)}"]`);
  await page.waitForSelector("#topic-name");
  out.topicName = await page.textContent("#topic-name");
  await page.click("#load-records");
  await page.waitForSelector("#records-table");
  out.records = await page.$$eval("#records-table tbody tr", rows => rows.map(r => {
    const cells = r.querySelectorAll("td");
    const v = cells[3].querySelector("pre, span");
    return { offset: Number(cells[0].textContent), kind: v.dataset.kind || "null", value: v.textContent };
  }));
  out.screenshots.push(await shot(page, args, "topic.png"));

  await page.goto(args.url + "#/groups/" + encodeURIComponent(args.group));
  await page.waitForSelector("#lag-chart");
  // the page refreshes every 2 s; each refresh adds a lag sample
  await page.waitForFunction(() => document.querySelectorAll("#lag-chart circle").length >= 2,
    null, { timeout: 15000 });
  out.lagPoints = await page.$$eval("#lag-chart circle", c => c.length);
  out.lagLine = await page.$eval("#lag-chart path.line", p => p.getAttribute("d"));
  out.groupLag = Number(await page.textContent("#group-lag"));
  out.groupStatus = await page.textContent("#group-status");
  out.offsetRow = await page.$eval("#offsets-table tbody tr", r => [...r.querySelectorAll("td")].map(c => c.textContent));
  out.screenshots.push(await shot(page, args, "group.png"));

  await page.selectOption("#reset-to", "earliest");
  out.reset = await messageAfter(page, () => page.click("#reset-button"));
  if (!out.reset.error) {
    // the next refreshes draw the new lag on the chart too
    await page.waitForFunction(() => {
      const c = document.querySelectorAll("#lag-chart circle title");
      return c.length && c[c.length - 1].textContent.endsWith(": " + document.getElementById("group-lag").textContent);
    }, null, { timeout: 10000 });
    await page.waitForTimeout(2500);
  }
  out.lagAfterReset = Number(await page.textContent("#group-lag"));
  out.screenshots.push(await shot(page, args, "reset.png"));
  return out;
}

// A page of another origin posts to the console's reset URL, with a form
// (no custom header possible) and with fetch: both must be refused.
async function csrf(page, args) {
  const evil = "http://evil.test/";
  const target = args.url + "api/groups/" + encodeURIComponent(args.group) + "/reset?to=earliest";
  await page.route(evil, route => route.fulfill({
    contentType: "text/html",
    body: `<form id="f" method="POST" action="${target}"></form>
           <script>
             fetch(${JSON.stringify(target)}, {method: "POST", mode: "no-cors", credentials: "include",
               headers: {"X-Runnel-Csrf": "guess"}}).catch(() => {});
           </script>`,
  }));
  const statuses = [];
  page.on("response", r => { if (r.url().startsWith(args.url + "api/")) statuses.push(r.status()); });
  await page.goto(evil);
  await page.waitForTimeout(500);
  const formResponse = page.waitForResponse(r => r.url() === target, { timeout: 10000 });
  await page.evaluate(() => document.getElementById("f").submit());
  statuses.push((await formResponse).status());
  await page.waitForTimeout(300);
  return { statuses };
}

// With SASL users: the page needs a login; with the right one it shows the user.
async function login(page, args) {
  let resp;
  try {
    resp = await page.goto(args.url);
  } catch (e) {
    // chromium gives up on a Basic challenge it cannot answer
    if (String(e).includes("ERR_INVALID_AUTH_CREDENTIALS")) return { status: 401, refused: true };
    throw e;
  }
  const out = { status: resp.status() };
  if (resp.status() === 200) {
    await page.waitForSelector("#topics-table");
    await page.waitForFunction(() => document.getElementById("who").textContent !== "");
    out.who = await page.textContent("#who");
    out.screenshot = await shot(page, args, "login.png");
  }
  return out;
}

// The retention guard's banner, shown on every page once retention deleted
// records a group had not read.
async function banner(page, args) {
  await page.goto(args.url + "#/groups");
  await page.waitForSelector("#guard-banner:not([hidden])", { timeout: 15000 });
  return { banner: await page.textContent("#guard-banner"), screenshots: [await shot(page, args, "guard.png")] };
}

const SCENARIOS = { browse, csrf, login, banner };

async function main() {
  const [name, json] = process.argv.slice(2);
  const args = JSON.parse(json);
  const scenario = SCENARIOS[name];
  if (!scenario) throw new Error("unknown scenario " + name);
  const out = await withPage(args, page => scenario(page, args));
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch(e => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
