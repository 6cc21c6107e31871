// pagoda-server's chat page in headless Chromium: a person's keys and clicks (WebDriver), and
// what the page shows, read from the DOM. A reply streamed into the page at temperature 0 must
// be the text the API returns for the same messages; Stop must end the request on the server.
// PAGODA_WEBUI_SCREENSHOT=FILE saves a picture of a short conversation (docs/webui.png).

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { eventually, metric, scratch, startServer, stopServer, synthesize, testModel } from './server_process.mjs';
import { startBrowser } from './webdriver.mjs';

const ENTER = '\uE007';
const SHIFT = '\uE008';
const RELEASE = '\uE000';  // lets go of held modifier keys

// The last assistant message on the page: its state (streaming, done, stopped), text and note.
const LAST_REPLY = `const all = document.querySelectorAll('#messages .message.assistant');
  const m = all[all.length - 1];
  return m ? { state: m.dataset.state, text: m.querySelector('.content').textContent, meta: m.querySelector('.meta').textContent } : null;`;
// A reply well under way: Stop must work on a page that has been streaming for a while.
const REPLY_IS_LONG = `const all = document.querySelectorAll('#messages .message.assistant');
  const m = all[all.length - 1];
  return m && m.querySelector('.content').textContent.length >= 2000;`;
const REPLY_ENDED = `const all = document.querySelectorAll('#messages .message.assistant');
  const m = all[all.length - 1];
  return m && m.dataset.state !== 'streaming';`;

// A plain (not streamed) chat completion: its text, and the note the page shows under a reply
// with its token count and finish reason.
async function chat(server, body) {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  const c = JSON.parse(text);
  return { text: c.choices[0].message.content, meta: new RegExp(`^${c.usage.completion_tokens} tokens · .* tokens/s · ${c.choices[0].finish_reason}$`) };
}

// Opens the settings and replaces the fields' values.
async function setSettings(browser, values) {
  if (!(await browser.run("return document.getElementById('settings').open"))) await browser.click('#settings summary');
  for (const [id, value] of Object.entries(values)) {
    await browser.clear(`#${id}`);
    if (value !== '') await browser.type(`#${id}`, value);
  }
}

