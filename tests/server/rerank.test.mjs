// pagoda-server's rerank endpoints (/v1/rerank, /rerank, /v1/reranking, /reranking) with plain
// fetch: on a random-weight bert reranker from pagoda-synth, results best first with the scores
// pagoda-embedding computes for the same pairs (Engine::rerank), the same on every path, top_n,
// return_documents, TEI's shape, a hang-up cancelling the work; /v1/embeddings refusing the
// reranker and generation refusing embedding models, each with a 400 naming why; and every bad
// body a 400, on any model.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

import { BIN, eventually, metric, scratch, startServer, stopServer, synthesize } from './server_process.mjs';

const bert = (name, pooling) => {
  const file = path.join(scratch, `${name}.gguf`);
  synthesize(['-o', file, '--arch', 'bert', '--pooling', pooling, '--dim', '64', '--heads', '4', '--ffn', '128',
    '--layers', '2', '--vocab', '600', '--context', '128', '--seed', '9']);
  return file;
};
const RANK_MODEL = bert('bert-rank', 'rank');
const MEAN_MODEL = bert('bert-mean', 'mean');

// pagoda-embedding's rerank scores of QUERY<TAB>DOCUMENT pairs (Engine::rerank_tokens fed through
// Engine::embed, as Engine::rerank does), or its failure.
function cliScores(model, query, documents) {
  const r = spawnSync(path.join(BIN, 'pagoda-embedding'),
    ['-m', model, '-t', '1', '--embd-output-format', 'json', '-p', documents.map((d) => `${query}\t${d}`).join('\n')],
    { encoding: 'utf8' });
  if (r.status !== 0) return { error: r.stderr };
  return { scores: JSON.parse(r.stdout).data.map((d) => d.embedding[0]) };
}

