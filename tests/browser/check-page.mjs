// Opens a page of `meshlife explain -o html` in a real headless Chromium (Debian's) and fails
// unless every workload the JSON output lists is on the page with its timeline drawn, the
// browser logged no console error or warning, no script error was thrown, and nothing was
// fetched from anywhere (the page must be self-contained). Writes a screenshot of the page's
// top and one of a workload with findings.
//
//   node check-page.mjs PAGE.html EXPLAIN.json SCREENSHOT-DIR
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const [pagePath, jsonPath, shotDir] = process.argv.slice(2);
if (!pagePath || !jsonPath || !shotDir) {
  console.error('usage: node check-page.mjs PAGE.html EXPLAIN.json SCREENSHOT-DIR');
  process.exit(2);
}
const expected = JSON.parse(readFileSync(jsonPath, 'utf8'));
const pageUrl = pathToFileURL(resolve(pagePath)).href;
const problems = [];

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  // The machine's network is closed: without these Chromium keeps trying Google's hosts.
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
try {
  const context = await browser.newContext({ viewport: { width: 1500, height: 1200 } });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') {
      problems.push(`console ${message.type()}: ${message.text()}`);
    }
  });
  page.on('pageerror', (error) => problems.push(`script error: ${error.message}`));
  page.on('request', (request) => {
    if (request.url() !== pageUrl) {
      problems.push(`the page fetched ${request.url()} (it must be self-contained)`);
    }
  });
  const response = await page.goto(pageUrl, { waitUntil: 'load' });
  if (!response || !response.ok()) {
    problems.push(`opening ${pageUrl}: ${response ? response.status() : 'no response'}`);
  }

  // Each workload: its section, its heading, and a drawn timeline (an SVG with a real size whose
  // bars have boxes), in the order of the JSON output.
  const sections = await page.$$eval('section.workload', (nodes) =>
    nodes.map((node) => {
      const svg = node.querySelector('figure svg');
      const box = svg ? svg.getBoundingClientRect() : null;
      const bars = svg ? [...svg.querySelectorAll('rect.bar')] : [];
      const drawnBars = bars.filter((bar) => {
        const size = bar.getBBox();
        return size.width > 0 && size.height > 0;
      }).length;
      return {
        heading: node.querySelector('h2')?.textContent ?? '',
        svgWidth: box ? box.width : 0,
        svgHeight: box ? box.height : 0,
        drawnBars,
        findings: node.querySelectorAll('.findings li').length,
      };
    }),
  );
  if (sections.length !== expected.length) {
    problems.push(`${sections.length} workloads on the page, ${expected.length} in the JSON output`);
  }
  expected.forEach((workload, index) => {
    const section = sections[index];
    const name = `${workload.object} (${workload.file}, ${workload.podSpec})`;
    if (!section) {
      problems.push(`${name}: not on the page`);
      return;
    }
    if (section.heading !== workload.object) {
      problems.push(`${name}: the page has "${section.heading}" in its place`);
    }
    if (section.svgWidth < 300 || section.svgHeight < 100) {
      problems.push(`${name}: timeline drawn ${section.svgWidth}x${section.svgHeight}`);
    }
    // Every lane has a bar in at least one phase (a proxy, an app: in both).
    if (section.drawnBars < workload.timeline.lanes.length) {
      problems.push(`${name}: ${section.drawnBars} bars drawn for ${workload.timeline.lanes.length} lanes`);
    }
    if (section.findings !== workload.findings.length) {
      problems.push(`${name}: ${section.findings} findings shown, ${workload.findings.length} in the JSON`);
    }
  });

  await page.screenshot({ path: `${shotDir}/explain-html-top.png` });
  const withFindings = await page.$('section.workload:has(.findings li.error)');
  if (withFindings) {
    await withFindings.screenshot({ path: `${shotDir}/explain-html-workload.png` });
  }
  const findings = sections.reduce((sum, section) => sum + section.findings, 0);
  console.log(
    `${sections.length} workloads rendered (${findings} findings) in Chromium ${browser.version()}; ` +
      `${problems.length} problems; screenshots in ${shotDir}`,
  );
} finally {
  await browser.close();
}
for (const problem of problems) {
  console.error(`problem: ${problem}`);
}
process.exit(problems.length === 0 ? 0 : 1);
