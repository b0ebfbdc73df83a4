// session.mjs — what every page test here shares: the arguments (PAGE.html
// OUTDIR [CHROMIUM]), Debian's chromium launched headless through
// playwright-core, and a page that records console errors and any request
// leaving the file (the pages must work offline).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { pathToFileURL } from "node:url";

export async function open(script) {
  const [path, outdir, exe = "/usr/bin/chromium"] = process.argv.slice(2);
  if (!path || !outdir) {
    console.error("usage: node " + script + " PAGE.html OUTDIR [CHROMIUM]");
    process.exit(2);
  }
  mkdirSync(outdir, { recursive: true });
  const fail = (msg) => { console.error(script + ": " + msg); process.exitCode = 1; };
  const browser = await chromium.launch({ executablePath: exe, args: ["--no-sandbox", "--disable-gpu"] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [], requests = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
  const url = pathToFileURL(path).href;
  // the checks every page ends with
  const finish = () => {
    if (errors.length) fail("console errors: " + errors.join(" | "));
    if (requests.length) fail("network requests: " + requests.join(" "));
  };
  return { browser, page, url, path, outdir, fail, finish };
}