const post = (url, route, body) =>
  fetch(`${url}${route}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });

const QUERY = 'where did the cat sit';
const DOCUMENTS = ['the cat sat on the mat', 'a dog ran in the park', 'zebra', 'cats sit on mats', 'the weather is fine'];

describe('pagoda-server rerank on a bert reranker', () => {
  let server;
  before(async () => {
    server = await startServer([], { model: RANK_MODEL });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('results come best first with the scores Engine::rerank gives the same pairs', async () => {
    const res = await post(server.url, '/v1/rerank', { query: QUERY, documents: DOCUMENTS });
    assert.equal(res.status, 200);
    const r = await res.json();
    assert.match(r.id, /^rerank-/);
    assert.equal(r.object, 'list');
    assert.equal(typeof r.model, 'string');
    assert.ok(r.usage.prompt_tokens > DOCUMENTS.length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
    assert.deepEqual([...r.results.map((x) => x.index)].sort(), DOCUMENTS.map((_, i) => i));
    for (let k = 1; k < r.results.length; ++k) assert.ok(r.results[k - 1].relevance_score >= r.results[k].relevance_score);
    for (const x of r.results) assert.equal(x.document, undefined);

    const cli = cliScores(RANK_MODEL, QUERY, DOCUMENTS);
    assert.ok(cli.scores, cli.error);
    for (const x of r.results) assert.ok(Math.abs(x.relevance_score - cli.scores[x.index]) < 1e-6, `document ${x.index}`);
  });

  test('every path answers the same scores', async () => {
    const body = { query: QUERY, documents: DOCUMENTS };
    const first = await post(server.url, '/v1/rerank', body).then((r) => r.json());
    for (const route of ['/rerank', '/v1/reranking', '/reranking']) {
      const r = await post(server.url, route, body).then((res) => res.json());
      assert.deepEqual(r.results, first.results, route);
      assert.deepEqual(r.usage, first.usage, route);
    }
  });

  test('top_n keeps the best n and return_documents carries their text, strings or {text} alike', async () => {
    const all = await post(server.url, '/v1/rerank', { query: QUERY, documents: DOCUMENTS }).then((r) => r.json());
    const top = await post(server.url, '/v1/rerank', {
      query: QUERY, documents: DOCUMENTS.map((text) => ({ text })), top_n: 2, return_documents: true,
    }).then((r) => r.json());
    assert.equal(top.results.length, 2);
    for (let k = 0; k < 2; ++k) {
      assert.equal(top.results[k].index, all.results[k].index);
      assert.equal(top.results[k].relevance_score, all.results[k].relevance_score);
      assert.deepEqual(top.results[k].document, { text: DOCUMENTS[top.results[k].index] });
    }
    const many = await post(server.url, '/rerank', { query: QUERY, documents: DOCUMENTS, top_n: 50 }).then((r) => r.json());
    assert.equal(many.results.length, DOCUMENTS.length);
  });

  test("TEI's shape answers a bare array, scores through a sigmoid unless raw_scores", async () => {
    const jina = await post(server.url, '/v1/rerank', { query: QUERY, documents: DOCUMENTS }).then((r) => r.json());
    const raw = Object.fromEntries(jina.results.map((x) => [x.index, x.relevance_score]));
    const tei = await post(server.url, '/rerank', { query: QUERY, texts: DOCUMENTS, return_text: true }).then((r) => r.json());
    assert.ok(Array.isArray(tei));
    assert.deepEqual(tei.map((x) => x.index), jina.results.map((x) => x.index));
    for (const x of tei) {
      assert.ok(Math.abs(x.score - 1 / (1 + Math.exp(-raw[x.index]))) < 1e-6);
      assert.equal(x.text, DOCUMENTS[x.index]);
    }
    const rawTei = await post(server.url, '/rerank', { query: QUERY, texts: DOCUMENTS, raw_scores: true }).then((r) => r.json());
    for (const x of rawTei) {
      assert.equal(x.score, raw[x.index]);
      assert.equal(x.text, undefined);
    }
  });

  test('a pair longer than the context is a 400 naming the document, unless truncate', async () => {
    const res = await post(server.url, '/v1/rerank', { query: QUERY, documents: ['short', 'word '.repeat(400)] });
    assert.equal(res.status, 400);
    const message = (await res.json()).error.message;
    assert.match(message, /'documents' item 1/);
    assert.match(message, /context length/);
    // TEI's truncate cuts it to fit instead.
    const cut = await post(server.url, '/rerank', { query: QUERY, texts: ['short', 'word '.repeat(400)], truncate: true });
    assert.equal(cut.status, 200);
    assert.equal((await cut.json()).length, 2);
  });

  test('/v1/embeddings refuses the reranker, and generation is refused, each naming why', async () => {
    const emb = await post(server.url, '/v1/embeddings', { input: 'hello' });
    assert.equal(emb.status, 400);
    assert.match((await emb.json()).error.message, /reranker.*\/v1\/rerank/);
    for (const [route, body] of [['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/completions', { prompt: 'hi' }]]) {
      const res = await post(server.url, route, body);
      assert.equal(res.status, 400, route);
      assert.match((await res.json()).error.message, /reranker.*does not generate text/, route);
    }
  });

  test('a client that hangs up cancels the scoring', async () => {
    const documents = Array(2000).fill('the cat sat on the mat and then it sat there for a very long time');
    const controller = new AbortController();
    const aborted = fetch(`${server.url}/v1/rerank`, {
      method: 'POST', body: JSON.stringify({ query: QUERY, documents }), signal: controller.signal,
    }).catch((e) => e);
    await new Promise((r) => setTimeout(r, 150));
    controller.abort();
    assert.equal((await aborted).name, 'AbortError');
    assert.ok(await eventually(() => /"POST \/v1\/rerank" 499 /.test(server.log()), 10000), server.log());
    // Cancelled pairs leave the queue without being scored.
    assert.ok(await eventually(async () => (await metric(server.url, 'pagoda_num_requests_running')) === 0 &&
      (await metric(server.url, 'pagoda_num_requests_waiting')) === 0, 10000), 'nothing is left running or waiting');
  });
});

describe('pagoda-server on a bert embedding model', () => {
  let server;
  before(async () => {
    server = await startServer([], { model: MEAN_MODEL });
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('embeddings are served, reranking and generation are 400s naming why', async () => {
    const emb = await post(server.url, '/v1/embeddings', { input: ['hello', 'world'] }).then((r) => r.json());
    assert.equal(emb.data.length, 2);
    assert.equal(emb.data[0].embedding.length, 64);
    const rerank = await post(server.url, '/v1/rerank', { query: 'q', documents: ['d'] });
    assert.equal(rerank.status, 400);
    assert.match((await rerank.json()).error.message, /not a reranker/);
    for (const [route, body] of [['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/completions', { prompt: 'hi' }]]) {
      const res = await post(server.url, route, body);
      assert.equal(res.status, 400, route);
      assert.match((await res.json()).error.message, /embedding model.*\/v1\/embeddings.*does not generate text/, route);
    }
  });
});

describe('pagoda-server rerank on a decoder model', () => {
  let server;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    assert.equal(await stopServer(server), 0, server.log());
  });

  test('a model that is not a reranker is a 400 saying so', async () => {
    for (const route of ['/v1/rerank', '/rerank', '/v1/reranking', '/reranking']) {
      const res = await post(server.url, route, { query: 'q', documents: ['a', 'b'] });
      assert.equal(res.status, 400, route);
      const json = await res.json();
      assert.equal(json.error.type, 'invalid_request_error');
      assert.match(json.error.message, /not a reranker/);
    }
  });

  test('every bad body is a 400 naming its fault', async () => {
    const cases = [
      [{ documents: ['a'] }, /'query' is required/],
      [{ query: 7, documents: ['a'] }, /'query' must be a string/],
      [{ query: '', documents: ['a'] }, /'query' must not be empty/],
      [{ query: 'q' }, /'documents' is required/],
      [{ query: 'q', documents: 'a' }, /'documents' must be a list/],
      [{ query: 'q', documents: [] }, /must not be an empty list/],
      [{ query: 'q', documents: ['a', 3] }, /'documents' item 1 must be a string or an object with a string 'text'/],
      [{ query: 'q', documents: [{ image: 'x' }] }, /'documents' item 0/],
      [{ query: 'q', texts: [{ text: 'a' }] }, /'texts' item 0 must be a string/],
      [{ query: 'q', documents: ['a'], texts: ['a'] }, /not both/],
      [{ query: 'q', documents: Array(3000).fill('a') }, /at most 2048/],
      [{ query: 'q', documents: ['a'], top_n: 0 }, /'top_n' must be a positive integer/],
      [{ query: 'q', documents: ['a'], top_n: 2.5 }, /'top_n' must be a positive integer/],
      [{ query: 'q', documents: ['a'], top_n: '3' }, /'top_n' must be a positive integer/],
      [{ query: 'q', documents: ['a'], return_documents: 'yes' }, /'return_documents' must be true or false/],
      [{ model: 'nope', query: 'q', documents: ['a'] }, /nope/],
    ];
    for (const [body, message] of cases) {
      const res = await post(server.url, '/v1/rerank', body);
      assert.equal(res.status, body.model ? 404 : 400, JSON.stringify(body).slice(0, 80));
      assert.match((await res.json()).error.message, message, JSON.stringify(body).slice(0, 80));
    }
    const notJson = await fetch(`${server.url}/v1/rerank`, { method: 'POST', body: '{"query": ' });
    assert.equal(notJson.status, 400);
    const deep = await fetch(`${server.url}/v1/rerank`, { method: 'POST', body: `{"query": "q", "documents": ${'['.repeat(500)}${']'.repeat(500)}}` });
    assert.equal(deep.status, 400);
    assert.match((await deep.json()).error.message, /deep|depth|nest/i);
  });
});