describe('the chat page', () => {
  let server;  // the test model, no API key
  let keyed;   // a slower random-weight model with --api-key, for the stop button
  let browser;
  const key = 'webui-test-key';
  const slowModel = path.join(scratch, 'webui-slow.gguf');

  before(async () => {
    // Thousands of tokens a reply at a few ms each: the reply still streams when Stop is clicked.
    synthesize(['-o', slowModel, '--dim', '384', '--layers', '6', '--heads', '6', '--ffn', '1024', '--vocab', '4096', '--context', '4096']);
    // One at a time, so after() stops whatever started if a later one fails.
    server = await startServer(['-c', '2048']);
    keyed = await startServer(['-m', slowModel, '-c', '4096', '--api-key', key]);
    browser = await startBrowser(scratch, { width: 960, height: 760 });
  });
  after(async () => {
    try {
      await browser?.quit();
    } finally {
      const servers = [server, keyed].filter(Boolean);
      const codes = await Promise.all(servers.map(stopServer));
      fs.rmSync(slowModel, { force: true });
      servers.forEach((s, i) => assert.equal(codes[i], 0, s.log()));
    }
  });

  test('the page is one HTML document that loads nothing from elsewhere', async () => {
    const res = await fetch(`${server.url}/`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.match(res.headers.get('content-security-policy'), /default-src 'none'/);
    const html = await res.text();
    assert.match(html, /^<!doctype html>/);
    assert.doesNotMatch(html, /(src|href)\s*=\s*["']?(https?:)?\/\//i, 'no external asset');
    assert.doesNotMatch(html, /@import|url\(/i, 'no external stylesheet or font');
  });

  test('a message streams a reply equal to the API\'s at temperature 0, and a second turn carries the first', async () => {
    await browser.open(`${server.url}/`);
    assert.equal(await browser.waitFor("return document.getElementById('model').value"), path.basename(testModel()));
    const settings = { system: 'You tell short stories.', temperature: '0', top_p: '0.9', max_tokens: '40', seed: '7' };
    await setSettings(browser, settings);
    const sampling = { temperature: 0, top_p: 0.9, max_tokens: 40, seed: 7 };

    // Shift+Enter is a new line in the message; nothing is sent yet.
    await browser.type('#prompt', `Once upon a time${SHIFT}${ENTER}${RELEASE}there was`);
    assert.equal(await browser.run("return document.getElementById('prompt').value"), 'Once upon a time\nthere was');
    assert.equal(await browser.run("return document.querySelectorAll('#messages .message').length"), 0);
    await browser.type('#prompt', ENTER);
    await browser.waitFor(REPLY_ENDED, { what: 'the first reply' });
    const first = await browser.run(LAST_REPLY);
    const messages = [{ role: 'system', content: settings.system }, { role: 'user', content: 'Once upon a time\nthere was' }];
    const expected = await chat(server, { messages, ...sampling });
    assert.ok(expected.text.length > 0);
    assert.deepEqual({ state: first.state, text: first.text }, { state: 'done', text: expected.text });
    assert.match(first.meta, expected.meta);
    assert.equal(await browser.run("return document.getElementById('prompt').value"), '', 'the box is emptied');

    await browser.type('#prompt', `What was her name?${ENTER}`);
    await browser.waitFor(REPLY_ENDED, { what: 'the second reply' });
    const second = await browser.run(LAST_REPLY);
    messages.push({ role: 'assistant', content: expected.text }, { role: 'user', content: 'What was her name?' });
    const expectedSecond = await chat(server, { messages, ...sampling });
    assert.deepEqual({ state: second.state, text: second.text }, { state: 'done', text: expectedSecond.text });
    assert.match(second.meta, expectedSecond.meta);

    await browser.click('#settings summary');  // closed, for the picture
    const png = await browser.screenshot();
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47], 'a PNG');
    if (process.env.PAGODA_WEBUI_SCREENSHOT) fs.writeFileSync(process.env.PAGODA_WEBUI_SCREENSHOT, png);
  });

  test('conversations stay in the browser: reload, new, switch, delete', async () => {
    const titles = () => browser.run("return [...document.querySelectorAll('#conversations .open')].map((b) => b.textContent)");
    const shown = () => browser.run("return [...document.querySelectorAll('#messages .message .content')].map((c) => c.textContent)");
    await browser.open(`${server.url}/`);
    assert.deepEqual(await titles(), ['Once upon a time']);
    const conversation = await shown();
    assert.equal(conversation.length, 4);
    assert.equal(conversation[2], 'What was her name?');
    assert.equal(await browser.run("return document.getElementById('temperature').value"), '0', 'settings are kept too');

    await browser.click('#new-chat');
    assert.deepEqual(await shown(), []);
    await browser.type('#prompt', `Lily and the ball${ENTER}`);
    await browser.waitFor(REPLY_ENDED, { what: 'the reply in the new conversation' });
    assert.deepEqual(await titles(), ['Lily and the ball', 'Once upon a time'], 'the newest first');

    await browser.click('#conversations li:nth-child(2) .open');
    assert.deepEqual(await shown(), conversation);
    await browser.click('#conversations li:nth-child(1) .delete');
    assert.deepEqual(await titles(), ['Once upon a time']);
    assert.deepEqual(await shown(), conversation, 'deleting another conversation keeps this one shown');
    const stored = await browser.run("return JSON.parse(localStorage.getItem('pagoda.conversations'))");
    assert.deepEqual(stored.map((c) => c.messages.length), [4]);
  });

  test('with --api-key the page loads without a key, says it needs one, and uses the one given', async () => {
    await browser.open(`${keyed.url}/`);
    assert.match(await browser.waitFor("return document.getElementById('model-status').textContent"), /API key needed/);
    assert.equal(await browser.run("return document.getElementById('settings').open"), true);

    // Sent without the key: the server's refusal is shown and the message comes back to edit.
    await browser.type('#prompt', `Hello${ENTER}`);
    assert.match(await browser.waitFor("return document.getElementById('error').hidden ? '' : document.getElementById('error').textContent"),
      /Incorrect API key/);
    assert.equal(await browser.run("return document.getElementById('prompt').value"), 'Hello');
    assert.equal(await browser.run("return document.querySelectorAll('#messages .message').length"), 0);

    await setSettings(browser, { temperature: '0', api_key: key });
    await browser.click('#prompt');  // leaving the key's field commits it
    assert.equal(await browser.waitFor("return document.getElementById('model').value"), path.basename(slowModel));
  });

  test('Stop ends a long reply: the server cancels the request, and the page takes the next message', async () => {
    const cancelled = await metric(keyed.url, 'pagoda_requests_total{outcome="cancelled"}');
    await browser.clear('#prompt');
    await browser.type('#prompt', `Tell me a very long story${ENTER}`);  // no max tokens: fills the context
    await browser.waitFor(REPLY_IS_LONG, { what: 'a long stretch of text streaming in' });
    const streaming = await browser.run(LAST_REPLY);
    assert.equal(streaming.state, 'streaming');
    assert.equal(await browser.run("return document.getElementById('send').disabled"), true);
    assert.equal(await metric(keyed.url, 'pagoda_num_requests_running'), 1);

    await browser.click('#stop');
    await browser.waitFor(REPLY_ENDED, { what: 'the reply to stop' });
    const stopped = await browser.run(LAST_REPLY);
    assert.equal(stopped.state, 'stopped');
    assert.equal(stopped.meta, 'stopped');
    assert.ok(stopped.text.startsWith(streaming.text), 'the text so far stays');
    assert.ok(await eventually(async () => (await metric(keyed.url, 'pagoda_num_requests_running')) === 0), 'the request ended');
    assert.equal(await metric(keyed.url, 'pagoda_requests_total{outcome="cancelled"}'), cancelled + 1);
    assert.ok(await eventually(async () => (await metric(keyed.url, 'pagoda_kv_pages_used')) === 0), 'every page came back');

    assert.equal(await browser.run("return document.getElementById('send').disabled"), false);
    assert.equal(await browser.run("return document.getElementById('stop').disabled"), true);
    assert.equal(await browser.run('return document.activeElement.id'), 'prompt', 'the focus is back in the message box');
    await setSettings(browser, { max_tokens: '8' });
    await browser.type('#prompt', `Hello again${ENTER}`);
    await browser.waitFor(REPLY_ENDED, { what: 'the reply after the stop' });
    const next = await browser.run(LAST_REPLY);
    assert.equal(next.state, 'done');
    assert.match(next.meta, /^\d tokens · .* · (length|stop)$/, 'at most 8 tokens');
  });

  test('--no-webui: / answers 404 in the API\'s error JSON', async () => {
    const plain = await startServer(['--no-webui', '-c', '256']);
    try {
      const res = await fetch(`${plain.url}/`);
      assert.equal(res.status, 404);
      assert.equal((await res.json()).error.code, 'not_found');
    } finally {
      assert.equal(await stopServer(plain), 0, plain.log());
    }
  });
});
