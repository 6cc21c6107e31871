// pagoda-server against hostile and careless clients (issue 33): deeply nested JSON in every
// field that takes JSON, a deeply nested grammar, a thousand slow sockets, a slow body, the API
// key on every route, the connection caps, a hang-up during a long answer, and a drain on
// SIGTERM with streams in flight.
// Every socket is to 127.0.0.1, and every wait is bounded.

import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { before, describe, test } from 'node:test';

import { eventually, metric, scratch, serverForSuite, startServer, stopServer, synthesize } from './server_process.mjs';

// `text` sent on a fresh connection (from `localAddress`); resolves with the raw answer once
// the server closes, or `timeoutMs` passes.
function raw(port, text, { localAddress = '127.0.0.1', timeoutMs = 10000 } = {}) {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress });
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of answer in ${timeoutMs} ms: ${JSON.stringify(answer.slice(0, 200))}`));
    }, timeoutMs);
    socket.on('connect', () => socket.write(text));
    socket.on('data', (d) => { answer += d; });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const status = Number(/^HTTP\/1\.1 (\d+)/.exec(answer)?.[1] ?? 0);
      resolve({ status, head: answer.split('\r\n\r\n')[0], body: answer.slice(answer.indexOf('\r\n\r\n') + 4) });
    });
  });
}

function post(route, body, headers = {}) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return `POST ${route} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n` +
    Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('') + `Content-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
}

const get = (route, headers = {}) =>
  `GET ${route} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;

// A JSON value `depth` levels deep, arrays and objects by turns.
function nested(depth) {
  let open = '';
  let close = '';
  for (let i = 0; i < depth; i += 1) {
    open += i % 2 ? '{"k":' : '[';
    close = (i % 2 ? '}' : ']') + close;
  }
  return `${open}0${close}`;
}

// An open connection that sends nothing (it holds a connection slot).
function idleSocket(port, localAddress) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port, localAddress });
    s.on('connect', () => resolve(s));
    s.on('error', reject);
  });
}

// A socket that writes `first` once connected, then `next()` every `everyMs` ms (the first at
// once) until it is closed, by the server or here after `limitMs`; resolves with how many ms it
// lived.
function trickle(port, { first = '', next, everyMs, limitMs }) {
  const opened = Date.now();
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    let timer;
    const drip = () => {
      if (s.destroyed) return;
      s.write(next());
      timer = setTimeout(drip, everyMs);
    };
    s.on('connect', () => {
      if (first) s.write(first);
      drip();
    });
    s.on('data', () => {});
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      resolve(Date.now() - opened);
    });
    setTimeout(() => s.destroy(), limitMs);
  });
}

describe('deep JSON and grammars', () => {
  const server = serverForSuite(['--max-body', '4194304']);

  test('every JSON field nested 100,000 deep is a clean 400 naming the limit, on every endpoint', async () => {
    const deep = nested(100000);
    const chat = (extra) => ({ messages: [{ role: 'user', content: 'x' }], max_tokens: 1, ...extra });
    const cases = [
      ['/v1/chat/completions', `{"messages":[{"role":"user","content":${deep}}]}`],
      ['/v1/chat/completions', `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${deep}}}}`],
      ['/v1/chat/completions', JSON.stringify(chat({ json_schema: 0 })).replace('"json_schema":0', `"json_schema":${deep}`)],
      ['/v1/chat/completions', `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]}`],
      ['/v1/chat/completions', `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":${deep}}`],
      ['/v1/completions', `{"prompt":${deep}}`],
      ['/v1/completions', `{"prompt":"x","json_schema":${deep}}`],
      ['/v1/completions', `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"s","schema":${deep}}}}`],
      ['/apply-template', `{"messages":[{"role":"user","content":${deep}}]}`],
      ['/apply-template', `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]}`],
      ['/apply-template', `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":${deep}}`],
      ['/v1/load_lora_adapter', `{"lora_name":${deep}}`],
    ];
    for (const [route, body] of cases) {
      const r = await raw(server.port, post(route, body));
      assert.equal(r.status, 400, `${route} ${body.slice(0, 80)}: ${r.body.slice(0, 200)}`);
      assert.match(JSON.parse(r.body).error.message, /--max-json-depth \(128 levels\)/);
    }
    // At the limit it is not the depth that is refused.
    const atLimit = await raw(server.port, post('/v1/completions', `{"prompt":"x","max_tokens":1,"k":${nested(127)}}`));
    assert.equal(atLimit.status, 200, atLimit.body);
    assert.equal((await raw(server.port, get('/health'))).status, 200, 'still serving');
  });

  test('a GBNF grammar of 50,000 nested parentheses is a 4xx, and the server still serves', async () => {
    const grammar = `root ::= ${'('.repeat(50000)}"a"${')'.repeat(50000)}`;
    for (const route of ['/v1/completions', '/v1/chat/completions']) {
      const body = route === '/v1/completions' ? { prompt: 'x', max_tokens: 1, grammar }
        : { messages: [{ role: 'user', content: 'x' }], max_tokens: 1, grammar };
      const r = await raw(server.port, post(route, body), { timeoutMs: 30000 }).catch((e) => ({ status: 0, body: e.message }));
      assert.ok(r.status >= 400 && r.status < 500, `${route}: ${r.status} ${r.body.slice(0, 200)}`);
    }
    assert.equal((await raw(server.port, get('/health'))).status, 200, 'still serving');
  });
});

