// pagoda-server driven by the official openai client: completions and chat, plain and
// streamed, adapters through vLLM's endpoints, the errors, authentication, and a client that
// disconnects mid-stream. Each assertion is about behaviour; none about timing.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

import OpenAI from 'openai';

import {
  BIN, eventually, metric, scratch, serverForSuite, startServer, stopServer, synthesize, testModel,
} from './server_process.mjs';

const greedy = { temperature: 0, max_tokens: 12 };

describe('pagoda-server', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['--max-body', '65536']);
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('health and the model list', async () => {
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok' });
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), [path.basename(testModel())]);
  });

  test('a completion: its text, finish reason and usage', async () => {
    const c = await client.completions.create({ model: path.basename(testModel()), prompt: 'Once upon a time', ...greedy });
    assert.equal(c.object, 'text_completion');
    assert.equal(c.choices.length, 1);
    assert.ok(c.choices[0].text.length > 0);
    assert.equal(c.choices[0].finish_reason, 'length');
    assert.equal(c.usage.completion_tokens, 12);
    assert.ok(c.usage.prompt_tokens > 0);
    assert.equal(c.usage.total_tokens, c.usage.prompt_tokens + 12);
    const again = await client.completions.create({ prompt: 'Once upon a time', ...greedy });
    assert.equal(again.choices[0].text, c.choices[0].text, 'greedy is deterministic');
  });

  test('a streamed completion is the same text, then the finish reason and usage', async () => {
    const whole = await client.completions.create({ prompt: 'Once upon a time', ...greedy });
    const stream = await client.completions.create({ prompt: 'Once upon a time', ...greedy, stream: true });
    let text = '';
    let last;
    let chunks = 0;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.text ?? '';
      last = chunk;
      chunks += 1;
    }
    assert.ok(chunks > 2, 'streamed in pieces');
    assert.equal(text, whole.choices[0].text);
    assert.equal(last.choices[0].finish_reason, 'length');
    assert.deepEqual(last.usage, whole.usage);
  });

  test('stop strings end the text before them', async () => {
    const whole = await client.completions.create({ prompt: 'Once upon a time', temperature: 0, max_tokens: 40 });
    const text = whole.choices[0].text;
    const word = text.trim().split(/\s+/)[2];
    const stopped = await client.completions.create({ prompt: 'Once upon a time', temperature: 0, max_tokens: 40, stop: [word] });
    assert.equal(stopped.choices[0].finish_reason, 'stop');
    assert.equal(stopped.choices[0].text, text.slice(0, text.indexOf(word)));
  });

  test('a list of prompts gets one choice each, in order, as each alone would', async () => {
    const prompts = ['Once upon a time', 'The cat', 'One day'];
    const alone = await Promise.all(prompts.map((prompt) => client.completions.create({ prompt, ...greedy })));
    const batch = await client.completions.create({ prompt: prompts, ...greedy });
    assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2]);
    assert.deepEqual(batch.choices.map((c) => c.text), alone.map((c) => c.choices[0].text));
    assert.equal(batch.usage.prompt_tokens, alone.reduce((n, c) => n + c.usage.prompt_tokens, 0));
    assert.equal(batch.usage.completion_tokens, 36);

    const ids = await client.completions.create({ prompt: [[1, 403, 404], [1, 500]], max_tokens: 3, temperature: 0, n: 2, echo: true });
    assert.deepEqual(ids.choices.map((c) => c.index), [0, 1, 2, 3], 'prompt i\'s choices are i·n … i·n + n − 1');
    assert.equal(ids.choices[0].text.slice(0, 5), ids.choices[1].text.slice(0, 5));
    assert.notEqual(ids.choices[1].text.slice(0, 5), ids.choices[2].text.slice(0, 5), 'each choice echoes its own prompt');

    const streamed = ['', '', ''];
    for await (const chunk of await client.completions.create({ prompt: prompts, ...greedy, stream: true })) {
      for (const c of chunk.choices) streamed[c.index] += c.text;
    }
    assert.deepEqual(streamed, batch.choices.map((c) => c.text));
    await assert.rejects(client.completions.create({ prompt: ['x', 5] }), (e) => e.status === 400 && /mixes/.test(e.message));
    await assert.rejects(client.completions.create({ prompt: ['x', ''] }), (e) => e.status === 400 && /'prompt\[1\]' is empty/.test(e.message));
  });

  test('/tokenize and /detokenize as llama-server answers them', async () => {
    const post = async (route, body) => {
      const res = await fetch(`${server.url}${route}`, { method: 'POST', body: JSON.stringify(body) });
      return { status: res.status, body: await res.json() };
    };
    const plain = await post('/tokenize', { content: 'Once upon a time' });
    assert.equal(plain.status, 200);
    assert.ok(plain.body.tokens.length > 0 && plain.body.tokens.every(Number.isInteger));
    assert.equal(plain.body.count, plain.body.tokens.length);
    const c = await client.completions.create({ prompt: 'Once upon a time', max_tokens: 1 });
    const bos = await post('/tokenize', { content: 'Once upon a time', add_special: true });
    assert.equal(bos.body.tokens.length, c.usage.prompt_tokens, 'with add_special it is the prompt a completion reads');
    const pieces = await post('/tokenize', { content: 'Once upon a time', with_pieces: true });
    assert.deepEqual(pieces.body.tokens.map((t) => t.id), plain.body.tokens);
    const back = await post('/detokenize', { tokens: plain.body.tokens });
    assert.equal(back.body.content, pieces.body.tokens.map((t) => t.piece).join(''), 'the text is its pieces');
    // A SentencePiece vocabulary's first piece keeps its word's space ("▁Once"), as llama-server's does.
    assert.equal(back.body.content.trimStart(), 'Once upon a time');
    assert.equal((await post('/detokenize', { tokens: [-1] })).status, 400);
    assert.equal((await post('/tokenize', { content: 5 })).status, 400);
  });

  test('chat, plain and streamed', async () => {
    const messages = [{ role: 'user', content: 'Once upon a time' }];
    const c = await client.chat.completions.create({ messages, ...greedy });
    assert.equal(c.object, 'chat.completion');
    assert.equal(c.choices[0].message.role, 'assistant');
    assert.ok(c.choices[0].message.content.length > 0);
    const stream = await client.chat.completions.create({ messages, ...greedy, stream: true, stream_options: { include_usage: true } });
    let text = '';
    const roles = [];
    let usage;
    for await (const chunk of stream) {
      if (chunk.choices.length === 0) usage = chunk.usage;  // the include_usage chunk
      for (const choice of chunk.choices) {
        if (choice.delta.role) roles.push(choice.delta.role);
        text += choice.delta.content ?? '';
      }
    }
    assert.deepEqual(roles, ['assistant'], 'the role comes once, first');
    assert.equal(text, c.choices[0].message.content);
    assert.deepEqual(usage, c.usage);
  });

  test('logit_bias and the penalties change the output as defined', async () => {
    // +100 on one token: every token is that one, so the text is its piece over and over.
    const forced = (max_tokens) => client.completions.create({ prompt: 'Once upon a time', ...greedy, max_tokens, logit_bias: { 100: 100 } });
    const [one, two, twelve] = await Promise.all([forced(1), forced(2), forced(12)]);
    const piece = two.choices[0].text.slice(one.choices[0].text.length);
    assert.ok(piece.length > 0);
    assert.equal(twelve.choices[0].text, one.choices[0].text + piece.repeat(11));
    // The penalties make a long greedy story use more distinct words.
    const words = (c) => new Set(c.choices[0].text.split(/\s+/)).size;
    const story = { prompt: 'Once upon a time', temperature: 0, max_tokens: 80 };
    const plain = await client.completions.create(story);
    const varied = await client.completions.create({ ...story, presence_penalty: 2, frequency_penalty: 2 });
    assert.notEqual(varied.choices[0].text, plain.choices[0].text);
    assert.ok(words(varied) > words(plain), `${words(varied)} distinct words against ${words(plain)}`);
  });

  test('logprobs: sorted alternatives led by the greedy token, the same streamed', async () => {
    const chat = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Tell me a story' }], ...greedy, logprobs: true, top_logprobs: 3,
    });
    const content = chat.choices[0].logprobs.content;
    assert.equal(content.length, chat.usage.completion_tokens - (chat.choices[0].finish_reason === 'stop' ? 1 : 0));
    assert.equal(content.map((t) => t.token).join(''), chat.choices[0].message.content);
    for (const t of content) {
      assert.equal(t.top_logprobs.length, 3);
      assert.equal(t.top_logprobs[0].token, t.token, 'at temperature 0 the chosen token is the most likely');
      assert.equal(t.top_logprobs[0].logprob, t.logprob);
      for (let k = 1; k < 3; k += 1) assert.ok(t.top_logprobs[k - 1].logprob >= t.top_logprobs[k].logprob);
      assert.ok(t.logprob <= 0);
      assert.deepEqual(t.bytes, [...Buffer.from(t.token, 'utf8')]);
    }
    const streamed = [];
    const stream = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'Tell me a story' }], ...greedy, logprobs: true, top_logprobs: 3, stream: true,
    });
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    assert.deepEqual(streamed, content);

    const c = await client.completions.create({ prompt: 'Once upon a time', ...greedy, logprobs: 2 });
    const lp = c.choices[0].logprobs;
    assert.equal(lp.tokens.length, 12);
    assert.equal(lp.tokens.join(''), c.choices[0].text);
    assert.deepEqual(lp.text_offset, lp.tokens.map((_, i) => lp.tokens.slice(0, i).join('').length));
    for (let i = 0; i < 12; i += 1) {
      const alternatives = Object.entries(lp.top_logprobs[i]).sort((a, b) => b[1] - a[1]);
      assert.equal(alternatives[0][0], lp.tokens[i]);
      assert.equal(alternatives[0][1], lp.token_logprobs[i]);
    }
    const plain = await client.completions.create({ prompt: 'Once upon a time', ...greedy });
    assert.equal(plain.choices[0].logprobs, null);
  });

  test('echo + logprobs + max_tokens 0 scores the prompt as pagoda-perplexity does', async () => {
    const ids = [1, ...Array.from({ length: 40 }, (_, i) => ((i * 37 + 11) % 500) + 3)];
    const c = await client.completions.create({ prompt: ids, echo: true, logprobs: 1, max_tokens: 0, temperature: 0 });
    const lp = c.choices[0].logprobs;
    assert.equal(c.usage.completion_tokens, 0);
    assert.equal(lp.tokens.length, ids.length);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);

    const idsFile = path.join(scratch, 'echo-ids.json');
    const out = path.join(scratch, 'echo-ppl.json');
    fs.writeFileSync(idsFile, JSON.stringify([ids]));
    const r = spawnSync(path.join(BIN, 'pagoda-perplexity'), ['-m', testModel(), '--ids', idsFile, '--json', out, '-t', '1'], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const nll = JSON.parse(fs.readFileSync(out, 'utf8')).sequences[0].nll;
    assert.equal(nll.length, ids.length - 1);
    for (let i = 1; i < ids.length; i += 1) assert.ok(Math.abs(lp.token_logprobs[i] + nll[i - 1]) < 1e-5, `token ${i}: ${lp.token_logprobs[i]} vs ${-nll[i - 1]}`);

    // Echo with a text prompt and new tokens: the prompt, then the completion.
    const plain = await client.completions.create({ prompt: 'Once upon a time', ...greedy });
    const echoed = await client.completions.create({ prompt: 'Once upon a time', ...greedy, echo: true });
    assert.equal(echoed.choices[0].text, 'Once upon a time' + plain.choices[0].text);
    let streamed = '';
    for await (const chunk of await client.completions.create({ prompt: 'Once upon a time', ...greedy, echo: true, stream: true })) {
      streamed += chunk.choices[0]?.text ?? '';
    }
    assert.equal(streamed, echoed.choices[0].text);
  });

  test('n choices share one prefill; best_of returns the most likely; streamed by index', async () => {
    const prompt = [1, ...Array.from({ length: 99 }, (_, i) => ((i * 53 + 7) % 500) + 3)];
    const sampled = { prompt, max_tokens: 12, temperature: 0.9, seed: 11, ignore_eos: true };
    const hits = () => metric(server.url, 'pagoda_prefix_cache_hit_tokens_total');
    const before = await hits();
    const three = await client.completions.create({ ...sampled, n: 3 });
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(three.usage.prompt_tokens, prompt.length);
    assert.equal(three.usage.completion_tokens, 36, 'the usage adds up the three choices');
    assert.equal(new Set(three.choices.map((c) => c.text)).size, 3, 'each choice samples its own stream');
    assert.ok((await hits()) - before >= 2 * 64, 'choices 1 and 2 read the prompt from the cache');

    const streamed = ['', '', ''];
    for await (const chunk of await client.completions.create({ ...sampled, n: 3, stream: true })) {
      for (const c of chunk.choices) streamed[c.index] += c.text;
    }
    assert.deepEqual(streamed, three.choices.map((c) => c.text));

    const scored = await client.completions.create({ ...sampled, n: 3, logprobs: 0 });
    const sums = scored.choices.map((c) => c.logprobs.token_logprobs.reduce((a, b) => a + b, 0));
    const best = await client.completions.create({ ...sampled, n: 1, best_of: 3 });
    assert.equal(best.choices.length, 1);
    assert.equal(best.usage.completion_tokens, 36, 'best_of counts every completion it ran');
    assert.equal(best.choices[0].text, scored.choices[sums.indexOf(Math.max(...sums))].text);
    assert.equal(best.choices[0].logprobs, null);

    const chat = await client.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], n: 2, max_tokens: 8, seed: 3 });
    assert.equal(chat.choices.length, 2);
    assert.equal(chat.choices[1].index, 1);
  });

  test('errors in OpenAI\'s JSON: unknown model 404, bad parameters 400', async () => {
    await assert.rejects(client.completions.create({ model: 'no-such-model', prompt: 'x' }), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.code, 'model_not_found');
      assert.match(e.message, /no-such-model/);
      return true;
    });
    const bad = [
      [{ prompt: 'x', n: 0 }, /'n' must be between 1 and 128/],
      [{ prompt: 'x', n: 3, best_of: 2 }, /'best_of' must be at least 'n'/],
      [{ prompt: 'x', best_of: 2, stream: true }, /cannot be streamed/],
      [{ prompt: 'x', temperature: 'hot' }, /'temperature' must be a number/],
      [{ prompt: 'x', temperature: 7 }, /'temperature' must be between/],
      [{ prompt: 'x', top_p: 0 }, /'top_p'/],
      [{ prompt: 'x', max_tokens: 0 }, /'max_tokens'/],
      [{ prompt: 'x', max_tokens: 1000000 }, /maximum context length/],
      [{ prompt: 'x', stop: 5 }, /'stop'/],
      [{ prompt: 'x', presence_penalty: 2.5 }, /'presence_penalty' must be between -2.0 and 2.0/],
      [{ prompt: 'x', logit_bias: { abc: 1 } }, /'logit_bias' key 'abc' is not a token id/],
      [{ prompt: 'x', logit_bias: { 999999: 1 } }, /'logit_bias' key '999999'/],
      [{ prompt: 'x', logit_bias: { 5: 101 } }, /'logit_bias' values must be numbers between -100 and 100/],
      [{ prompt: 'x', stop_token_ids: [-1] }, /'stop_token_ids'/],
      [{ prompt: 'x', logprobs: 21 }, /'logprobs' must be at most 20/],
      [{ prompt: 'x', echo: true, logprobs: 1, stream: true }, /cannot be streamed/],
      [{ prompt: '' }, /empty/],
      [{ prompt: [999999] }, /outside the vocabulary/],
    ];
    for (const [body, message] of bad) {
      await assert.rejects(client.completions.create(body), (e) => {
        assert.equal(e.status, 400, JSON.stringify(body));
        assert.match(e.message, message);
        return true;
      });
    }
    await assert.rejects(client.chat.completions.create({ messages: [{ role: 'wizard', content: 'x' }] }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /'wizard'/);
      return true;
    });
    const raw = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: '{not json' });
    assert.equal(raw.status, 400);
    assert.match((await raw.json()).error.message, /not valid JSON/);
    const big = await fetch(`${server.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'x'.repeat(70000) }) });
    assert.equal(big.status, 413);
    assert.equal((await big.json()).error.type, 'invalid_request_error');
    assert.equal((await fetch(`${server.url}/health`)).status, 200, 'still serving');
  });

  test('adapters: load, name in "model", list, unload', async () => {
    const adapter = path.join(scratch, 'adapter.gguf');
    synthesize(['--lora-for', testModel(), '-o', adapter, '--rank', '4', '--alpha', '64']);
    const post = (route, body) => fetch(`${server.url}/v1/${route}`, { method: 'POST', body: JSON.stringify(body) });

    assert.equal((await post('load_lora_adapter', { lora_name: 'story-lora', lora_path: adapter })).status, 200);
    assert.equal((await post('load_lora_adapter', { lora_name: 'story-lora', lora_path: adapter })).status, 400, 'twice');
    const missing = await post('load_lora_adapter', { lora_name: 'other', lora_path: path.join(scratch, 'missing.gguf') });
    assert.equal(missing.status, 400);
    assert.match((await missing.json()).error.message, /missing\.gguf/);
    assert.deepEqual((await client.models.list()).data.map((m) => m.id), [path.basename(testModel()), 'story-lora']);

    const base = await client.completions.create({ prompt: 'Once upon a time', ...greedy, max_tokens: 24 });
    const tuned = await client.completions.create({ model: 'story-lora', prompt: 'Once upon a time', ...greedy, max_tokens: 24 });
    assert.notEqual(tuned.choices[0].text, base.choices[0].text, 'the adapter changes the text');
    assert.equal(tuned.model, 'story-lora');

    assert.equal((await post('unload_lora_adapter', { lora_name: 'story-lora' })).status, 200);
    assert.equal((await post('unload_lora_adapter', { lora_name: 'story-lora' })).status, 404);
    await assert.rejects(client.completions.create({ model: 'story-lora', prompt: 'x' }), (e) => e.status === 404);
  });

  test('a client that disconnects mid-stream cancels its request and its pages come back', async () => {
    const before = await metric(server.url, 'pagoda_requests_total{outcome="cancelled"}');
    const controller = new AbortController();
    const stream = await client.completions.create(
      { prompt: 'Once upon a time', temperature: 0, max_tokens: 400, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let chunks = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.choices[0].finish_reason, null);
      chunks += 1;
      if (chunks === 3) {
        controller.abort();  // closes the connection
        break;
      }
    }
    assert.equal(chunks, 3);
    assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_requests_total{outcome="cancelled"}')) === before + 1),
      'the request was cancelled');
    assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_kv_pages_used')) === 0), 'every page came back');
    assert.equal(await metric(server.url, 'pagoda_num_requests_running'), 0);
    const length = await metric(server.url, 'pagoda_requests_total{outcome="length"}');
    assert.ok(length > 0);
  });

  test('256 streams opened at once are all answered, and the idle server keeps no worker per stream', async () => {
    // 256 connections in one burst (a listen backlog of 5 resets some of them), each held by a
    // worker thread for its stream; workers end with their connections.
    const threads = () => Number(/^Threads:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${server.proc.pid}/status`, 'utf8'))[1]);
    const stream = async () => {
      const res = await fetch(`${server.url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Connection: 'close' },
        body: JSON.stringify({ prompt: 'Once upon a time', temperature: 0, max_tokens: 4, ignore_eos: true, stream: true }),
      });
      return { status: res.status, body: await res.text() };
    };
    const results = await Promise.all(Array.from({ length: 256 }, stream));
    for (const r of results) {
      assert.equal(r.status, 200);
      assert.ok(r.body.endsWith('data: [DONE]\n\n'), JSON.stringify(r.body.slice(-60)));
    }
    assert.ok(await eventually(async () => threads() < 32), `${threads()} threads with no connection open`);
    assert.equal(await metric(server.url, 'pagoda_kv_pages_used'), 0);
  });

  test('the raw SSE framing (curl)', () => {
    const r = spawnSync('curl', ['-sN', `${server.url}/v1/completions`, '-H', 'Content-Type: application/json', '-d',
      JSON.stringify({ prompt: 'Once upon a time', temperature: 0, max_tokens: 6, stream: true })], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.endsWith('data: [DONE]\n\n'), JSON.stringify(r.stdout.slice(-40)));
    const events = r.stdout.split('\n\n').filter((e) => e.length > 0);
    for (const e of events) assert.match(e, /^data: .+$/, 'one data line per event');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
    assert.equal(chunks.at(-1).usage.completion_tokens, 6);
    for (const c of chunks.slice(0, -1)) assert.equal(c.choices[0].finish_reason, null);
  });

  test('the metrics exposition', async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    for (const name of ['pagoda_time_to_first_token_seconds_bucket{le="+Inf"}', 'pagoda_request_latency_seconds_count',
      'pagoda_time_per_output_token_seconds_sum', 'pagoda_generation_tokens_total', 'pagoda_kv_pages_free',
      'pagoda_num_requests_waiting', 'pagoda_lora_adapter_swaps_total', 'pagoda_lora_adapters_resident']) {
      assert.ok(text.includes(`\n${name} `), `${name} in /metrics`);
    }
    assert.ok((await metric(server.url, 'pagoda_generation_tokens_total')) > 0);
  });
});

describe('pagoda-server --cache-type', () => {
  test('every KV cache type serves; a smaller type fits more pages in the same memory', async () => {
    // q8_0 stores blocks of 32 values of a head: a model whose head_dim is 32.
    const model = path.join(scratch, 'head_dim_32.gguf');
    synthesize(['-o', model, '--dim', '128', '--layers', '2', '--heads', '4', '--ffn', '256', '--vocab', '512', '--context', '512']);
    const pages = {};
    for (const type of ['f32', 'f16', 'bf16', 'q8_0']) {
      const server = await startServer(['-m', model, '--cache-type', type]);
      try {
        assert.match(server.log(), new RegExp(`, ${type} KV cache\\)`));
        const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0 });
        const c = await client.completions.create({ prompt: 'Once upon a time', ...greedy });
        assert.equal(c.usage.completion_tokens, greedy.max_tokens, type);
        pages[type] = await metric(server.url, 'pagoda_kv_pages_total');
      } finally {
        assert.equal(await stopServer(server), 0, server.log());
      }
    }
    assert.ok(pages.f32 < pages.f16, JSON.stringify(pages));
    assert.equal(pages.bf16, pages.f16);
    assert.ok(pages.f16 < pages.q8_0, JSON.stringify(pages));
  });

  test('an unknown type, or q8_0 for heads it cannot block, is a clear error', () => {
    const refused = (type) =>
      spawnSync(path.join(BIN, 'pagoda-server'), ['-m', testModel(), '--port', '0', '--cache-type', type], {
        encoding: 'utf8',
        timeout: 60000,
      });
    const unknown = refused('q4_0');
    assert.equal(unknown.status, 1, unknown.stderr);
    assert.match(unknown.stderr, /--cache-type must be f32, f16, bf16 or q8_0, got 'q4_0'/);
    const q8 = refused('q8_0');  // the test models' head_dim is 8 or 16
    assert.equal(q8.status, 1, q8.stderr);
    assert.match(q8.stderr, /q8_0 stores blocks of 32 values, but the model's head_dim is/);
  });
});

describe('pagoda-server --api-key', () => {
  const server = serverForSuite(['--api-key', 'sesame']);

  test('/v1/ needs the bearer token; /health and /metrics stay open', async () => {
    const wrong = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sesamf', maxRetries: 0 });
    await assert.rejects(wrong.completions.create({ prompt: 'x', max_tokens: 1 }), (e) => {
      assert.equal(e.status, 401);
      assert.equal(e.code, 'invalid_api_key');
      return true;
    });
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 401, 'no token');
    const right = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'sesame', maxRetries: 0 });
    const c = await right.completions.create({ prompt: 'Once', max_tokens: 2, temperature: 0 });
    assert.equal(c.usage.completion_tokens, 2);
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 200);
  });

  test('SIGTERM: the server stops cleanly', async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });
});
