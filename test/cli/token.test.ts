// `otelake token` as a user runs it: a token is printed once and only its hash is stored; list shows
// no secret; a background server started with a token says auth is on, takes the token, and refuses
// it from the request after `token revoke`, without a restart; no token ever reaches its log.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { freePort, otelake, tempDir } from './helpers.ts';

const TOKEN = /^otelake_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$/;
/** A token's secret part, whole: base64url has '_' in its alphabet, so splitting at '_' may cut it. */
const secretOf = (token: string) => TOKEN.exec(token)![2]!;

describe('otelake token', () => {
  let dir: { path: string; remove: () => Promise<void> };
  before(async () => {
    dir = await tempDir('token');
  });
  after(() => dir.remove());
  const run = (args: string[]) => otelake(args, { cwd: dir.path });
  const file = () => join(dir.path, 'svc_data', 'default', 'configs', 'tokens.json');

  test('create prints a new token once; tokens.json holds its hash only, readable by its owner', async () => {
    const r = await run(['token', 'create', '--project', 'shop', '--scope', 'ingest,read', '--name', 'ci']);
    assert.equal(r.code, 0, r.stderr);
    const token = r.stdout.trim();
    assert.match(token, TOKEN, 'stdout is the token alone');
    assert.match(r.stderr, /shown only this once/);
    assert.match(r.stderr, /Authorization: Bearer/);
    const text = await readFile(file(), 'utf8');
    assert.ok(!text.includes(secretOf(token)), 'the secret is not stored');
    const [record] = JSON.parse(text).tokens;
    assert.equal(record.hash, `sha256:${createHash('sha256').update(token).digest('hex')}`);
    assert.deepEqual(
      {
        id: record.id,
        name: record.name,
        project: record.project,
        scopes: record.scopes,
        revoked: record.revoked_at,
      },
      { id: TOKEN.exec(token)![1], name: 'ci', project: 'shop', scopes: ['ingest', 'read'], revoked: null },
    );
    assert.equal((await stat(file())).mode & 0o777, 0o600);

    const second = await run(['token', 'create', '--project', 'shop', '--scope', 'read', '--scope', 'read']);
    assert.equal(second.code, 0, second.stderr);
    assert.notEqual(second.stdout.trim(), token, 'every token is new');
    assert.equal(JSON.parse(await readFile(file(), 'utf8')).tokens.length, 2);
  });

  test('list shows ids, names, projects, scopes and state, never a secret; revoke marks one', async () => {
    const [a, b] = JSON.parse(await readFile(file(), 'utf8')).tokens;
    const list = await run(['token', 'list']);
    assert.equal(list.code, 0, list.stderr);
    const cells = (line: string) => line.split('│').map((c) => c.trim());
    const rowOf = (id: string) => cells(list.stdout.split('\n').find((l) => l.includes(id))!);
    assert.deepEqual(rowOf(a.id).slice(1, 5), [a.id, 'ci', 'shop', 'ingest,read']);
    assert.equal(rowOf(a.id)[6], 'active');
    assert.deepEqual(rowOf(b.id).slice(1, 5), [b.id, '', 'shop', 'read']);
    assert.doesNotMatch(list.stdout, /sha256|otelake_/);

    const revoked = await run(['token', 'revoke', b.id]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`revoked token ${b.id}`));
    assert.match((await run(['token', 'list'])).stdout, new RegExp(`${b.id}.*revoked \\d{4}-`));
    assert.match((await run(['token', 'revoke', b.id])).stdout, /already revoked/);
    const unknown = await run(['token', 'revoke', '000000000000']);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^error: no token "000000000000"/);
    const none = await run(['token', 'list', '-I', 'other']);
    assert.match(none.stdout, /no tokens .*authentication is off/);
  });

  test('a background server says auth is on, takes the token, and refuses it once revoked', async () => {
    const created = await run([
      'token',
      'create',
      '-I',
      'served',
      '--project',
      'app',
      '--scope',
      'ingest,read',
    ]);
    const token = created.stdout.trim();
    const id = TOKEN.exec(token)![1]!;
    const port = await freePort();
    const started = await run(['start', '-I', 'served', '--host', '127.0.0.1', '--port', String(port)]);
    try {
      assert.equal(started.code, 0, started.stderr);
      assert.match(started.stdout, /auth: on/);
      const url = `http://127.0.0.1:${port}`;
      const body = JSON.stringify({
        resourceLogs: [
          { scopeLogs: [{ logRecords: [{ timeUnixNano: '1', body: { stringValue: 'hello' } }] }] },
        ],
      });
      const send = (headers: Record<string, string>) =>
        fetch(`${url}/v1/logs`, {
          method: 'POST',
          body,
          headers: { 'content-type': 'application/json', ...headers },
        });
      assert.equal((await send({})).status, 401);
      assert.equal((await send({ authorization: `Bearer ${token}` })).status, 200);
      assert.equal((await send({ authorization: `Bearer ${token}x` })).status, 401);

      assert.equal((await run(['token', 'revoke', '-I', 'served', id])).code, 0);
      assert.equal(
        (await send({ authorization: `Bearer ${token}` })).status,
        401,
        'refused without a restart',
      );
      const health = (await (await fetch(`${url}/healthz`)).json()) as { auth: { enabled: boolean } };
      assert.equal(health.auth.enabled, true, 'revoking the last token does not open the instance');
    } finally {
      const stopped = await run(['stop', '-I', 'served']);
      assert.equal(stopped.code, 0, stopped.stderr);
    }
    const log = await readFile(join(dir.path, 'svc_data', 'served', 'logs', 'server.log'), 'utf8');
    assert.match(log, /authentication on/);
    assert.ok(!log.includes(secretOf(token)), 'no token in the server log');
  });

  test('start without a token says auth is off', async () => {
    const port = await freePort();
    const started = await run(['start', '-I', 'open', '--host', '127.0.0.1', '--port', String(port)]);
    try {
      assert.equal(started.code, 0, started.stderr);
      assert.match(started.stdout, /auth: off \(no token; 'otelake token create' makes one\)\n/);
    } finally {
      await run(['stop', '-I', 'open']);
    }
  });
});
