// The log line of a refused request (status, reason, project, client), and its rate limit.

import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, test } from 'node:test';
import { LineBudget } from '../../src/server/refusals.ts';
import { createToken } from '../../src/storage/tokens.ts';
import { type Json, post, startServer } from './helpers/harness.ts';

/** A pino destination keeping the log lines as parsed JSON. */
function capture(): { lines: Json[]; stream: Writable } {
  const lines: Json[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, stream };
}

describe('refused requests in the log', () => {
  test('one line per refused request: status, reason, project, client, method and path', async () => {
    const log = capture();
    const s = await startServer({}, { log: { level: 'info', stream: log.stream } });
    try {
      const text = { 'content-type': 'text/plain', 'x-project-id': 'shop' };
      assert.equal((await post(`${s.url}/v1/logs`, Buffer.from('x'), text)).status, 415);
      const json = { 'content-type': 'application/json' };
      assert.equal((await post(`${s.url}/v1/traces`, Buffer.from('{nope'), json)).status, 400);
      const big = Buffer.alloc(s.logger.options.server_config.body_limit_bytes + 1);
      assert.equal((await post(`${s.url}/v1/metrics`, big, json)).status, 413);
      assert.equal((await post(`${s.url}/v1/logs`, Buffer.from('{}'), json)).status, 200);
      assert.equal((await fetch(`${s.url}/api/logs?max_rows=0`)).status, 400);
    } finally {
      await s.close();
    }
    const refusals = log.lines.filter((l) => l.refusal);
    assert.deepEqual(
      refusals.map((l) => [
        l.refusal.status,
        l.refusal.method,
        l.refusal.path,
        l.refusal.project,
        l.refusal.x_project_id,
      ]),
      [
        [415, 'POST', '/v1/logs', null, 'shop'],
        [400, 'POST', '/v1/traces', null, null],
        [413, 'POST', '/v1/metrics', null, null],
        [400, 'GET', '/api/logs?max_rows=0', null, null],
      ],
    );
    for (const l of refusals) {
      assert.equal(l.level, 40); // warn
      assert.equal(l.refusal.client, '127.0.0.1');
      assert.ok(l.msg.startsWith(`refused ${l.refusal.method} ${l.refusal.path} (127.0.0.1`), l.msg);
      assert.ok(l.msg.endsWith(`: ${l.refusal.status} ${l.refusal.reason}`), l.msg);
    }
    assert.match(refusals[0].refusal.reason, /unsupported content type "text\/plain"/);
    assert.match(refusals[0].msg, /\(127\.0\.0\.1, X-Project-Id shop\): 415/);
    assert.match(refusals[1].refusal.reason, /invalid JSON/);
    assert.match(refusals[2].refusal.reason, /exceeds the limit/);
    assert.match(refusals[3].refusal.reason, /max_rows/);
  });

  test("with auth on: an accepted token's project, else the X-Project-Id sent, named as a claim", async () => {
    const log = capture();
    const s = await startServer({}, { log: { level: 'info', stream: log.stream } });
    try {
      const { token } = await createToken(s.logger.layout.tokensFile, {
        project: 'shop',
        scopes: ['ingest'],
      });
      const json = { 'content-type': 'application/json' };
      const bad = { ...json, authorization: 'Bearer nope', 'x-project-id': 'shop' };
      assert.equal((await post(`${s.url}/v1/logs`, Buffer.from('{}'), bad)).status, 401);
      const other = { ...json, authorization: `Bearer ${token}`, 'x-project-id': 'bank' };
      assert.equal((await post(`${s.url}/v1/logs`, Buffer.from('{}'), other)).status, 403);
      const mine = { ...json, authorization: `Bearer ${token}` };
      assert.equal((await post(`${s.url}/v1/logs`, Buffer.from('{nope'), mine)).status, 400);
    } finally {
      await s.close();
    }
    const refusals = log.lines.filter((l) => l.refusal);
    assert.deepEqual(
      refusals.map((l) => [l.refusal.status, l.refusal.project, l.refusal.x_project_id]),
      [
        [401, null, 'shop'],
        [403, null, 'bank'],
        [400, 'shop', null],
      ],
    );
    assert.match(refusals[0].msg, /\(127\.0\.0\.1, X-Project-Id shop\): 401/);
    assert.match(refusals[2].msg, /\(127\.0\.0\.1, project shop\): 400/);
  });

  test('a flood is rate-limited: the first lines, then a summary of what was left out', async () => {
    const log = capture();
    const s = await startServer({}, { log: { level: 'info', stream: log.stream } });
    try {
      for (let i = 0; i < 40; i++) {
        const res = await post(`${s.url}/v1/logs`, Buffer.from('x'), { 'content-type': 'text/plain' });
        assert.equal(res.status, 415);
      }
    } finally {
      await s.close(); // the summary is written when the server closes, at the latest
    }
    assert.equal(log.lines.filter((l) => l.refusal).length, 10);
    const summary = log.lines.filter((l) => l.refusals_left_out !== undefined);
    assert.equal(summary.length, 1);
    assert.equal(summary[0].refusals_left_out, 30);
    assert.match(summary[0].msg, /^30 more refused requests were not logged one by one \(415 x 30\)/);
  });

  test('the budget: a burst, then refilled over a minute; left-out refusals counted by status', () => {
    let now = 0;
    const budget = new LineBudget(10, () => now);
    for (let i = 0; i < 10; i++) assert.equal(budget.take(503), true);
    assert.equal(budget.take(503), false);
    assert.equal(budget.take(400), false);
    assert.equal(budget.take(503), false);
    now += 5_999;
    assert.equal(budget.take(503), false);
    now += 1; // 6 s: one line
    assert.equal(budget.take(503), true);
    assert.equal(budget.take(503), false);
    assert.deepEqual(budget.drain(), { total: 5, byStatus: '503 x 4, 400 x 1' });
    assert.equal(budget.drain(), null);
    now += 3_600_000; // an idle hour refills no more than the burst
    for (let i = 0; i < 10; i++) assert.equal(budget.take(503), true);
    assert.equal(budget.take(503), false);
  });
});
