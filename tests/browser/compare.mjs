// compare.mjs — opens a `gpurt compare --html` page in Debian's chromium
// (headless, through playwright-core): each policy keeps one colour in every
// plot, the page's legend hides a policy everywhere, every line drew, and a
// plot one policy dwarfs is on a log scale; no console error, no request.
// Saves a screenshot into OUTDIR.
//   node tests/browser/compare.mjs COMPARE.html OUTDIR [CHROMIUM]
import { open } from "./session.mjs";

const { browser, page, url, outdir, fail, finish } = await open("compare.mjs");
try {
  await page.goto(url);
  const colours = await page.$$eval("polyline.series", (ls) => {
    const by = {};
    for (const l of ls) {
      const p = [...l.classList].find((c) => /^p\d+$/.test(c));
      (by[p] = by[p] || new Set()).add(l.getAttribute("stroke"));
    }
    return Object.fromEntries(Object.entries(by).map(([k, v]) => [k, [...v]]));
  });
  const policies = Object.keys(colours);
  if (policies.length < 2) fail("fewer than two policies: " + JSON.stringify(colours));
  for (const [p, c] of Object.entries(colours)) if (c.length !== 1) fail(p + " drawn in " + c.length + " colours: " + c);
  const all = new Set(Object.values(colours).flat());
  if (all.size !== policies.length) fail("two policies share a colour");
  const drawn = await page.getAttribute("body", "data-plots-drawn");
  const lines = await page.$$eval("polyline.series", (ls) => ls.length);
  if (+drawn !== lines) fail(drawn + " of " + lines + " lines drew");
  const logs = await page.$$eval("svg.plot.log", (s) => s.length);
  await page.screenshot({ path: outdir + "/compare.png", fullPage: true });
  await page.click("#toggle-" + policies[0]);
  const hidden = await page.$$eval("polyline." + policies[0], (ls) => ls.every((l) => l.style.display === "none"));
  if (!hidden) fail("unchecking " + policies[0] + " left its lines drawn");
  finish();
  console.log("compare.mjs: ok: " + policies.length + " policies, " + lines + " lines, " + logs + " log-scale plots");
} finally {
  await browser.close();
}
