// The whole life of an instance through the CLI, as a user drives it: init, start in the
// background, an application exporting with the OpenTelemetry SDK, status, view, stop (nothing
// lost), a crash (kill -9) and a restart over the stale pidfile, reading while a server writes.

import assert from 'node:assert/strict';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  alive,
  freePort,
  killQuietly,
  otelake,
  type RunResult,
  runProcess,
  tempDir,
  waitFor,
} from './helpers.ts';

const SENDER = fileURLToPath(new URL('./sdk-send.ts', import.meta.url));

function send(port: number, env: Record<string, string>): Promise<RunResult> {
  return runProcess(process.execPath, [SENDER], {
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, ...env },
  });
}

/** Body cells of a rendered logs table, top to bottom. */
function bodies(stdout: string, prefix: string): string[] {
  return [...stdout.matchAll(new RegExp(`│ (${prefix} \\d+)\\s+│`, 'g'))].map((m) => m[1]!);
}

const today = new Date().toISOString().slice(0, 10);
const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);

describe('otelake init, start, export, status, view, stop', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let port: number;
  let pidFile: string;
  let addressFile: string;
  const started: number[] = [];
  const run = (args: string[], env?: Record<string, string>) =>
    otelake(args, { cwd: dir.path, ...(env ? { env } : {}) });

  before(async () => {
    dir = await tempDir('flow');
    port = await freePort();
    pidFile = join(dir.path, 'svc_data', 'default', 'otelake.pid');
    addressFile = join(dir.path, 'svc_data', 'default', 'otelake.address.json');
  });
  after(async () => {
    for (const pid of started) killQuietly(pid);
    await dir.remove();
  });

  const readPid = async () => Number((await readFile(pidFile, 'utf8')).trim());

  async function start(): Promise<{ pid: number; result: RunResult }> {
    const result = await run(['start', '--host', '127.0.0.1', '--port', String(port)]);
    const m = /^otelake listening on http:\/\/127\.0\.0\.1:(\d+) \(pid (\d+)\)$/m.exec(result.stdout);
    assert.ok(m, `start failed (${result.code}): ${result.stdout}${result.stderr}`);
    const pid = Number(m[2]);
    started.push(pid);
    assert.equal(result.code, 0);
    assert.equal(Number(m[1]), port);
    return { pid, result };
  }

  test('init, then a background server that holds the pidfile', async () => {
    assert.equal((await run(['init'])).code, 0);
    // Keep rows in memory until stop: the stop must flush them for the view to show them.
    const optionsFile = join(dir.path, 'svc_data', 'default', 'configs', 'options.json');
    const options = JSON.parse(await readFile(optionsFile, 'utf8'));
    options.aggregator_config = {
      ...options.aggregator_config,
      max_age_s: 600,
      min_batch_rows: 1000,
      max_batch_rows: 1000,
    };
    await writeFile(optionsFile, JSON.stringify(options, null, 2));

    const { pid, result } = await start();
    assert.equal(await readPid(), pid);
    assert.ok(alive(pid));
    assert.match(result.stdout, /log: .*server\.log/);
  });

  test('a second start of the same instance is refused while the server lives', async () => {
    const pid = await readPid();
    for (const args of [
      ['start', '-P', String(port)],
      ['start', '-F', '-H', '127.0.0.1', '-P', String(await freePort())],
    ]) {
      const r = await run(args);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`already running for instance 'default' \\(pid ${pid}\\)`));
    }
    assert.equal(await readPid(), pid);
  });

  test('another instance on a port in use gets a clear message', async () => {
    const r = await run(['start', '-I', 'other', '-H', '127.0.0.1', '-P', String(port)]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is already in use`));
  });

  test('the SDK exports; status shows accepted rows pending per table', async () => {
    const sent = await send(port, { SEND_SERVICE: 'shop', SEND_LOGS: '5', SEND_PREFIX: 'first' });
    assert.equal(sent.code, 0, sent.stdout + sent.stderr);
    // 2 spans, 1 span event, 5 logs, 1 sum point, 1 histogram point.
    let status: RunResult | undefined;
    await waitFor('the rows to reach the aggregator', async () => {
      // No --port: status finds the instance's server where start recorded it.
      status = await run(['status', '-T', '2']);
      return /accepted\s+│ 10 /.test(status.stdout) && /queue\s+│ 0 \//.test(status.stdout);
    });
    assert.equal(status!.code, 0, status!.stderr);
    assert.match(status!.stdout, /│ logs\s+│\s+5 │/);
    assert.match(status!.stdout, /│ spans\s+│\s+2 │/);
    assert.match(status!.stdout, /│ span_events\s+│\s+1 │/);
    assert.match(status!.stdout, /rows written\s+│ 0 /);
    assert.match(status!.stdout, new RegExp(`pid\\s+│ ${await readPid()} `));
    assert.match(status!.stdout, new RegExp(`^otelake 0\\.1\\.1 at http://127\\.0\\.0\\.1:${port}: ok`));
    // The server panel reads the /healthz fields by their names.
    assert.match(status!.stdout, /instance\s+│ default /);
    assert.match(status!.stdout, /uptime\s+│ \d+ (s|min)/);
    assert.match(status!.stdout, /memory \(rss\)\s+│ \d+(\.\d)? MiB/);
  });

  test('stop flushes: the pending rows are all in the tables afterwards', async () => {
    const pid = await readPid();
    const r = await run(['stop']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`stopping otelake \\(pid ${pid} at http://127\\.0\\.0\\.1:${port}\\)[\\s\\S]*stopped`),
    );
    assert.equal(alive(pid), false);
    await assert.rejects(stat(pidFile), { code: 'ENOENT' });
    await assert.rejects(stat(addressFile), { code: 'ENOENT' });

    const logs = await run(['view', '-t', 'logs']);
    assert.equal(logs.code, 0, logs.stderr);
    assert.deepEqual(bodies(logs.stdout, 'first'), ['first 4', 'first 3', 'first 2', 'first 1', 'first 0']);
    assert.match(logs.stdout, /event_ts.*service_name.*severity_text.*body/);
    assert.match(logs.stdout, /5 newest rows of logs/);

    const spans = await run(['view', '-t', 'spans']);
    assert.match(spans.stdout, /GET \/checkout/);
    assert.match(spans.stdout, /SELECT carts/);
    const events = await run(['view', '-t', 'span_events']);
    assert.match(events.stdout, /cart\.loaded/);
    const hist = await run(['view', '-t', 'metrics_hist']);
    assert.match(hist.stdout, /checkout\.duration/);
  });

  test('view: -n, repeated --select, dates', async () => {
    const two = await run(['view', '-t', 'logs', '-n', '2', '-s', 'body', '--select', 'severity_text']);
    assert.equal(two.code, 0, two.stderr);
    assert.deepEqual(bodies(two.stdout, 'first'), ['first 4', 'first 3']);
    const header = two.stdout.split('\n').find((l) => l.includes('body'))!;
    assert.match(header, /│ body\s+│ severity_text\s+│/);
    assert.doesNotMatch(two.stdout, /event_ts|service_name/);
    assert.match(two.stdout, /│ first 4\s+│ INFO\s+│/);
    assert.match(two.stdout, /│ first 3\s+│ ERROR\s+│/);

    const inRange = await run(['view', '-t', 'logs', '-s', 'body', '--date-from', today, '--date-to', today]);
    assert.equal(bodies(inRange.stdout, 'first').length, 5);
    const before = await run(['view', '-t', 'logs', '--date-to', yesterday]);
    assert.equal(before.code, 0);
    assert.match(before.stdout, /no rows in logs from the first day to \d{4}-\d{2}-\d{2}/);

    const badColumn = await run(['view', '-t', 'spans', '-s', 'body']);
    assert.equal(badColumn.code, 2);
    assert.match(badColumn.stderr, /unknown column.*body.*spans/);
    const noSuchColumn = await run(['view', '-t', 'logs', '-s', 'nope']);
    assert.equal(noSuchColumn.code, 2);
    assert.match(
      noSuchColumn.stderr,
      /unknown column nope in --select \(the logs table's columns: project_id, .*body/,
    );
  });

  test('after kill -9 the stale pidfile is replaced by the next start', async () => {
    // Back to fast flushes, so that rows become readable while the server runs.
    const optionsFile = join(dir.path, 'svc_data', 'default', 'configs', 'options.json');
    const options = JSON.parse(await readFile(optionsFile, 'utf8'));
    options.aggregator_config = { ...options.aggregator_config, max_age_s: 0.2, min_batch_rows: 1 };
    await writeFile(optionsFile, JSON.stringify(options, null, 2));

    const crashed = (await start()).pid;
    process.kill(crashed, 'SIGKILL');
    await waitFor('the server to die', () => !alive(crashed));
    assert.equal(await readPid(), crashed, 'a killed server cannot remove its pidfile');

    const { pid, result } = await start();
    assert.notEqual(pid, crashed);
    assert.match(result.stderr, new RegExp(`removed a stale pidfile \\(process ${crashed}\\)`));
    assert.equal(await readPid(), pid);
  });

  test('view reads while the server writes the same instance', async () => {
    const sent = await send(port, { SEND_SERVICE: 'shop', SEND_LOGS: '3', SEND_PREFIX: 'second' });
    assert.equal(sent.code, 0, sent.stdout + sent.stderr);
    let latest: RunResult | undefined;
    await waitFor('the second batch to be readable', async () => {
      latest = await run(['view', '-t', 'logs', '-n', '20', '-s', 'body']);
      return bodies(latest.stdout, 'second').length === 3;
    });
    assert.deepEqual(bodies(latest!.stdout, 'second'), ['second 2', 'second 1', 'second 0']);
    assert.equal(bodies(latest!.stdout, 'first').length, 5, 'rows written before the crash are kept');
    // The reader took no writer's role: the server still runs and still accepts.
    const pid = await readPid();
    assert.ok(alive(pid));
    const status = await run(['status', '-P', String(port)]);
    assert.equal(status.code, 0);
    assert.match(status.stdout, /accepted\s+│ 8 /);
  });

  test('stop, then status reports the server unreachable', async () => {
    const pid = await readPid();
    assert.equal((await run(['stop'])).code, 0);
    assert.equal(alive(pid), false);
    const status = await run(['status', '-P', String(port)]);
    assert.equal(status.code, 1);
    assert.match(status.stderr, /connection refused/);
    // From the instance alone: no server recorded any more, so status looks where the saved
    // server_config says the instance's server would listen.
    const optionsFile = join(dir.path, 'svc_data', 'default', 'configs', 'options.json');
    const options = JSON.parse(await readFile(optionsFile, 'utf8'));
    options.server_config = { ...options.server_config, host: '0.0.0.0', port };
    await writeFile(optionsFile, JSON.stringify(options, null, 2));
    const byInstance = await run(['status', '-T', '1']);
    assert.equal(byInstance.code, 1);
    assert.match(
      byInstance.stderr,
      new RegExp(
        `at http://127\\.0\\.0\\.1:${port}: connection refused .*no server of instance 'default' runs from`,
      ),
    );
    const again = await run(['stop']);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /no server is running/);
  });
});