describe('slow clients', () => {
  const server = serverForSuite(['--header-timeout', '5', '--body-timeout', '2', '--max-connections', '4096',
      '--max-connections-per-ip', '4096']);

  test('1,000 sockets trickling a header byte a second: normal requests keep p99 < 1 s; each is cut at 5 s', async () => {
    const head = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}';
    const slow = [];
    for (let i = 0; i < 1000; i += 1) {
      let sent = 0;
      // Bounded: a socket the server never cuts is ended here and fails the check below.
      slow.push(trickle(server.port, { next: () => head[sent++ % head.length], everyMs: 1000, limitMs: 12000 }));
    }
    await new Promise((r) => setTimeout(r, 500));
    const latencies = [];
    const end = Date.now() + 4000;
    while (Date.now() < end) {
      const t = performance.now();
      const r = await raw(server.port, post('/v1/completions', { prompt: 'Once', max_tokens: 2, temperature: 0 }));
      latencies.push(performance.now() - t);
      assert.equal(r.status, 200, r.body);
    }
    latencies.sort((a, b) => a - b);
    const p99 = latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))];
    console.log(`# ${latencies.length} requests beside 1,000 slow sockets: p50 ${latencies[latencies.length >> 1].toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`);
    assert.ok(p99 < 1000, `p99 ${p99} ms`);
    const lifetimes = await Promise.all(slow);
    lifetimes.sort((a, b) => a - b);
    console.log(`# slow sockets cut after ${lifetimes[0]}..${lifetimes.at(-1)} ms`);
    assert.ok(lifetimes[0] >= 4500, `cut early: ${lifetimes[0]} ms`);
    assert.ok(lifetimes.at(-1) <= 8000, `cut late: ${lifetimes.at(-1)} ms`);
  });

  test('a body trickling a byte every 200 ms is cut at --body-timeout (2 s)', async () => {
    const lifetime = await trickle(server.port, {
      first: 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 1000\r\n\r\n',
      next: () => ' ',
      everyMs: 200,
      limitMs: 10000,
    });
    assert.ok(lifetime >= 1800 && lifetime <= 4000, `cut after ${lifetime} ms`);
    assert.equal((await raw(server.port, get('/health'))).status, 200);
  });

  test('a body over --max-body is 413 before it is read; Expect: 100-continue is answered', async () => {
    const big = await raw(server.port, 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n');
    assert.equal(big.status, 413);
    assert.match(big.head, /Connection: close/i);
    const body = JSON.stringify({ prompt: 'Once', max_tokens: 1 });
    const r = await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port: server.port });
      let answer = '';
      s.on('connect', () => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`));
      s.on('data', (d) => {
        answer += d;
        if (answer === 'HTTP/1.1 100 Continue\r\n\r\n') s.write(body);
      });
      s.on('close', () => resolve(answer));
      setTimeout(() => s.destroy(), 10000);
    });
    assert.match(r, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
  });
});

describe('the API key', () => {
  const server = serverForSuite(['--api-key', 'sesame', '--metrics-key', 'gauges']);

  test('every route but /health, /metrics and the chat page needs it: Bearer or x-api-key', async () => {
    const guarded = [
      post('/v1/completions', { prompt: 'x', max_tokens: 1 }),
      post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }),
      get('/v1/models'),
      post('/apply-template', { messages: [{ role: 'user', content: 'x' }] }),
      post('/v1/load_lora_adapter', { lora_name: 'a', lora_path: '/nonexistent' }),
      post('/v1/unload_lora_adapter', { lora_name: 'a' }),
      get('/v1/anything-new'),
      get('/some/future/route'),
    ];
    for (const request of guarded) {
      const line = request.split('\r\n')[0];
      for (const headers of [{}, { Authorization: 'Bearer sesamf' }, { 'x-api-key': 'sesam' }]) {
        const withHeaders = request.replace('Host: x\r\n', `Host: x\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}`);
        const r = await raw(server.port, withHeaders);
        assert.equal(r.status, 401, `${line} ${JSON.stringify(headers)}`);
        assert.equal(JSON.parse(r.body).error.code, 'invalid_api_key');
      }
    }
    assert.equal((await raw(server.port, get('/v1/models', { Authorization: 'Bearer sesame' }))).status, 200);
    assert.equal((await raw(server.port, get('/v1/models', { 'x-api-key': 'sesame' }))).status, 200);
    const applied = await raw(server.port, post('/apply-template', { messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': 'sesame' }));
    assert.equal(applied.status, 200, applied.body);
    assert.equal((await raw(server.port, get('/health'))).status, 200);
    assert.equal((await raw(server.port, get('/'))).status, 200);
    const head = await raw(server.port, get('/health').replace('GET', 'HEAD'));
    assert.equal(head.status, 200, 'HEAD is answered as GET');
    assert.match(head.head, /Content-Length: 15/i);
    assert.equal(head.body, '', 'without the body');
    assert.equal((await raw(server.port, get('/v1/models').replace('GET', 'HEAD'))).status, 401);
  });

  test('--metrics-key guards /metrics, and only its own key opens it', async () => {
    assert.equal((await raw(server.port, get('/metrics'))).status, 401);
    assert.equal((await raw(server.port, get('/metrics', { Authorization: 'Bearer sesame' }))).status, 401);
    assert.equal((await raw(server.port, get('/metrics', { Authorization: 'Bearer gauges' }))).status, 200);
  });
});

describe('connection caps', () => {
  const server = serverForSuite(['--max-connections', '6', '--max-connections-per-ip', '3']);

  test('past --max-connections-per-ip and --max-connections: 503 with Connection: close', async () => {
    const held = [];
    for (let i = 0; i < 3; i += 1) held.push(await idleSocket(server.port, '127.0.0.1'));
    const perIp = await raw(server.port, get('/health'), { localAddress: '127.0.0.1' });
    assert.equal(perIp.status, 503);
    assert.match(perIp.head, /Connection: close/i);
    assert.match(JSON.parse(perIp.body).error.message, /--max-connections/);
    for (let i = 0; i < 3; i += 1) held.push(await idleSocket(server.port, '127.0.0.2'));
    const total = await raw(server.port, get('/health'), { localAddress: '127.0.0.3' });
    assert.equal(total.status, 503);
    for (const s of held) s.destroy();
    assert.ok(await eventually(async () => (await raw(server.port, get('/health'))).status === 200, 5000),
      'slots come back when their connections close');
  });
});

describe('long generations', () => {
  // Random weights big enough that a few thousand tokens take longer than the test waits.
  const slowModel = path.join(scratch, 'abuse-slow.gguf');
  before(() => {
    synthesize(['-o', slowModel, '--dim', '384', '--layers', '6', '--heads', '6', '--ffn', '1024', '--vocab', '4096', '--context', '4096']);
  });

  test('the server listens before its model loads: /health says "loading" (503), then "ok"', async () => {
    // A large KV cache to make resident keeps the load going a while after the listening line.
    const server = await startServer(['-m', slowModel, '-c', '131072'], { ready: false });
    try {
      const seen = [];
      assert.ok(await eventually(async () => {
        const r = await raw(server.port, get('/health'));
        seen.push(`${r.status} ${r.body}`);
        if (r.status === 503) {
          // Unless the model came in between, a route that needs it is a 503 saying so.
          const c = await raw(server.port, post('/v1/completions', { prompt: 'x', max_tokens: 1 }));
          assert.ok(c.status === 200 || (c.status === 503 && /still loading/.test(c.body)), `${c.status} ${c.body}`);
        }
        return r.status === 200;
      }, 30000), 'it became ready');
      for (const s of seen) assert.match(s, /^(503 \{"status":"loading"\}|200 \{"status":"ok"\})$/);
      console.log(`# /health answered "loading" ${seen.length - 1} times before "ok"`);
      assert.ok(server.log().indexOf('listening on') < server.log().indexOf(' ready'), server.log());
    } finally {
      await stopServer(server);
    }
  });

  test('a client that hangs up on a non-streamed request cancels it, and its pages come back', async () => {
    const server = await startServer(['-m', slowModel]);
    try {
      const before = await metric(server.url, 'pagoda_requests_total{outcome="cancelled"}');
      const s = net.connect({ host: '127.0.0.1', port: server.port });
      s.on('error', () => {});
      s.write(post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 3000, ignore_eos: true }));
      assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_num_requests_running')) === 1, 10000), 'running');
      s.destroy();
      assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_requests_total{outcome="cancelled"}')) === before + 1, 5000),
        'the request was cancelled');
      assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_kv_pages_used')) === 0, 5000), 'every page came back');
    } finally {
      await stopServer(server);
    }
  });

  test('a request whose client hangs up while it waits for a worker is dropped unrun', async () => {
    const server = await startServer(['-m', slowModel, '--http-threads', '1']);
    try {
      const holder = net.connect({ host: '127.0.0.1', port: server.port });
      holder.on('error', () => {});
      holder.write(post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 3000, ignore_eos: true, stream: true }));
      assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_num_requests_running')) === 1, 10000));
      const waiter = net.connect({ host: '127.0.0.1', port: server.port });
      waiter.on('error', () => {});
      waiter.write(post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 3000, ignore_eos: true }));
      await new Promise((r) => setTimeout(r, 300));
      waiter.destroy();
      await new Promise((r) => setTimeout(r, 300));
      holder.destroy();  // frees the one worker for the waiting request
      assert.ok(await eventually(() => /"POST \/v1\/completions" 499 0\n/.test(server.log()), 5000), server.log());
      assert.equal(await metric(server.url, 'pagoda_num_requests_running'), 0);
      assert.equal(await metric(server.url, 'pagoda_num_requests_waiting'), 0);
    } finally {
      await stopServer(server);
    }
  });

  test('SIGTERM with 20 streams in flight: each ends with a finish_reason chunk and [DONE]; exit within --shutdown-timeout + 2 s', async () => {
    const server = await startServer(['-m', slowModel, '--shutdown-timeout', '3']);
    // Each stream: `started` once its first chunk came, `done` with all it got once closed.
    const streams = Array.from({ length: 20 }, () => {
      let first;
      const started = new Promise((r) => { first = r; });
      const done = new Promise((resolve) => {
        const s = net.connect({ host: '127.0.0.1', port: server.port });
        let answer = '';
        s.on('connect', () => s.write(post('/v1/completions', { prompt: 'Once upon a time', max_tokens: 3000, ignore_eos: true, stream: true })));
        s.on('data', (d) => {
          answer += d;
          if (answer.includes('data: {')) first();
        });
        s.on('error', () => {});
        s.on('close', () => resolve(answer));
        setTimeout(() => s.destroy(), 30000);
      });
      return { started, done };
    });
    await Promise.all(streams.map((s) => s.started));
    const t0 = Date.now();
    const exited = new Promise((r) => server.proc.once('exit', (code) => r({ code, ms: Date.now() - t0 })));
    server.proc.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const health = await raw(server.port, get('/health'));
    assert.equal(health.status, 503);
    assert.match(health.head, /Connection: close/i);
    const refused = await raw(server.port, post('/v1/completions', { prompt: 'x', max_tokens: 1 }));
    assert.equal(refused.status, 503);
    const answers = await Promise.all(streams.map((s) => s.done));
    for (const a of answers) {
      assert.ok(a.endsWith('data: [DONE]\n\n\r\n0\r\n\r\n'), JSON.stringify(a.slice(-120)));
      const events = [...a.matchAll(/data: (\{.*\})\n\n/g)].map((m) => JSON.parse(m[1]));
      assert.ok(events.length > 1);
      assert.equal(events.at(-1).choices[0].finish_reason, 'length', JSON.stringify(events.at(-1)));
    }
    const { code, ms } = await exited;
    console.log(`# exited ${ms} ms after SIGTERM with --shutdown-timeout 3`);
    assert.equal(code, 0, server.log());
    assert.ok(ms >= 2800 && ms <= 5000, `${ms} ms`);
  });
});
