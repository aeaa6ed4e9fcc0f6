// Shipping benchmark: a day of log rows (bench/read-logs.ts's generator, 5,000,000 rows by
// default) is sealed, uploaded, verified and cleaned to the loopback S3 server of the tests
// (s3rver behind a SigV4-checking front, test/shipping/s3-server.ts). Prints the seconds of each
// phase; the upload's MB/s beside the same files uploaded by the AWS SDK alone (the limit), once
// before and once after otelake's upload; then "newest 100 with severity >= 17 whose body
// contains X" on the shipped day, local and from S3 alternately (A/B, same run): median latency,
// and the bytes each S3 query fetched against the size of the table.
//
//   node bench/ship-day.ts [rows] [queries]     defaults: 5,000,000 rows, 30 queries per source
//
// The S3 server runs on the same machine (and cores) as otelake: upload and read figures include
// its work (signature checks, s3rver's files), which a real object store does elsewhere.

import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { closeDeltaWorkers, localLogStore, readSnapshot } from '../src/delta/table.ts';
import { Logger } from '../src/index.ts';
import { closeReadWorkers } from '../src/read/query.ts';
import { TABLE_NAMES } from '../src/schema/tables.ts';
import { shipperHooks } from '../src/shipping/shipper.ts';
import { InstanceLayout } from '../src/storage/layout.ts';
import { MULTIPART_FROM } from '../src/storage/object-store.ts';
import { resolveS3 } from '../src/storage/s3-config.ts';
import { startS3Server } from '../test/shipping/s3-server.ts';

const ROWS = Number(process.argv[2] ?? 5_000_000);
const QUERIES = Number(process.argv[3] ?? 30);
const DAY = '2026-11-20';
const INSTANCE = 'bench';
const QUERY = { severityGe: 17, bodyLike: 'X', maxRows: 100 };

const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const mbps = (bytes: number, ms: number) => `${(bytes / 1048576 / (ms / 1000)).toFixed(1)} MB/s`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function generate(dir: string): Promise<void> {
  const script = fileURLToPath(new URL('./read-logs.ts', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, String(ROWS)], {
      env: { ...process.env, READ_BENCH_GENERATE_INTO: dir },
      stdio: 'inherit',
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`generator exited with ${code}`))));
  });
}

/** The sealed day's files (data and logs of all six tables). */
async function dayFiles(layout: InstanceLayout): Promise<{ path: string; rel: string; size: number }[]> {
  const { readdir, stat } = await import('node:fs/promises');
  const out: { path: string; rel: string; size: number }[] = [];
  for (const t of TABLE_NAMES) {
    const dir = layout.tableDir(DAY, t);
    for (const sub of ['', '_delta_log']) {
      for (const name of await readdir(join(dir, sub))) {
        const path = join(dir, sub, name);
        const st = await stat(path);
        if (st.isFile()) out.push({ path, rel: `${t}/${sub ? `${sub}/` : ''}${name}`, size: st.size });
      }
    }
  }
  return out;
}

/** The same files uploaded by the SDK alone: 4 at once, large ones in 16 MiB parts, 4 at once. */
async function sdkUpload(
  client: S3Client,
  bucket: string,
  prefix: string,
  layout: InstanceLayout,
): Promise<{ bytes: number; ms: number }> {
  const files = await dayFiles(layout);
  const t0 = performance.now();
  let next = 0;
  const lane = async () => {
    while (next < files.length) {
      const f = files[next++]!;
      const Key = `${prefix}${f.rel}`;
      if (f.size < MULTIPART_FROM) {
        await client.send(new PutObjectCommand({ Bucket: bucket, Key, Body: await readFile(f.path) }));
      } else {
        const up = new Upload({
          client,
          params: { Bucket: bucket, Key, Body: createReadStream(f.path) },
          partSize: 16 * 1024 * 1024,
          queueSize: 4,
        });
        await up.done();
      }
    }
  };
  await Promise.all([lane(), lane(), lane(), lane()]);
  return { bytes: files.reduce((n, f) => n + f.size, 0), ms: performance.now() - t0 };
}

