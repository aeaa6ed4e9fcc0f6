// The S3 client against the loopback server that checks signatures: single and multipart uploads
// arrive whole, listings and folders, missing objects, and a wrong secret refused by the server.

import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MULTIPART_FROM, ObjectStore, ObjectStoreError } from '../../src/storage/object-store.ts';
import { resolveS3 } from '../../src/storage/s3-config.ts';
import { type S3Server, startS3Server } from './s3-server.ts';

let server: S3Server;
let dir: string;
before(async () => {
  server = await startS3Server();
  dir = await mkdtemp(join(tmpdir(), 'otelake-store-'));
});
after(async () => {
  await server?.stop({ removeData: true });
  await rm(dir, { recursive: true, force: true });
});

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe('ObjectStore', () => {
  test('uploads a small file in one request and a large one in parts, both whole', async () => {
    const store = new ObjectStore(resolveS3(undefined, server.env).settings!);
    try {
      const small = randomBytes(1000);
      const large = randomBytes(MULTIPART_FROM + 3 * 1024 * 1024 + 7);
      await writeFile(join(dir, 'small'), small);
      await writeFile(join(dir, 'large'), large);
      let sent = 0;
      await store.upload('t/a/small.bin', join(dir, 'small'), small.length, (n) => (sent += n));
      await store.upload('t/a/b/large.bin', join(dir, 'large'), large.length, (n) => (sent += n));
      assert.equal(sent, small.length + large.length);
      assert.deepEqual(
        await store.list('t/'),
        new Map([
          ['a/b/large.bin', large.length],
          ['a/small.bin', small.length],
        ]),
      );
      assert.deepEqual(await store.folders('t/a/'), ['b']);
      assert.equal(sha((await store.get('t/a/b/large.bin'))!), sha(large));
      assert.equal(sha((await store.get('t/a/small.bin'))!), sha(small));
      assert.equal(await store.get('t/none'), null);
    } finally {
      store.destroy();
    }
  });

  test('a server that accepts connections and never answers fails the request, not hangs it', {
    timeout: 30_000,
  }, async () => {
    const silent = createServer(() => {}); // takes the connection, reads the request, says nothing
    await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
    const port = (silent.address() as AddressInfo).port;
    const env = { ...server.env, CLOUD_ENDPOINT_URL: `http://127.0.0.1:${port}` };
    const store = new ObjectStore(resolveS3(undefined, env).settings!, { idleTimeoutMs: 300 });
    const started = Date.now();
    try {
      await assert.rejects(store.list('t/'), (err: Error) => {
        assert.ok(err instanceof ObjectStoreError, String(err));
        assert.match(
          err.message,
          /cannot reach the object storage at http:\/\/127\.0\.0\.1:\d+ \(TimeoutError\)/,
        );
        return true;
      });
      assert.ok(Date.now() - started < 20_000, `failed after ${Date.now() - started} ms`);
    } finally {
      store.destroy();
      silent.closeAllConnections();
      silent.close();
    }
  });

  test('a wrong secret is refused by the server, and said so without the secret', async () => {
    const secret = 'definitely-not-the-right-secret';
    const store = new ObjectStore(resolveS3({ secretAccessKey: secret }, server.env).settings!);
    const before = (await server.stats()).refused;
    try {
      await assert.rejects(store.list('t/'), (err: Error) => {
        assert.ok(err instanceof ObjectStoreError);
        assert.equal(err.code, 'SignatureDoesNotMatch');
        assert.equal(err.status, 403);
        assert.match(err.message, /refused the credentials/);
        assert.doesNotMatch(err.message, new RegExp(secret));
        return true;
      });
      assert.ok((await server.stats()).refused > before);
    } finally {
      store.destroy();
    }
  });
});
