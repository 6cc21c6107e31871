// Headless Chromium for a test, driven through chromedriver's W3C WebDriver HTTP API with
// node's fetch: no npm package, no browser download. Debian's `chromium` and
// `chromium-driver` packages provide both programs.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';  // the W3C key of an element reference

class WebDriverError extends Error {}

// One browser session. Every call is a WebDriver command; `timeoutMs` bounds each wait.
export class Browser {
  constructor(driver, base, session, profile) {
    this.driver = driver;
    this.base = base;
    this.session = session;
    this.profile = profile;
  }

  async command(method, route, body) {
    const res = await fetch(`${this.base}/session/${this.session}${route}`, {
      method,
      headers: { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const reply = await res.json();
    if (!res.ok) throw new WebDriverError(`${method} ${route}: ${reply.value?.error}: ${reply.value?.message}`);
    return reply.value;
  }

  open(url) { return this.command('POST', '/url', { url }); }

  async find(selector) {
    const found = await this.command('POST', '/element', { using: 'css selector', value: selector });
    return found[ELEMENT];
  }

  async click(selector) { await this.command('POST', `/element/${await this.find(selector)}/click`, {}); }

  async clear(selector) { await this.command('POST', `/element/${await this.find(selector)}/clear`, {}); }

  // Types as a person would, key by key: '\uE007' is Enter, '\uE008' holds Shift for the rest.
  async type(selector, text) { await this.command('POST', `/element/${await this.find(selector)}/value`, { text }); }

  // Runs `script` (a function body; `arguments` holds args) in the page and returns its value.
  run(script, ...args) { return this.command('POST', '/execute/sync', { script, args }); }

  // Polls `script` in the page until it returns a truthy value, which it returns.
  async waitFor(script, { timeoutMs = 60000, what = script } = {}) {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const value = await this.run(script);
      if (value) return value;
      if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async screenshot() { return Buffer.from(await this.command('GET', '/screenshot'), 'base64'); }

  // Ends the session (chromedriver closes Chromium), then chromedriver itself.
  async quit() {
    try {
      await this.command('DELETE', '');
    } finally {
      await stopDriver(this.driver);
      fs.rmSync(this.profile, { recursive: true, force: true });
    }
  }
}

function stopDriver(driver) {
  return new Promise((resolve) => {
    if (driver.exitCode !== null || driver.signalCode !== null) return resolve();
    driver.once('exit', () => resolve());
    // Its own process group: a Chromium it left behind goes with it.
    process.kill(-driver.pid, 'SIGKILL');
  });
}

// Starts chromedriver on a free port and a headless Chromium session in a fresh profile under
// `dir`, with a window of `width` × `height` CSS pixels.
export async function startBrowser(dir, { width = 1000, height = 700, timeoutMs = 60000 } = {}) {
  const driver = spawn('chromedriver', ['--port=0'], { stdio: ['ignore', 'pipe', 'ignore'], detached: true });
  let output = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chromedriver did not start: ${output}`)), timeoutMs);
    driver.stdout.on('data', (chunk) => {
      output += chunk;
      const m = /started successfully on port (\d+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    driver.on('exit', (code) => reject(new Error(`chromedriver exited with ${code}: ${output}`)));
  });
  const base = `http://127.0.0.1:${port}`;
  const profile = fs.mkdtempSync(path.join(dir, 'chromium-'));
  try {
    const res = await fetch(`${base}/session`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        capabilities: {
          alwaysMatch: {
            browserName: 'chrome',
            'goog:chromeOptions': {
              binary: '/usr/bin/chromium',
              // --no-sandbox: tests run as root in CI, where Chromium's sandbox refuses to start.
              args: ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
                `--user-data-dir=${profile}`, `--window-size=${width},${height}`],
            },
          },
        },
      }),
    });
    const reply = await res.json();
    if (!res.ok) throw new WebDriverError(`cannot start Chromium: ${reply.value?.message}`);
    return new Browser(driver, base, reply.value.sessionId, profile);
  } catch (e) {
    await stopDriver(driver);
    fs.rmSync(profile, { recursive: true, force: true });
    throw e;
  }
}
