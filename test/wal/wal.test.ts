import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { constants } from 'node:fs';
import { mkdtemp, open, readdir, readFile, readlink, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { crc32 } from 'node:zlib';
import { BatchBuilder, packBatch, unpackBatch } from '../../src/delta/batch.ts';
import { SCHEMAS, type TableName } from '../../src/schema/tables.ts';
import { type LoggedEntry, type WalEntry, WriteAheadLog } from '../../src/wal/wal.ts';
import { WINDOW_MS } from '../../src/wal/write-path.ts';

const names = SCHEMAS.logs.columns.map((c) => c.name);

/** `n` log rows whose time_unix_nano are `from`, `from + 1`, ... */
function entry(n: number, from: number, table: TableName = 'logs', day = '2026-11-24'): WalEntry {
  const b = new BatchBuilder(SCHEMAS[table], n);
  for (let i = 0; i < n; i++) {
    const row: Record<string, unknown> = {
      project_id: 'p',
      event_ts: 1n,
      time_unix_nano: BigInt(from + i),
      body: `row ${from + i} ✓`,
    };
    b.pushValues(SCHEMAS[table].columns.map((c) => row[c.name] ?? null));
  }
  return { table, day, batch: packBatch(b.finish()) };
}

/** The time_unix_nano values of a logged entry. */
function times(e: { batch: WalEntry['batch'] }): bigint[] {
  const col = unpackBatch(e.batch, names).columns['time_unix_nano']!;
  assert.ok(col.kind === 'long');
  return [...col.values];
}

/** The prototype every FileHandle shares, whose methods a test may wrap to watch the log's I/O. */
async function fileHandlePrototype(): Promise<{
  write: (...a: unknown[]) => Promise<unknown>;
  datasync: () => Promise<void>;
  sync: () => Promise<void>;
}> {
  const probe = await open(join(tmpdir(), `otelake-probe-${process.pid}`), 'w');
  await probe.close();
  await rm(join(tmpdir(), `otelake-probe-${process.pid}`), { force: true });
  return Object.getPrototypeOf(probe);
}

/** Counts the writes the active segment gets through libuv's pool (its FileHandle's writev). */
function countPoolWrites(wal: WriteAheadLog): { writes: number } {
  const fh = (wal as unknown as { active: { fh: { writev: (...a: never[]) => unknown } } }).active.fh;
  const real = fh.writev;
  const count = { writes: 0 };
  fh.writev = function (this: unknown, ...args: never[]) {
    count.writes++;
    return real.apply(this, args);
  };
  return count;
}

async function replayAll(wal: WriteAheadLog): Promise<LoggedEntry[]> {
  const out: LoggedEntry[] = [];
  for await (const e of wal.replay()) out.push(e);
  return out;
}

/** Reopens the log in `dir` and checks that it replays rows 0 to n - 1, in order. */
async function assertReplaysRows(dir: string, n: number): Promise<void> {
  const again = (await WriteAheadLog.open(dir)).wal;
  assert.deepEqual(
    (await replayAll(again)).flatMap((e) => times(e)),
    Array.from({ length: n }, (_, i) => BigInt(i)),
  );
  await again.close();
}

async function segments(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.endsWith('.wal')).sort();
}

/** A log of 4 KiB segments holding 12 appends of 20 rows (three segments or more), none released. */
async function rotatedLog(name: string): Promise<{ dir: string; wal: WriteAheadLog; logged: LoggedEntry[] }> {
  const dir = join(root, name);
  const { wal } = await WriteAheadLog.open(dir, { segmentBytes: 4096 });
  await replayAll(wal);
  const logged: LoggedEntry[] = [];
  for (let i = 0; i < 12; i++) await wal.append([entry(20, i * 20)], (l) => logged.push(...l));
  return { dir, wal, logged };
}

/**
 * Whether this process has `path` open with O_DSYNC (/proc/self/fdinfo): the log writes records
 * that way instead of calling fdatasync after them, so without it nothing acknowledged is synced.
 */
