import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import * as zlib from 'node:zlib';
import {
  BODY_WAIT_MS,
  BodyBudget,
  BodyError,
  codingsFor,
  decompress,
  gunzipBufferSize,
  gzipAnnouncedSize,
  readBody,
} from '../../src/server/body.ts';

const LIMIT = 1024 * 1024;

// A bare node server doing what the ingest route and a decode worker do with a body (codingsFor,
// readBody with a lease of the budget held until the answer, decompress): answers with the bytes
// it got, or the BodyError's status and message.
let server: Server;
let base: string;
let budget = new BodyBudget(64 * LIMIT);
before(async () => {
  server = createServer((req, res) => {
    const lease = budget.lease();
    res.once('close', () => lease.release());
    const body = async () => {
      const codings = codingsFor(req.headers['content-encoding']);
      return decompress(await readBody(req, LIMIT, lease), codings, LIMIT);
    };
    body().then(
      (body) => {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(body);
      },
      (err: Error) => {
        res.writeHead(err instanceof BodyError ? err.statusCode : 500, { 'content-type': 'text/plain' });
        res.end(err.message);
      },
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

async function post(body: Uint8Array | AsyncIterable<Uint8Array>, headers: Record<string, string> = {}) {
  const res = await fetch(base, {
    method: 'POST',
    body: body as unknown as ReadableStream,
    headers,
    ...(body instanceof Uint8Array ? {} : { duplex: 'half' }),
  } as RequestInit);
  return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()) };
}

async function* chunked(data: Buffer, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.length; i += size) yield data.subarray(i, i + size);
}

describe('readBody and decompress', () => {
  const payload = randomBytes(200_000);

  test('identity with Content-Length and chunked return the exact bytes', async () => {
    const a = await post(payload);
    assert.equal(a.status, 200);
    assert.ok(a.bytes.equals(payload));
    const b = await post(chunked(payload, 7000));
    assert.equal(b.status, 200);
    assert.ok(b.bytes.equals(payload));
  });

  for (const [coding, compress] of [
    ['gzip', zlib.gzipSync],
    ['x-gzip', zlib.gzipSync],
    ['deflate', zlib.deflateSync],
    ['br', zlib.brotliCompressSync],
    ['zstd', (zlib as unknown as { zstdCompressSync: (b: Buffer) => Buffer }).zstdCompressSync],
  ] as const) {
    test(`Content-Encoding ${coding} is decompressed`, async () => {
      const res = await post(compress(payload), { 'content-encoding': coding });
      assert.equal(res.status, 200);
      assert.ok(res.bytes.equals(payload));
    });
  }

  test('a coding list is undone in reverse order; identity is a no-op', async () => {
    const twice = zlib.deflateSync(zlib.gzipSync(payload));
    const res = await post(twice, { 'content-encoding': 'gzip, identity, deflate' });
    assert.equal(res.status, 200);
    assert.ok(res.bytes.equals(payload));
    assert.equal(codingsFor('identity').length, 0);
  });

  test('at most two codings besides identity are undone; three are refused with 415', async () => {
    const twice = zlib.gzipSync(zlib.gzipSync(payload));
    const ok = await post(twice, { 'content-encoding': 'gzip, identity, gzip, identity' });
    assert.equal(ok.status, 200);
    assert.ok(ok.bytes.equals(payload));
    const thrice = zlib.gzipSync(twice);
    const res = await post(thrice, { 'content-encoding': 'gzip, gzip, gzip' });
    assert.equal(res.status, 415);
    assert.match(res.bytes.toString(), /stacks 3 codings: at most 2 are undone/);
  });

  test('gunzip sizes its buffer from the gzip trailer, bounded by the body and the limit', async () => {
    const gz = zlib.gzipSync(payload);
    assert.equal(gunzipBufferSize(gz, LIMIT), payload.length + 1);
    // A trailer announcing 4 GiB: no more than deflate can make of 30 bytes, or the limit.
    const liar = Buffer.alloc(30);
    liar.writeUInt32LE(0xffffffff, 26);
    assert.equal(gunzipBufferSize(liar, LIMIT), 30 * 1032);
    assert.equal(gunzipBufferSize(Buffer.concat([Buffer.alloc(5000), liar]), LIMIT), LIMIT + 1);
    assert.equal(gunzipBufferSize(Buffer.alloc(10), LIMIT), undefined);
    assert.equal(gzipAnnouncedSize(gz), payload.length);
    assert.equal(gzipAnnouncedSize(liar), 0xffffffff);
    assert.equal(gzipAnnouncedSize(Buffer.alloc(17)), undefined);
    // Two members: the trailer announces only the last one; all of it comes out.
    const small = randomBytes(100);
    const res = await post(Buffer.concat([gz, zlib.gzipSync(small)]), { 'content-encoding': 'gzip' });
    assert.equal(res.status, 200);
    assert.ok(res.bytes.equals(Buffer.concat([payload, small])));
    // A trailer that lies about the size fails zlib's own length check.
    const wrong = Buffer.from(gz);
    wrong.writeUInt32LE(payload.length - 1, wrong.length - 4);
    const bad = await post(wrong, { 'content-encoding': 'gzip' });
    assert.equal(bad.status, 400);
    assert.match(bad.bytes.toString(), /cannot decompress/);
  });

  test('unknown content coding is 415 naming it', async () => {
    const res = await post(payload, { 'content-encoding': 'compress' });
    assert.equal(res.status, 415);
    assert.match(res.bytes.toString(), /unsupported Content-Encoding "compress"/);
  });

  test('corrupt compressed data is 400', async () => {
    const gz = zlib.gzipSync(payload);
    gz[20] = gz[20]! ^ 0xff;
    gz[21] = gz[21]! ^ 0xff;
    const res = await post(gz, { 'content-encoding': 'gzip' });
    assert.equal(res.status, 400);
    assert.match(res.bytes.toString(), /cannot decompress/);
  });

  test('over the limit: declared length, chunked, and compressed-on-the-wire are 413', async () => {
    const big = randomBytes(LIMIT + 1);
    const a = await post(big);
    assert.equal(a.status, 413);
    assert.match(a.bytes.toString(), /Content-Length/);
    const b = await post(chunked(big, 64 * 1024));
    assert.equal(b.status, 413);
    // Random bytes do not compress: the wire bytes alone pass the limit.
    const c = await post(chunked(zlib.gzipSync(big, { level: 1 }), 64 * 1024), {
      'content-encoding': 'gzip',
    });
    assert.equal(c.status, 413);
  });

  test('a body exactly at the limit is accepted', async () => {
    const exact = Buffer.alloc(LIMIT, 'otlp ');
    const res = await post(zlib.gzipSync(exact, { level: 1 }), { 'content-encoding': 'gzip' });
    assert.equal(res.status, 200);
    assert.equal(res.bytes.length, LIMIT);
  });

  test('a gzip bomb stops inflating at the limit (256 MiB of zeros, 1 MiB limit)', async () => {
    const zeros = Buffer.alloc(16 * 1024 * 1024);
    const gz = zlib.createGzip({ level: 9 });
    const parts: Buffer[] = [];
    gz.on('data', (c: Buffer) => parts.push(c));
    const done = new Promise((r) => gz.on('end', r));
    for (let i = 0; i < 16; i++) gz.write(zeros);
    gz.end();
    await done;
    const bomb = Buffer.concat(parts);
    assert.ok(bomb.length < 512 * 1024);
    const peakBefore = process.resourceUsage().maxRSS;
    const res = await post(bomb, { 'content-encoding': 'gzip' });
    assert.equal(res.status, 413);
    assert.match(res.bytes.toString(), /after decompression/);
    // Inflating all 256 MiB would raise the process's peak RSS by as much; stopping after 1 MiB does not.
    const grownKiB = process.resourceUsage().maxRSS - peakBefore;
    assert.ok(grownKiB < 128 * 1024, `peak RSS grew by ${grownKiB} KiB`);
  });

  test('the connection stays usable after a refused body', async () => {
    const agentReq = (body: Buffer) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          base,
          { method: 'POST', headers: { 'content-length': body.length } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    assert.equal(await agentReq(randomBytes(LIMIT + 10)), 413);
    assert.equal(await agentReq(randomBytes(10)), 200);
  });
});

describe('BodyBudget', () => {
  test('a lease takes bytes while they fit; a body alone always fits; release gives them back once', () => {
    const b = new BodyBudget(100);
    const alone = b.lease();
    assert.equal(alone.grow(500), true, 'a body alone fits even beyond the budget');
    const other = b.lease();
    assert.equal(other.grow(1), false, 'nothing fits beside it');
    alone.release();
    alone.release();
    assert.equal(b.bytes, 0);
    assert.equal(other.grow(60), true);
    const third = b.lease();
    assert.equal(third.grow(40), true);
    assert.equal(third.grow(1), false);
    assert.equal(b.bytes, 100);
    // What a request turned into counts, fitting or not; released, nothing stays.
    third.hold(300);
    assert.equal(b.bytes, 360);
    assert.equal(b.lease().grow(1), false);
    third.release();
    other.release();
    assert.equal(b.bytes, 0);
    assert.equal(third.grow(1), false, 'a released lease takes nothing more');
  });

  test('over the budget a body waits for room, then is refused with 503, announced or chunked', async () => {
    budget = new BodyBudget(300_000);
    try {
      const held = budget.lease();
      assert.ok(held.grow(250_000)); // another request in flight, which gives nothing back
      const body = randomBytes(100_000);
      const started = Date.now();
      const a = await post(body);
      assert.equal(a.status, 503);
      assert.ok(Date.now() - started >= BODY_WAIT_MS - 50, 'it waited for room first');
      assert.match(a.bytes.toString(), /max_body_bytes_in_flight = 300000 bytes/);
      const b = await post(chunked(body, 10_000));
      assert.equal(b.status, 503);
      assert.equal(budget.refused, 2);
      held.release();
      await new Promise((r) => setImmediate(r));
      assert.equal(budget.bytes, 0, 'refused requests hold nothing');
      const c = await post(chunked(body, 10_000));
      assert.equal(c.status, 200);
      assert.ok(c.bytes.equals(body));
    } finally {
      budget = new BodyBudget(64 * LIMIT);
    }
  });

  test('a body waiting for room goes on once room is given back; meanwhile new bodies are refused unread', async () => {
    budget = new BodyBudget(300_000);
    try {
      const held = budget.lease();
      assert.ok(held.grow(250_000));
      const body = randomBytes(100_000);
      const waiting = post(chunked(body, 10_000));
      while (budget.waiters === 0) await new Promise((r) => setTimeout(r, 5));
      const started = Date.now();
      const refused = await post(randomBytes(1000));
      assert.equal(refused.status, 503, 'refused while another body waits');
      assert.ok(Date.now() - started < BODY_WAIT_MS, 'at once, not after a wait');
      held.release();
      const a = await waiting;
      assert.equal(a.status, 200);
      assert.ok(a.bytes.equals(body), 'every byte, in order');
    } finally {
      budget = new BodyBudget(64 * LIMIT);
    }
  });

  test('when every body holding bytes waits, the newest is refused and the oldest goes on', async () => {
    const b = new BodyBudget(100);
    const older = b.lease();
    const newer = b.lease();
    assert.ok(older.grow(60) && newer.grow(40));
    const seen: string[] = [];
    b.wait(
      older,
      10,
      Date.now() + 60_000,
      () => seen.push('older admitted'),
      () => seen.push('older refused'),
    );
    await Promise.resolve();
    assert.equal(seen.length, 0, 'the newer body may still give bytes back');
    b.wait(
      newer,
      10,
      Date.now() + 60_000,
      () => seen.push('newer admitted'),
      () => seen.push('newer refused'),
    );
    assert.equal(seen.length, 0, 'told after wait returns');
    await Promise.resolve();
    assert.deepEqual(seen, ['newer refused'], 'both wait: neither could ever go on');
    assert.equal(b.refused, 1);
    newer.release(); // its answer sent
    assert.deepEqual(seen, ['newer refused', 'older admitted']);
    assert.equal(b.bytes, 70);
    assert.equal(b.waiters, 0);
    older.release();
  });
});

describe('readBody: bodies waiting for room', () => {
  /** A chunked upload written piece by piece: `write` resolves once the piece is sent. */
  function upload() {
    const req = httpRequest(base, { method: 'POST', headers: { 'transfer-encoding': 'chunked' } });
    const answer = new Promise<{ status: number; bytes: Buffer }>((resolve, reject) => {
      req.on('response', (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, bytes: Buffer.concat(parts) }));
      });
      req.on('error', reject);
    });
    return {
      write: (piece: Buffer) => new Promise<void>((r) => req.write(piece, () => r())),
      end: () => req.end(),
      answer,
    };
  }

  async function until(what: string, holds: () => boolean): Promise<void> {
    const deadline = Date.now() + 5000;
    while (!holds()) {
      if (Date.now() > deadline) assert.fail(`waited 5 s for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  test('an older body whose wait ends a standstill goes on once the newer is refused, and is answered', async () => {
    // Both hold bytes; the newer waits first, then the older: neither can go on, so the newer is
    // refused, and the room it gives back at once goes to the older. That older body once waited
    // for ever (admitted before its reader knew it waited), its request never answered.
    budget = new BodyBudget(100_000);
    try {
      const older = upload();
      const first = randomBytes(60_000);
      await older.write(first);
      await until('the older body to hold its bytes', () => budget.bytes === 60_000);
      const newer = upload();
      await newer.write(randomBytes(40_000));
      await until('the newer body to hold its bytes', () => budget.bytes === 100_000);
      await newer.write(randomBytes(10_000));
      await until('the newer body to wait', () => budget.waiters === 1);
      const second = randomBytes(10_000);
      await older.write(second);
      const refused = await newer.answer;
      assert.equal(refused.status, 503, 'the newer body is refused');
      older.end();
      const answered = await Promise.race([
        older.answer,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('the older body was never answered')), 5000).unref(),
        ),
      ]);
      assert.equal(answered.status, 200, answered.bytes.toString().slice(0, 200));
      assert.ok(answered.bytes.equals(Buffer.concat([first, second])), 'every byte of the older body');
      await until('every byte to be given back', () => budget.bytes === 0);
    } finally {
      budget = new BodyBudget(64 * LIMIT);
    }
  });
});

describe('readBody: a body read in pieces owns its buffer', () => {
  // A decode worker takes a body by transfer only when the body owns its whole ArrayBuffer; a
  // slice of Buffer's pool (a small allocUnsafe or Buffer.concat) would be copied a second time.
  let owned: Server;
  let url: string;
  before(async () => {
    owned = createServer((req, res) => {
      readBody(req, LIMIT, new BodyBudget(LIMIT).lease()).then(
        (body) => {
          const own = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength;
          res.writeHead(200, { 'x-owns-buffer': String(own) });
          res.end(body);
        },
        // A refused body answers at once, so the test fails on its assertions instead of timing out.
        (err: Error) => {
          res.writeHead(500);
          res.end(err.message);
        },
      );
    });
    await new Promise<void>((r) => owned.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(owned.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => owned.close(() => r())));

  /** Sends `body` in three writes a few milliseconds apart, so that the server reads three chunks. */
  function sendInPieces(body: Buffer, withLength: boolean): Promise<{ owns: string; bytes: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, {
        method: 'POST',
        headers: withLength ? { 'content-length': String(body.length) } : { 'transfer-encoding': 'chunked' },
      });
      req.on('error', reject);
      req.on('response', (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () =>
          resolve({ owns: String(res.headers['x-owns-buffer']), bytes: Buffer.concat(parts) }),
        );
      });
      const third = Math.ceil(body.length / 3);
      const write = (i: number): void => {
        if (i === 3) {
          req.end();
          return;
        }
        req.write(body.subarray(i * third, (i + 1) * third));
        setTimeout(() => write(i + 1), 15);
      };
      write(0);
    });
  }

  for (const withLength of [true, false]) {
    test(`${withLength ? 'with Content-Length' : 'chunked'}: 3,000 bytes in three pieces`, async () => {
      const body = randomBytes(3_000); // under half of Buffer.poolSize on Node 22 and 24
      const res = await sendInPieces(body, withLength);
      assert.ok(res.bytes.equals(body));
      assert.equal(res.owns, 'true');
    });
  }
});