async function main(): Promise<void> {
  console.log(
    `machine: shared by several engineers while measured; figures are indicative, compare A with B of the same run (2 cores, S3 server on the same cores)`,
  );
  const dir = await mkdtemp(join(tmpdir(), 'otelake-ship-bench-'));
  const server = await startS3Server({ prefix: 'bench' });
  const settings = resolveS3(undefined, server.env).settings!;
  const client = new S3Client({
    endpoint: settings.endpointUrl,
    region: settings.signingRegion,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
  });
  const layout = new InstanceLayout(dir, INSTANCE);
  try {
    await generate(dir);
    Object.assign(process.env, server.env); // the S3 settings, as a deployment gives them
    const logger = await Logger.open({
      instanceDir: dir,
      instanceId: INSTANCE,
      handleSignals: false,
      options: { shipper_enabled: false },
    });
    const marks: Record<string, number> = {};
    const sdk: { bytes: number; ms: number }[] = [];
    const local: number[] = [];
    const remote: number[] = [];
    const fetched: number[] = [];
    let tableBytes = 0;
    let firstRemote = 0;
    shipperHooks.afterPhase = async (_day, phase) => {
      const now = performance.now();
      marks[`${phase}:end`] = now;
      if (phase === 'sealed') {
        sdk.push(await sdkUpload(client, settings.bucket, `sdk-alone-1/`, layout));
      }
      if (phase === 'verified') {
        sdk.push(await sdkUpload(client, settings.bucket, `sdk-alone-2/`, layout));
        const snap = await readSnapshot(localLogStore(join(layout.tableDir(DAY, 'logs'), '_delta_log')));
        tableBytes = snap.files.reduce((n, f) => n + f.size, 0);
        // A/B: the same query on the local copy and on the shipped one, alternately.
        const t0 = performance.now();
        await logger.readLogs({ ...QUERY, storage: 's3' });
        firstRemote = performance.now() - t0;
        for (let i = 0; i < QUERIES; i++) {
          let t = performance.now();
          const a = await logger.readLogs({ ...QUERY, storage: 'local' });
          local.push(performance.now() - t);
          await server.resetStats();
          t = performance.now();
          const b = await logger.readLogs({ ...QUERY, storage: 's3' });
          remote.push(performance.now() - t);
          fetched.push((await server.stats()).bytesServed);
          if (a.length !== 100 || b.length !== 100)
            throw new Error(`expected 100 rows, got ${a.length} and ${b.length}`);
        }
      }
      marks[`${phase}:next`] = performance.now();
    };
    // The same query on the day as ingest left it (20 files of 250,000 rows), before the seal.
    const unsealed: number[] = [];
    for (let i = 0; i < QUERIES; i++) {
      const t = performance.now();
      await logger.readLogs({ ...QUERY, storage: 'local' });
      unsealed.push(performance.now() - t);
    }
    const start = performance.now();
    marks['open:next'] = start;
    const summary = await logger.shipNow(DAY);
    shipperHooks.afterPhase = undefined;
    if (summary.status !== 'cleaned') throw new Error(`ship failed: ${JSON.stringify(summary.error)}`);
    const phase = (from: string, to: string) => marks[`${to}:end`]! - marks[`${from}:next`]!;
    const upMs = phase('sealed', 'uploaded');
    console.log(
      `day of ${ROWS.toLocaleString('en-US')} log rows: ${summary.tables['logs']!.rows} rows sealed and verified`,
    );
    console.log(
      `seal ${s(phase('open', 'sealed'))}, upload ${s(upMs)}, verify ${s(phase('uploaded', 'verified'))}, clean ${s(phase('verified', 'cleaned'))}`,
    );
    console.log(
      `upload: ${summary.uploaded.files} files, ${(summary.uploaded.bytes / 1048576).toFixed(0)} MB at ${mbps(summary.uploaded.bytes, upMs)}; ` +
        `the same files by the SDK alone: ${sdk.map((x) => mbps(x.bytes, x.ms)).join(' before, ')} after`,
    );
    console.log(
      `query ${JSON.stringify(QUERY)} x ${QUERIES} each, alternately: local median ${median(local).toFixed(0)} ms, ` +
        `S3 median ${median(remote).toFixed(0)} ms (${(median(remote) / median(local)).toFixed(1)}x; first S3 query ${firstRemote.toFixed(0)} ms with the log's snapshot)`,
    );
    console.log(
      `the same query before the seal (the generator's 250,000-row files): local median ${median(unsealed).toFixed(0)} ms`,
    );
    console.log(
      `bytes fetched from S3 per query: median ${(median(fetched) / 1048576).toFixed(1)} MB of a ${(tableBytes / 1048576).toFixed(0)} MB table ` +
        `(${((100 * median(fetched)) / tableBytes).toFixed(1)}%)`,
    );
    await logger.stop();
  } finally {
    client.destroy();
    await closeReadWorkers();
    await closeDeltaWorkers();
    await server.stop({ removeData: true });
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