async function openWithDsync(path: string): Promise<boolean> {
  for (const fd of await readdir('/proc/self/fd')) {
    if ((await readlink(`/proc/self/fd/${fd}`).catch(() => '')) !== path) continue;
    const flags = /^flags:\s+([0-7]+)$/m.exec(await readFile(`/proc/self/fdinfo/${fd}`, 'utf8'))![1]!;
    return (Number.parseInt(flags, 8) & constants.O_DSYNC) !== 0;
  }
  throw new Error(`${path} is not open`);
}

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'otelake-wal-'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('WriteAheadLog', () => {
  it('numbers rows, calls onDurable in log order, and replays every record after a restart', async () => {
    const dir = join(root, 'roundtrip');
    const { wal } = await WriteAheadLog.open(dir);
    assert.deepEqual(await replayAll(wal), []);
    const seen: number[][] = [];
    // Concurrent appends: one sync serves those that arrive while the previous write runs.
    await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        wal.append([entry(3, i * 10), entry(1, i * 10 + 5, 'spans')], (logged) => {
          seen.push(logged.map((e) => e.seq));
        }),
      ),
    );
    assert.deepEqual(
      seen,
      Array.from({ length: 50 }, (_, i) => [i * 4, i * 4 + 3]),
      'sequence numbers follow the order of the appends',
    );
    assert.ok(
      wal.stats().groups_written < 50,
      `group commit: ${wal.stats().groups_written} writes for 50 appends`,
    );
    // Where the event loop writes the log itself (O_DSYNC), it waits for the end of the turn:
    // appends made in one turn share one write.
    if (constants.O_DSYNC !== undefined) assert.equal(wal.stats().groups_written, 1);
    assert.equal(wal.pendingRows, 200);
    // Closed with rows pending (never committed): the log stays for the next start.
    await wal.close();
    const again = await WriteAheadLog.open(dir);
    assert.equal(again.wal.appId, wal.appId, 'the epoch survives a restart');
    const replayed = await replayAll(again.wal);
    assert.equal(replayed.length, 100);
    assert.deepEqual(
      replayed.filter((e) => e.table === 'logs').map((e) => [e.seq, e.day, ...times(e)]),
      Array.from({ length: 50 }, (_, i) => [
        i * 4,
        '2026-11-24',
        ...[0, 1, 2].map((k) => BigInt(i * 10 + k)),
      ]),
    );
    const body = unpackBatch(replayed[0]!.batch, names).columns['body']!;
    assert.ok(body.kind === 'utf8');
    assert.equal(Buffer.from(body.bytes).toString(), 'row 0 ✓row 1 ✓row 2 ✓');
    // New rows are numbered after the replayed ones.
    const next: number[] = [];
    await again.wal.append([entry(2, 1000)], (l) => next.push(l[0]!.seq));
    assert.deepEqual(next, [200]);
    await again.wal.close();
  });

  it('refuses appends before the rows of an earlier process are replayed', async () => {
    const dir = join(root, 'order');
    const { wal } = await WriteAheadLog.open(dir);
    await wal.append([entry(1, 0)], () => {});
    await wal.close();
    const again = (await WriteAheadLog.open(dir)).wal;
    await assert.rejects(
      again.append([entry(1, 1)], () => {}),
      /replay/,
    );
    await replayAll(again);
    await again.append([entry(1, 1)], () => {});
    await again.close();
  });

  it('deletes a segment once all its rows are released, and the whole log on a clean close', async () => {
    const { dir, wal, logged } = await rotatedLog('release');
    const before = await segments(dir);
    assert.ok(before.length >= 3, `rotated into ${before.length} segments`);
    // Release all but the last entry: every closed segment goes, the active one stays.
    for (const e of logged.slice(0, -1)) wal.release(e.seq, e.batch.numRows);
    await wal.settled();
    const left = await segments(dir);
    assert.ok(left.length < before.length, `${left.length} segments left of ${before.length}`);
    assert.equal(wal.pendingRows, 20);
    const last = logged.at(-1)!;
    wal.release(last.seq, 20);
    await wal.close();
    assert.deepEqual(await segments(dir), [], 'nothing pending: no segment kept');
  });

  it('writes the next segment ahead, reuses committed ones, and never replays what a reused file held', async () => {
    const dir = join(root, 'spares');
    const segmentBytes = 64 * 1024;
    const { wal } = await WriteAheadLog.open(dir, { segmentBytes });
    await replayAll(wal);
    const logged: LoggedEntry[] = [];
    const spareFiles = async () => (await readdir(dir)).filter((n) => n.endsWith('.wal-spare'));
    let t = 0;
    const append = () => {
      t += 50;
      return wal.append([entry(50, t)], (l) => logged.push(...l));
    };
    // Past half of a segment, a spare of the full size is written ahead...
    // (Each append waits for a spare being prepared: the appends' writes are quicker than
    // preparing it, and a segment that fills before its spare is ready is followed by a new file.)
    const spareReady = () => (wal as unknown as { preparing: Promise<void> | null }).preparing;
    for (let i = 0; i < 200 && wal.stats().spare_segments === 0; i++) {
      await append();
      await spareReady();
    }
    assert.ok(
      await openWithDsync(join(dir, (await segments(dir))[0]!)),
      'a new segment is written with O_DSYNC',
    );
    assert.equal(wal.stats().segments, 1);
    assert.equal(wal.stats().spare_segments, 1, 'a spare was prepared');
    // ... and becomes the next segment.
    while (wal.stats().segments < 3) {
      await append();
      await spareReady();
    }
    assert.equal(wal.stats().spare_segments, 0);
    // Committed segments become spares (at most two) instead of being deleted.
    for (const e of logged) wal.release(e.seq, e.batch.numRows);
    await wal.settled();
    const spares = await spareFiles();
    assert.equal(spares.length, 2, `spares: ${spares}`);
    for (const n of spares) assert.ok((await stat(join(dir, n))).size >= segmentBytes);
    assert.equal(wal.stats().spare_segments, 2);
    // A full active segment is closed before the next append; the next one is a reused file,
    // already of full size, holding records of its earlier life after the new ones.
    const before = new Set(await segments(dir));
    while (wal.stats().spare_segments === 2) {
      t += 50;
      await wal.append([entry(50, t)], () => {});
    }
    const fresh = (await segments(dir)).filter((n) => !before.has(n));
    assert.equal(fresh.length, 1);
    assert.ok((await stat(join(dir, fresh[0]!))).size >= segmentBytes, 'the new segment is a reused file');
    assert.ok(await openWithDsync(join(dir, fresh[0]!)), 'a reused segment is written with O_DSYNC');
    const newer: LoggedEntry[] = [];
    await wal.append([entry(3, 900_000)], (l) => newer.push(...l));
    // Closed with rows pending, as after a crash: replay yields the rows of the log's present only.
    await wal.close();
    const again = (await WriteAheadLog.open(dir, { segmentBytes })).wal;
    assert.deepEqual(await spareFiles(), [], 'spares left by a process are removed at open');
    const replayed = await replayAll(again);
    // Every row once, in order: no record of a reused file's earlier life (lower numbers) in between.
    replayed.forEach((e, i) => {
      if (i > 0) assert.equal(e.seq, replayed[i - 1]!.seq + replayed[i - 1]!.batch.numRows);
    });
    assert.deepEqual(times(replayed.at(-1)!), [900_000n, 900_001n, 900_002n]);
    assert.equal(
      again.pendingRows,
      replayed.reduce((n, e) => n + e.batch.numRows, 0),
    );
    for (const e of replayed) again.release(e.seq, e.batch.numRows);
    await again.close();
    assert.deepEqual(await readdir(dir), [], 'a clean close leaves no segment and no spare');
  });

  for (const how of ['a crash', 'a clean close'] as const) {
    it(`numbers rows on past every row logged before ${how}, when only an older segment holds rows`, async () => {
      const dir = join(root, `numbering-${how.replaceAll(' ', '-')}`);
      const segmentBytes = 16 * 1024;
      const { wal } = await WriteAheadLog.open(dir, { segmentBytes });
      await replayAll(wal);
      const logged: LoggedEntry[] = [];
      let t = 0;
      const append = async () => {
        t += 50;
        await wal.append([entry(50, t)], (l) => logged.push(...l));
      };
      while (wal.stats().segments < 2) await append();
      // The first rows stay pending (a table whose writes keep failing); the others are committed,
      // and their tables record how far in their `txn`, up to the moment a segment has just filled
      // and no newer one is open yet.
      const kept = logged[0]!;
      const active = () => (wal as unknown as { active: unknown }).active;
      do {
        await append();
        for (const e of logged.splice(1)) wal.release(e.seq, e.batch.numRows);
      } while (active() !== null);
      await wal.settled();
      const tablesHave = t; // rows 0 .. t - 1 were logged, 50 at a time
      if (how === 'a clean close') await wal.close();
      const again = (await WriteAheadLog.open(dir, { segmentBytes })).wal;
      const replayed = await replayAll(again);
      assert.ok(
        replayed.some((e) => e.seq === kept.seq),
        'the pending rows are replayed',
      );
      // New rows get numbers past every logged one, so that no table takes them for rows it has.
      let next = -1;
      await again.append([entry(1, 999_999)], (l) => {
        next = l[0]!.seq;
      });
      assert.ok(
        next >= tablesHave,
        `the next row is numbered ${next}, the tables have rows up to ${tablesHave}`,
      );
      for (const e of replayed) again.release(e.seq, e.batch.numRows);
      await again.close();
      if (how === 'a crash') await wal.close();
    });
  }

  it("syncs the log's folder after a committed segment becomes a spare, before its new header", async () => {
    const dir = join(root, 'reuse-order');
    // The file handles' writes, with the path each descriptor is open on, and the syncs of the
    // log's folder, with the spares it then held.
    type Event =
      | { op: 'write'; path: string; bytes: number; at: number }
      | { op: 'folder synced'; spares: string[] }
      | { op: 'released' };
    const events: Event[] = [];
    const proto = await fileHandlePrototype();
    const { write, sync } = proto;
    const pathOf = async (fh: unknown) => readlink(`/proc/self/fd/${(fh as { fd: number }).fd}`);
    proto.write = async function (this: unknown, ...args: unknown[]) {
      events.push({ op: 'write', path: await pathOf(this), bytes: args[2] as number, at: args[3] as number });
      return write.apply(this, args);
    };
    proto.sync = async function (this: unknown) {
      if ((await pathOf(this)) === dir) {
        const spares = (await readdir(dir)).filter((n) => n.endsWith('.wal-spare'));
        events.push({ op: 'folder synced', spares });
      }
      return sync.call(this);
    };
    const segmentBytes = 64 * 1024;
    try {
      const { wal } = await WriteAheadLog.open(dir, { segmentBytes });
      await replayAll(wal);
      const logged: LoggedEntry[] = [];
      let t = 0;
      while (wal.stats().segments < 3) {
        t += 50;
        await wal.append([entry(50, t)], (l) => logged.push(...l));
      }
      // Their rows committed, the full segments become spares (renamed)...
      events.push({ op: 'released' });
      for (const e of logged) wal.release(e.seq, e.batch.numRows);
      await wal.settled();
      assert.ok(wal.stats().spare_segments > 0);
      // ... and the next segment is one of them, its header written over the old one.
      const spares = wal.stats().spare_segments;
      while (wal.stats().spare_segments === spares) {
        t += 50;
        await wal.append([entry(50, t)], () => {});
      }
      await wal.close();
    } finally {
      proto.write = write;
      proto.sync = sync;
    }
    const released = events.findIndex((e) => e.op === 'released');
    const header = events.findIndex(
      (e, i) =>
        i > released && e.op === 'write' && e.path.endsWith('.wal-spare') && e.at === 0 && e.bytes === 64,
    );
    assert.ok(header > released, 'a spare got a new header');
    const spare = basename((events[header] as { path: string }).path);
    assert.ok(
      events.slice(released, header).some((e) => e.op === 'folder synced' && e.spares.includes(spare)),
      `the log's folder synced once ${spare} was there (the rename and the journal before it), before its header`,
    );
  });

  it("syncs a spare a chunk at a time: never more than a chunk of it for the log's own syncs to wait behind", async () => {
    // Bytes written through each file handle since its last fdatasync, the most seen at once.
    const proto = await fileHandlePrototype();
    const { write, datasync } = proto;
    const unsynced = new Map<unknown, number>();
    let most = 0;
    let written = 0;
    proto.write = function (this: unknown, ...args: unknown[]) {
      const bytes = typeof args[2] === 'number' ? args[2] : 0;
      const n = (unsynced.get(this) ?? 0) + bytes;
      unsynced.set(this, n);
      most = Math.max(most, n);
      written += bytes;
      return write.apply(this, args);
    };
    proto.datasync = function (this: unknown) {
      unsynced.set(this, 0);
      return datasync.call(this);
    };
    const dir = join(root, 'spare-steps');
    const segmentBytes = 4 * 1024 * 1024;
    try {
      const { wal } = await WriteAheadLog.open(dir, { segmentBytes });
      await replayAll(wal);
      // Past half of the segment a spare is prepared; wait for it before the segment fills.
      for (let i = 0; wal.stats().bytes <= segmentBytes / 2; i++)
        await wal.append([entry(2000, i * 2000)], () => {});
      for (let waited = 0; wal.stats().spare_segments === 0; waited += 10) {
        assert.ok(waited < 30_000, 'a spare is prepared once the segment is half full');
        await new Promise((r) => setTimeout(r, 10));
      }
      await wal.close();
    } finally {
      proto.write = write;
      proto.datasync = datasync;
    }
    assert.ok(written >= segmentBytes, `${written} bytes of zeros written`);
    // The chunk (1 MiB): one sync of the whole spare left all 4 MiB to flush at once.
    assert.ok(most <= 1024 * 1024, `at most ${most} bytes of a spare unsynced at once`);
  });

  it('syncs each write: by O_DSYNC, or by fdatasync after it where that is asked for', async () => {
    // Counts fdatasync calls on any file handle while `run` runs.
    const proto = await fileHandlePrototype();
    const datasyncs = async (run: () => Promise<void>): Promise<number> => {
      const original = proto.datasync;
      let n = 0;
      proto.datasync = function (this: unknown) {
        n++;
        return original.call(this);
      };
      try {
        await run();
      } finally {
        proto.datasync = original;
      }
      return n;
    };
    for (const dsync of [true, false]) {
      const dir = join(root, `dsync-${dsync}`);
      const { wal } = await WriteAheadLog.open(dir, { dsync });
      await replayAll(wal);
      await wal.append([entry(5, 0)], () => {}); // the segment is opened (and its header written)
      const path = join(dir, (await segments(dir))[0]!);
      assert.equal(await openWithDsync(path), dsync);
      const n = await datasyncs(async () => {
        for (let i = 1; i <= 3; i++) await wal.append([entry(5, i * 5)], () => {});
      });
      assert.equal(n, dsync ? 0 : 3, `fdatasync calls for three records, dsync ${dsync}`);
      await wal.close();
      await assertReplaysRows(dir, 20);
    }
  });

  it("writes on the event loop, and through libuv's pool for a while after a slow write", async () => {
    // eventLoopWriteMaxMs -1: every write counts as slow; 1e9: none does.
    for (const [limit, slow] of [
      [1e9, false],
      [-1, true],
    ] as const) {
      const dir = join(root, `slow-${slow}`);
      const { wal } = await WriteAheadLog.open(dir, { eventLoopWriteMaxMs: limit });
      await replayAll(wal);
      await wal.append([entry(2, 0)], () => {}); // on the event loop: the segment's first record
      const pool = countPoolWrites(wal);
      for (let i = 1; i <= 3; i++) await wal.append([entry(2, i * 2)], () => {});
      assert.equal(pool.writes, slow ? 3 : 0, `writes through the pool, slow ${slow}`);
      assert.equal(wal.stats().write_path, slow ? 'pool' : 'event_loop');
      await wal.close();
      await assertReplaysRows(dir, 8);
    }
  });

  it("writes through libuv's pool while the event loop is saturated, on the loop once it is not", async () => {
    const dir = join(root, 'saturated');
    // No write counts as slow (a busy machine's disk may take 50 ms once): only the load decides here.
    const { wal } = await WriteAheadLog.open(dir, { eventLoopWriteMaxMs: 1e9 });
    await replayAll(wal);
    await wal.append([entry(2, 0)], () => {});
    const pool = countPoolWrites(wal);
    const idleWindow = () => new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 50));
    // A window of an idle loop: the write stays on the loop, and a new window starts with it.
    await idleWindow();
    await wal.append([entry(2, 2)], () => {});
    assert.equal(pool.writes, 0, 'no write through the pool after an idle window');
    // The loop kept busy for the whole next window, then a write: the pool makes it, and the next one.
    const until = performance.now() + WINDOW_MS + 50;
    while (performance.now() < until);
    await wal.append([entry(2, 4)], () => {});
    await wal.append([entry(2, 6)], () => {});
    assert.equal(pool.writes, 2, 'writes through the pool after a saturated window');
    assert.equal(wal.stats().write_path, 'pool');
    // Another idle window: back on the loop.
    await idleWindow();
    await wal.append([entry(2, 8)], () => {});
    assert.equal(pool.writes, 2, 'no write through the pool once the loop is idle');
    assert.equal(wal.stats().write_path, 'event_loop');
    await wal.close();
    await assertReplaysRows(dir, 10);
  });

  it("writes CRCs that zlib's CRC-32 checks: the log replays where @node-rs/crc32 cannot load", async () => {
    const dir = join(root, 'zlib-crc');
    const { wal } = await WriteAheadLog.open(dir);
    await replayAll(wal);
    for (let i = 0; i < 3; i++) await wal.append([entry(5, i * 5)], () => {});
    await wal.close(); // nothing released: the segment stays
    const child = spawnSync(
      process.execPath,
      [
        '--require',
        fileURLToPath(new URL('fixtures/no-native-crc32.cjs', import.meta.url)),
        '--input-type=module',
        '-e',
        `import { createRequire } from 'node:module';
        import { WriteAheadLog } from ${JSON.stringify(new URL('../../src/wal/wal.ts', import.meta.url).href)};
        let loadable = true;
        try { createRequire(import.meta.url)('@node-rs/crc32'); } catch { loadable = false; }
        const { wal } = await WriteAheadLog.open(${JSON.stringify(dir)});
        let rows = 0;
        for await (const e of wal.replay()) rows += e.batch.numRows;
        console.log(JSON.stringify({ loadable, rows }));`,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), { loadable: false, rows: 15 });
  });

  it('replays segments written before records were tied to their segment (OTLKWAL1)', async () => {
    const dir = join(root, 'v1');
    const { wal } = await WriteAheadLog.open(dir);
    for (let i = 0; i < 3; i++) await wal.append([entry(2, i * 2)], () => {});
    await wal.close();
    // Rewrite the segment as the first format wrote it: that magic, CRCs of the payload alone.
    const path = join(dir, (await segments(dir))[0]!);
    const buf = await readFile(path);
    buf.write('OTLKWAL1', 0, 'latin1');
    for (let at = 64; at + 8 <= buf.length; ) {
      const length = buf.readUInt32LE(at);
      buf.writeUInt32LE(crc32(buf.subarray(at + 8, at + 8 + length)), at + 4);
      at += 8 + length;
    }
    await writeFile(path, buf);
    const again = (await WriteAheadLog.open(dir)).wal;
    assert.deepEqual(
      (await replayAll(again)).map((e) => times(e)),
      [
        [0n, 1n],
        [2n, 3n],
        [4n, 5n],
      ],
    );
    await again.close();
  });

  it('releases a range of rows that spans records and segments', async () => {
    const { dir, wal, logged } = await rotatedLog('span-release');
    assert.ok(wal.stats().segments >= 3, `${wal.stats().segments} segments`);
    // One file's rows: every entry but the last, as one range.
    wal.release(logged[0]!.seq, 11 * 20);
    assert.equal(wal.pendingRows, 20);
    assert.equal(wal.stats().segments, 1, 'only the segment of the last entry is left');
    wal.release(logged[11]!.seq, 20);
    await wal.close();
    assert.deepEqual(await segments(dir), []);
  });

  it('replays a segment up to a torn or corrupt record, never past it', async () => {
    const dir = join(root, 'torn');
    const { wal } = await WriteAheadLog.open(dir);
    for (let i = 0; i < 3; i++) await wal.append([entry(5, i * 5)], () => {});
    await wal.close();
    const [name] = await segments(dir);
    const path = join(dir, name!);
    const size = (await stat(path)).size;
    // A crash in the middle of the third write: its record is cut short.
    await truncate(path, size - 7);
    let again = (await WriteAheadLog.open(dir)).wal;
    assert.deepEqual(
      (await replayAll(again)).map((e) => e.seq),
      [0, 5],
    );
    await again.close();
    // A flipped byte inside the second record: its CRC fails, and replay ends before it.
    const fh = await open(path, 'r+');
    await fh.write(Buffer.from([0xff]), 0, 1, Math.floor((size - 7) / 2) + 40);
    await fh.close();
    again = (await WriteAheadLog.open(dir)).wal;
    const seqs = (await replayAll(again)).map((e) => e.seq);
    assert.ok(seqs.length < 2 && seqs.every((s) => s === 0), `replayed ${JSON.stringify(seqs)}`);
    await again.close();
  });

  it('moves a segment with an unreadable header aside, and drops an empty one left by a crash', async () => {
    const dir = join(root, 'damaged');
    const { wal } = await WriteAheadLog.open(dir);
    await wal.append([entry(2, 0)], () => {});
    await wal.close();
    await writeFile(
      join(dir, '000000000005.wal'),
      Buffer.from('garbage that is not a header, long enough to be read'),
    );
    await writeFile(join(dir, '000000000009.wal'), Buffer.alloc(10));
    const { wal: again, damaged } = await WriteAheadLog.open(dir);
    assert.deepEqual(damaged, [join(dir, 'damaged', '000000000005.wal')]);
    assert.deepEqual(await segments(dir), ['000000000001.wal']);
    assert.deepEqual(
      (await replayAll(again)).map((e) => times(e)),
      [[0n, 1n]],
    );
    await again.close();
  });

  it('reads logged rows back by sequence range', async () => {
    const dir = join(root, 'read');
    const { wal } = await WriteAheadLog.open(dir);
    await replayAll(wal);
    const logged: LoggedEntry[] = [];
    await wal.append([entry(4, 0), entry(3, 100, 'spans')], (l) => logged.push(...l));
    await wal.append([entry(6, 10)], (l) => logged.push(...l));
    await wal.append([entry(5, 20)], (l) => logged.push(...l));
    const back = await wal.read('logs', '2026-11-24', [
      { seq: 1, rows: 3 },
      { seq: 7, rows: 2 },
      // The entries of consecutive requests, merged into one range by the aggregator.
      { seq: 11, rows: 4 },
    ]);
    assert.deepEqual(
      back.map((b) => times(b).slice(b.from, b.to)),
      [
        [1n, 2n, 3n],
        [10n, 11n],
        [14n, 15n],
        [20n, 21n],
      ],
    );
    await assert.rejects(wal.read('logs', '2026-11-24', [{ seq: 500, rows: 1 }]), /no longer/);
    for (const e of logged) wal.release(e.seq, e.batch.numRows);
    await wal.close();
  });

  it('a failed write is cut off the segment: it is refused and never replayed', async () => {
    const dir = join(root, 'fail');
    const { wal } = await WriteAheadLog.open(dir);
    const told: string[] = [];
    wal.onProblem = (err) => told.push(err === null ? 'ok again' : err.message);
    await replayAll(wal);
    await wal.append([entry(2, 0)], () => {});
    // The next write stops half way, as on a full disk: part of the record is in the file.
    type WriteAt = (fh: unknown, buffers: Uint8Array[], position: number) => number | Promise<number>;
    const seam = wal as unknown as { writeAt: WriteAt };
    const real = seam.writeAt;
    seam.writeAt = async (fh, buffers, position) => {
      await real.call(wal, fh, buffers.slice(0, 2), position);
      throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
    };
    await assert.rejects(
      wal.append([entry(3, 10)], () => assert.fail('not durable')),
      /ENOSPC/,
    );
    assert.match(wal.stats().last_error?.message ?? '', /ENOSPC/);
    await assert.rejects(
      wal.append([entry(1, 15)], () => {}),
      /ENOSPC/,
    );
    seam.writeAt = real;
    await wal.append([entry(1, 20)], () => {});
    assert.equal(wal.stats().last_error, null, 'a later write succeeds and clears the error');
    // Told once when writes start failing, once when they work again (the logger logs both).
    assert.deepEqual(told, ['ENOSPC: no space left on device', 'ok again']);
    // A crash right after a failed write: what it left in the file is not replayed.
    await wal.append([entry(3, 30)], () => {});
    seam.writeAt = async (fh, buffers, position) => {
      await real.call(wal, fh, buffers.slice(0, 2), position);
      throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
    };
    await assert.rejects(
      wal.append([entry(3, 40)], () => {}),
      /EIO/,
    );
    await wal.close();
    const again = (await WriteAheadLog.open(dir)).wal;
    assert.deepEqual(
      (await replayAll(again)).map((e) => times(e)),
      [[0n, 1n], [20n], [30n, 31n, 32n]],
    );
    await again.close();
  });
});
