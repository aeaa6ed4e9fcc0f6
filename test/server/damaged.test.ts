// A damaged table never takes the server down. One instance, three kinds of damage, one real
// server process: today's logs table has a truncated newest commit (ingest of logs answers 503
// naming it, reads of it fail, everything else works), yesterday's spans table lost a data file
// (reads of that day fail clearly, today's spans are written and read), today's spans table has
// an unreadable checkpoint (mended at start, ingest goes on). /healthz says `degraded` with each
// cause; once repaired as `otelake check` says, all of it serves again without a restart.

import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import { checkTable } from '../../src/delta/check.ts';
import { closeDeltaWorkers } from '../../src/delta/table.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import {
  corruptNewestCheckpoint,
  days,
  moveDataFileAway,
  ROUNDS,
  ROWS_PER_ROUND,
  truncateNewestCommit,
  writeInstance,
} from '../fixtures/damage.ts';
import { getJson, post, readUntil } from './helpers/harness.ts';

const CHILD = new URL('./helpers/run-server.ts', import.meta.url).pathname;
const ROWS = ROUNDS * ROWS_PER_ROUND;

let dir: string;
let child: ChildProcess;
let url: string;
/** The server's log: its logger's lines go to stderr until the HTTP server's log (stdout) exists. */
const logLines: string[] = [];
let layout: InstanceLayout;
const { today, yesterday } = days();
let truncated: string;
let movedFile: { from: string; to: string };

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'otelake-damaged-'));
  await writeInstance(dir, 'dmg');
  layout = new InstanceLayout(dir, 'dmg');
  truncated = await truncateNewestCommit(layout.tableDir(today, 'logs'));
  movedFile = await moveDataFileAway(layout.tableDir(yesterday, 'spans'));
  await corruptNewestCheckpoint(layout.tableDir(today, 'spans'));
  await closeDeltaWorkers();

  const options = { aggregator_config: { max_age_s: 0.05, min_batch_rows: 1 } };
  child = spawn(process.execPath, [CHILD, dir, 'dmg', JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  createInterface({ input: child.stderr! }).on('line', (line) => logLines.push(line));
  url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      logLines.push(line);
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${logLines.join('\n')}`)));
  });
});

after(async () => {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
  await rm(dir, { recursive: true, force: true });
});

const logs = JSON.stringify({
  resourceLogs: [
    { scopeLogs: [{ logRecords: [{ timeUnixNano: String(Date.now() * 1e6), body: { stringValue: 'x' } }] }] },
  ],
});
const traces = JSON.stringify({
  resourceSpans: [
    {
      scopeSpans: [
        {
          spans: [
            {
              traceId: '0af7651916cd43dd8448eb211c80319c',
              spanId: 'b7ad6b7169203331',
              name: 'after damage',
              startTimeUnixNano: String(Date.now() * 1e6),
              endTimeUnixNano: String(Date.now() * 1e6 + 1000),
            },
          ],
        },
      ],
    },
  ],
});
const headers = { 'content-type': 'application/json', 'x-project-id': 'p' };

/** Waits for a line of the server's log (it may arrive after the answer that caused it). */
async function logged(text: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!logLines.some((l) => l.includes(text))) {
    if (Date.now() > deadline) assert.fail(`no log line with "${text}":\n${logLines.join('\n')}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('the server starts and reports each damaged table, in its log and in /healthz', async () => {
  assert.ok(
    logLines.some(
      (l) => l.includes(`the logs table of ${today} is damaged`) && l.includes('corrupt Delta commit'),
    ),
    logLines.join('\n'),
  );
  assert.ok(logLines.some((l) => l.includes(`the spans table of ${today} had an unreadable checkpoint`)));
  const health = (await getJson(`${url}/healthz`)).body;
  assert.equal(health.status, 'degraded');
  assert.equal(health.damaged_tables.length, 1);
  assert.deepEqual(
    {
      table: health.damaged_tables[0].table,
      day: health.damaged_tables[0].day,
      by: health.damaged_tables[0].found_by,
    },
    { table: 'logs', day: today, by: 'open' },
  );
  assert.match(health.problems.join('\n'), new RegExp(`the logs table of ${today} is damaged`));
});

test('ingest into the damaged table answers 503 naming it; the other signals are stored', async () => {
  const refused = await post(`${url}/v1/logs`, logs, headers);
  assert.equal(refused.status, 503);
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.match(JSON.parse(refused.text).message, new RegExp(`the logs table of ${today} is damaged`));

  // Today's spans (their checkpoint mended at start) take new rows.
  const ok = await post(`${url}/v1/traces`, traces, headers);
  assert.equal(ok.status, 200);
  const rows = await readUntil(`${url}/api/spans?date_from=${today}&limit=1000`, ROWS + 1);
  assert.equal(rows.length, ROWS + 1);
  const mended = await checkTable(layout.tableDir(today, 'spans'));
  assert.deepEqual(mended.findings, [], 'a new checkpoint replaced the unreadable one');
});

test('reads of a damaged table fail clearly; other days and tables read normally', async () => {
  const bad = await getJson(`${url}/api/logs`);
  assert.equal(bad.status, 500);
  assert.equal(bad.body.error, 'Damaged Table');
  assert.equal(bad.body.table, 'logs');
  assert.equal(bad.body.day, today);
  assert.match(bad.body.message, /otelake check/);
  const earlier = await getJson(`${url}/api/logs?date_from=${yesterday}&date_to=${yesterday}`);
  assert.equal(earlier.status, 200);
  assert.equal(earlier.body.count, ROWS);

  const lost = await getJson(`${url}/api/spans?date_from=${yesterday}&date_to=${yesterday}`);
  assert.equal(lost.status, 500);
  assert.equal(lost.body.table, 'spans');
  assert.equal(lost.body.day, yesterday);
  assert.match(lost.body.message, /is missing/);
  const health = (await getJson(`${url}/healthz`)).body;
  const found = health.damaged_tables.map((d: { table: string; day: string; found_by: string }) => [
    d.table,
    d.day,
    d.found_by,
  ]);
  assert.deepEqual(found.sort(), [
    ['logs', today, 'open'],
    ['spans', yesterday, 'read'],
  ]);
  await logged(`the spans table of ${yesterday} is damaged`);
});

test('repaired as otelake check says, the tables serve again without a restart', async () => {
  const aside = join(dir, 'aside');
  await mkdir(aside);
  await rename(truncated, join(aside, 'commit.json'));
  await rename(movedFile.to, movedFile.from);

  // The server tries the damaged table again now and then (every 10 s) while ingest asks for it.
  const deadline = Date.now() + 60_000;
  let status = 0;
  while (Date.now() < deadline) {
    status = (await post(`${url}/v1/logs`, logs, headers)).status;
    if (status === 200) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.equal(status, 200, 'logs are taken again');
  const spans = await getJson(`${url}/api/spans?date_from=${yesterday}&date_to=${yesterday}`);
  assert.equal(spans.status, 200);
  assert.equal(spans.body.count, ROWS);
  const health = (await getJson(`${url}/healthz`)).body;
  assert.equal(health.status, 'ok', JSON.stringify(health.problems));
  assert.deepEqual(health.damaged_tables, []);
  // The table went back to the version before the damaged commit, then took the new row.
  const rows = await readUntil(`${url}/api/logs?date_from=${today}&limit=1000`, ROWS - ROWS_PER_ROUND + 1);
  assert.equal(rows.length, ROWS - ROWS_PER_ROUND + 1);
});
