// Two pagoda-server replicas behind HAProxy on loopback, configured as docs/deployment.md
// recommends: a conversation (X-Session-Id) always reaches the same replica by consistent
// hashing, requests without one go to the least busy replica, and a replica that dies is
// taken out by the health check while its sessions move on to the other.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { eventually, scratch, startServer, stopServer } from './server_process.mjs';

const haproxyFound = spawnSync('haproxy', ['-v']).status === 0;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// The configuration of docs/deployment.md, on loopback ports.
function haproxyConfig(port, replicas) {
  const servers = replicas.map((r, i) => `  server replica${i + 1} 127.0.0.1:${r.port} check inter 200ms fall 2 rise 2`).join('\n');
  return `global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 300s
  timeout server 300s
  retries 3
  option redispatch 1
frontend openai
  bind 127.0.0.1:${port}
  use_backend by_session if { req.hdr(X-Session-Id) -m found }
  default_backend least_busy
backend by_session
  balance hdr(X-Session-Id)
  hash-type consistent
  option httpchk GET /health
  http-response set-header X-Pagoda-Replica %s
${servers}
backend least_busy
  balance leastconn
  option httpchk GET /health
  http-response set-header X-Pagoda-Replica %s
${servers}
`;
}

describe('pagoda-server replicas behind HAProxy', { skip: haproxyFound ? false : 'haproxy is not installed' }, () => {
  const replicas = [];
  let haproxy;
  let url;
  before(async () => {
    replicas.push(await startServer(), await startServer());
    const port = await freePort();
    const config = path.join(scratch, 'haproxy.cfg');
    fs.writeFileSync(config, haproxyConfig(port, replicas));
    const check = spawnSync('haproxy', ['-c', '-f', config], { encoding: 'utf8' });
    assert.equal(check.status, 0, check.stdout + check.stderr);
    haproxy = spawn('haproxy', ['-db', '-f', config], { stdio: ['ignore', 'ignore', 'inherit'] });
    url = `http://127.0.0.1:${port}`;
    assert.ok(await eventually(async () => {
      try {
        return (await fetch(`${url}/health`)).status === 200;
      } catch {
        return false;
      }
    }), 'haproxy answers');
  });
  after(async () => {
    haproxy?.kill('SIGTERM');
    for (const r of replicas) await stopServer(r);
  });

  const complete = (session) => fetch(`${url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...(session ? { 'X-Session-Id': session } : {}) },
    body: JSON.stringify({ prompt: 'Once upon a time', max_tokens: 4, temperature: 0 }),
  });

  // The replicas that answered `n` completions of `session` (null: none).
  const replicasAnswering = async (session, n) => {
    const seen = new Set();
    for (let i = 0; i < n; ++i) {
      const res = await complete(session);
      assert.equal(res.status, 200);
      seen.add(res.headers.get('x-pagoda-replica'));
      await res.text();
    }
    return seen;
  };

  test('a session sticks to one replica; sessionless requests spread', async () => {
    for (const session of ['alice', 'bob', 'carol', 'dave']) {
      const seen = await replicasAnswering(session, 4);
      assert.equal(seen.size, 1, `${session} went to ${[...seen]}`);
    }
    assert.equal((await replicasAnswering(null, 8)).size, 2, 'leastconn uses both replicas');
  });

  test('when a session\'s replica dies, its requests go on on the other', async () => {
    const first = await complete('alice');
    const home = first.headers.get('x-pagoda-replica');
    await first.text();
    const victim = replicas[Number(home.replace('replica', '')) - 1];
    victim.proc.kill('SIGKILL');
    await new Promise((r) => victim.proc.once('exit', r));
    for (let i = 0; i < 6; ++i) {
      const res = await complete('alice');
      assert.equal(res.status, 200, 'served despite the dead replica');
      assert.notEqual(res.headers.get('x-pagoda-replica'), home);
      assert.equal((await res.json()).usage.completion_tokens, 4);
    }
  });
});
