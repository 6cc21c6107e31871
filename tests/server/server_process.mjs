// Starting pagoda-server for a test: on a free loopback port (--port 0; the port is read from
// its "listening on" line, printed before the model loads; ready once /health says "ok"), with
// every wait bounded so a hung server fails the test.

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before } from 'node:test';

export const BIN = process.env.PAGODA_BIN;
export const SHARED = process.env.PAGODA_SHARED;

export const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'pagoda-server-test-'));

// stories260K when ../shared has it, else a small random-weight model pagoda-synth writes.
export function testModel() {
  const stories = path.join(SHARED ?? '', 'models/stories260K/stories260K.gguf');
  if (SHARED && fs.existsSync(stories)) return stories;
  const synth = path.join(scratch, 'synth.gguf');
  if (!fs.existsSync(synth)) {
    synthesize(['-o', synth, '--dim', '64', '--layers', '2', '--heads', '4', '--ffn', '128', '--vocab', '512', '--context', '512']);
  }
  return synth;
}

// Qwen's 152k-token vocabulary from ../shared, and why a suite that needs it is skipped (false
// when it is there).
export const QWEN_VOCAB = path.join(SHARED ?? '', 'vocab/ggml-vocab-qwen2.gguf');
export const qwenSkip = !SHARED || !fs.existsSync(QWEN_VOCAB) ? `${QWEN_VOCAB} is absent` : false;

// A small random-weight qwen2 model with Qwen's vocabulary and chat template (Hermes-style tool
// calls), written once per name into the scratch folder; returns its path.
export function qwenModel(name, { context = 4096, seed = 5 } = {}) {
  const file = path.join(scratch, `${name}.gguf`);
  if (!fs.existsSync(file)) {
    synthesize(['-o', file, '--arch', 'qwen2', '--dim', '64', '--layers', '2', '--heads', '4', '--kv-heads', '2', '--ffn', '128',
      '--vocab', QWEN_VOCAB, '--context', String(context), '--seed', String(seed)]);
  }
  return file;
}

export function synthesize(args) {
  const r = spawnSync(path.join(BIN, 'pagoda-synth'), args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pagoda-synth ${args.join(' ')} failed: ${r.stderr}`);
}

// Starts the server (on testModel() unless `model` is given); resolves with { url, port, proc,
// log() } once it listens, or with `ready` (the default) once its model is loaded too.
export async function startServer(extraArgs = [], { timeoutMs = 60000, model = testModel(), ready = true } = {}) {
  const server = await startListening(extraArgs, { timeoutMs, model });
  if (!ready) return server;
  const ok = await eventually(async () => {
    if (server.proc.exitCode !== null) throw new Error(`pagoda-server exited with ${server.proc.exitCode}: ${server.log()}`);
    try {
      return (await fetch(`${server.url}/health`)).status === 200;
    } catch {
      return false;
    }
  }, timeoutMs);
  if (!ok) {
    server.proc.kill('SIGKILL');
    throw new Error(`pagoda-server did not load its model: ${server.log()}`);
  }
  return server;
}

function startListening(extraArgs, { timeoutMs, model }) {
  const proc = spawn(path.join(BIN, 'pagoda-server'), ['-m', model, '--port', '0', '-t', '1', ...extraArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`pagoda-server did not start: ${stderr}`));
    }, timeoutMs);
    proc.stderr.on('data', (chunk) => {
      stderr += chunk;
      const m = /listening on http:\/\/([0-9.]+):(\d+)/.exec(stderr);
      if (m && timer) {
        clearTimeout(timer);
        resolve({ url: `http://${m[1]}:${m[2]}`, port: Number(m[2]), proc, log: () => stderr });
      }
    });
    proc.on('exit', (code) => reject(new Error(`pagoda-server exited with ${code}: ${stderr}`)));
  });
}

// The server of a describe block: started with `extraArgs` before the block's tests and stopped
// after them; the returned object holds startServer's fields by the time the tests run.
export function serverForSuite(extraArgs = []) {
  const server = {};
  before(async () => {
    Object.assign(server, await startServer(extraArgs));
  });
  after(async () => {
    await stopServer(server);
  });
  return server;
}

// Stops it with SIGTERM; resolves with its exit code.
export function stopServer(server) {
  return new Promise((resolve) => {
    if (server.proc.exitCode !== null || server.proc.signalCode !== null) return resolve(server.proc.exitCode);
    server.proc.once('exit', (code) => resolve(code));
    server.proc.kill('SIGTERM');
  });
}

// The value of one unlabelled Prometheus sample in /metrics.
export async function metric(url, name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name.replace(/[{}"]/g, '\\$&')} (\\S+)$`, 'm').exec(text);
  if (!m) throw new Error(`${name} is not in /metrics:\n${text}`);
  return Number(m[1]);
}

// Polls `check` until it is true or `timeoutMs` passes; returns its last result.
export async function eventually(check, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
}
