// report.mjs — opens a `gpurt report` page in Debian's chromium (headless,
// through playwright-core) and checks that every view works: the doctor's
// first screen, a band's tooltip showing its stack, the state slider
// redrawing the segments, the figures' toggles; with no console error and
// no network request. Saves screenshots into OUTDIR.
//   node tests/browser/report.mjs REPORT.html OUTDIR [CHROMIUM]
import { open } from "./session.mjs";

const { browser, page, url, path: page_path, outdir, fail, finish } = await open("report.mjs");
try {
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForSelector("body[data-ready='1']", { timeout: 60000 });
  const loadMs = Date.now() - t0;
  await page.screenshot({ path: outdir + "/first-screen.png" });

  // the first screen: the verdict and the contract
  const verdict = await page.textContent("#verdict");
  if (!["healthy", "demand-bound", "fragmentation-bound"].includes(verdict)) fail("verdict: " + verdict);
  const rules = await page.$$eval("#contract tr", (rs) => rs.length);
  if (rules !== 5) fail("contract rows: " + rules);

  // the timeline: hover the largest band at the peak; its tooltip shows its size and stack
  const tl = await page.$("#tl");
  await tl.scrollIntoViewIfNeeded();
  const probe = await page.evaluate(() => window.gpurtReport.probe());
  if (!probe) fail("no band at the peak");
  else {
    await page.mouse.move(probe.x, probe.y);
    const tip = await page.textContent("#tip");
    const shown = await page.$eval("#tip", (e) => getComputedStyle(e).display);
    if (shown !== "block") fail("tooltip not shown");
    if (!/ at 0x[0-9a-f]+\n/.test(tip)) fail("tooltip has no address: " + tip);
    const want = probe.frames.length ? probe.frames[0] : "(no frames recorded)";
    if (!tip.includes(want)) fail("tooltip lacks the band's stack '" + want + "': " + tip);
    await page.screenshot({ path: outdir + "/timeline.png", clip: await tl.boundingBox().then((b) => ({ ...b, height: b.height + 160 })) });
    await page.mouse.click(probe.x, probe.y); // pin
    if (!(await page.$eval("#tip", (e) => e.classList.contains("pinned")))) fail("click did not pin the band");
    await page.mouse.click(probe.x, probe.y); // unpin
    const before = await page.$eval("#tl", (c) => c.dataset.drawnBands);
    await page.mouse.move(probe.x, probe.y);
    await page.mouse.wheel(0, -600); // zoom in
    const after = await page.$eval("#tl", (c) => c.dataset.drawnBands);
    if (before === after) console.log("report.mjs: note: zoom drew the same band count (" + before + ")");
  }

  // the recorded-time axis, where the snapshot has times: the bands redraw and still answer a hover
  if (await page.evaluate(() => !!window.gpurtReport.data.times)) {
    await page.selectOption("#axis", "time");
    const p2 = await page.evaluate(() => window.gpurtReport.probe());
    if (!p2) fail("no band at the peak on the time axis");
    else {
      await page.mouse.move(p2.x, p2.y);
      const tip = await page.textContent("#tip");
      const want = p2.frames.length ? p2.frames[0] : "(no frames recorded)";
      if (!tip.includes(want)) fail("time axis: tooltip lacks the band's stack: " + tip);
      await page.screenshot({ path: outdir + "/timeline-time.png", clip: await tl.boundingBox() });
    }
    await page.selectOption("#axis", "event");
  }

  // the state view: the first event and the peak draw different allocator states
  const segs = await page.$("#segs");
  await segs.scrollIntoViewIfNeeded();
  const state = () => page.$eval("#segs", (c) => [c.dataset.event, c.dataset.drawnBlocks, c.dataset.segments].join("/"));
  await page.$eval("#ev", (e) => { e.value = 0; e.dispatchEvent(new Event("input")); });
  const s0 = await state();
  const peak = await page.$("#jump-peak");
  if (peak) await peak.click();
  else await page.$eval("#ev", (e) => { e.value = e.max; e.dispatchEvent(new Event("input")); });
  const s1 = await state();
  if (s0 === s1) fail("the state view did not change between event 0 and the peak: " + s0);
  const live = await page.evaluate(() => {
    const D = window.gpurtReport.data, e = D.marks.peak;
    return D.allocs.filter((a) => (a[0] < 0 ? 0 : a[0]) <= e && (a[2] < 0 ? D.n_events : a[2]) > e).length;
  });
  if (peak && live && s1.split("/")[1] === "0") fail("no block drawn at the peak, where " + live + " are live");
  await page.screenshot({ path: outdir + "/state.png", fullPage: true });

  // the figures: hiding a series redraws
  await page.click("#show-allocated");
  if (await page.$eval("#show-allocated", (e) => e.checked)) fail("series toggle");

  finish();
  console.log("report.mjs: ok: " + page_path.split("/").pop() + " (" + loadMs + " ms to ready; state " + s0 +
              " -> " + s1 + ")");
} finally {
  await browser.close();
}
