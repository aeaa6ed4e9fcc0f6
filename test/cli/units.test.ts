import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InvalidArgumentError } from 'commander';
import stringWidth from 'string-width';
import {
  collectColumns,
  parseDay,
  parseHost,
  parseInstanceId,
  parsePort,
  parsePositiveInt,
  parseSeconds,
} from '../../src/cli/args.ts';
import { bindError } from '../../src/cli/bind.ts';
import { baseUrl, reachableHost } from '../../src/cli/http.ts';
import { claimPidFile, processAlive, readPid, removePidFile } from '../../src/cli/pidfile.ts';
import { fitColumns, grid, oneLine, truncate } from '../../src/cli/render.ts';
import { duration, renderHealth } from '../../src/cli/status.ts';
import { leftRows } from '../../src/cli/stop.ts';
import { cellText, DEFAULT_COLUMNS, renderRows } from '../../src/cli/view.ts';
import { SCHEMAS, TABLE_NAMES } from '../../src/schema/tables.ts';
import { killQuietly, tempDir } from './helpers.ts';

describe('flag parsers', () => {
  test('ports are 1..65535 integers', () => {
    assert.equal(parsePort('4318'), 4318);
    assert.equal(parsePort('65535'), 65535);
    for (const bad of ['0', '65536', '-1', '12.5', 'abc', '', '1e3']) {
      assert.throws(() => parsePort(bad), InvalidArgumentError, bad);
    }
  });
  test('row counts are positive integers', () => {
    assert.equal(parsePositiveInt('25'), 25);
    for (const bad of ['0', '-3', '2.5', 'x'])
      assert.throws(() => parsePositiveInt(bad), InvalidArgumentError);
  });
  test('timeouts are positive seconds, fractions allowed', () => {
    assert.equal(parseSeconds('0.25'), 0.25);
    assert.equal(parseSeconds('5'), 5);
    // A longer wait overflows Node's timers, which then fire at once.
    assert.equal(parseSeconds('2147483'), 2147483);
    for (const bad of ['0', '-1', 'soon', '', 'Infinity', '3000000'])
      assert.throws(() => parseSeconds(bad), InvalidArgumentError);
  });
  test('hosts are names or addresses, without a port', () => {
    for (const good of ['127.0.0.1', '0.0.0.0', '::1', '[::1]', 'localhost', 'otelake.example.com'])
      assert.equal(parseHost(good), good);
    for (const bad of ['127.0.0.1:80', 'a:b:c', '[::1', '#x', 'not a host', '', 'http://x'])
      assert.throws(() => parseHost(bad), InvalidArgumentError, bad);
  });
  test('days must be real calendar days', () => {
    assert.equal(parseDay('2024-02-29'), '2024-02-29');
    for (const bad of ['2023-02-29', '2024-13-01', '24-01-01', 'today']) {
      assert.throws(() => parseDay(bad), InvalidArgumentError, bad);
    }
  });
  test('instance ids cannot escape the directory', () => {
    assert.equal(parseInstanceId('prod-1'), 'prod-1');
    for (const bad of ['..', '../x', 'a/b', '.hidden', ''])
      assert.throws(() => parseInstanceId(bad), InvalidArgumentError);
  });
  test('--select accumulates repeated and comma-separated columns', () => {
    let acc = collectColumns('event_ts', undefined);
    acc = collectColumns('body, severity_text', acc);
    assert.deepEqual(acc, ['event_ts', 'body', 'severity_text']);
    assert.throws(() => collectColumns(' , ', acc), InvalidArgumentError);
  });
});

describe('server addresses', () => {
  test('a wildcard bind is probed over loopback, IPv6 gets brackets', () => {
    assert.equal(reachableHost('0.0.0.0'), '127.0.0.1');
    assert.equal(reachableHost('::'), '::1');
    assert.equal(reachableHost('10.1.2.3'), '10.1.2.3');
    assert.equal(baseUrl('::1', 4318), 'http://[::1]:4318');
    assert.equal(baseUrl('[::1]', 80), 'http://[::1]:80');
    assert.equal(baseUrl('localhost', 4318), 'http://localhost:4318');
  });
});

describe('pidfile', () => {
  let dir: { path: string; remove: () => Promise<void> };
  before(async () => {
    dir = await tempDir('pid');
  });
  after(() => dir.remove());

  test('claim is exclusive while the holder lives, and a stale pidfile is taken over', async () => {
    const file = join(dir.path, 'sub', 'otelake.pid');
    assert.deepEqual(await claimPidFile(file, process.pid), { claimed: true });
    assert.equal(await readPid(file), process.pid);
    // A live process that looks like otelake holds it: refused.
    const holder = spawn(
      process.execPath,
      ['-e', 'setTimeout(() => {}, 60000)', '/opt/otelake/bin/otelake.js'],
      {
        stdio: 'ignore',
      },
    );
    try {
      await writeFile(file, `${holder.pid}\n`);
      assert.deepEqual(await claimPidFile(file, 424242), { claimed: false, runningPid: holder.pid });
      assert.equal(processAlive(holder.pid!), true);
    } finally {
      killQuietly(holder);
      await new Promise((r) => holder.once('exit', r));
    }
    // The holder died: the pidfile is stale and gets replaced.
    assert.equal(processAlive(holder.pid!), false);
    assert.deepEqual(await claimPidFile(file, 424242), { claimed: true, stalePid: holder.pid });
    assert.equal((await readFile(file, 'utf8')).trim(), '424242');
  });

  test('a process that is not otelake does not hold the pidfile (pid reuse after a crash)', async (t) => {
    const file = join(dir.path, 'reuse.pid');
    const stranger = spawn('sleep', ['60'], { stdio: 'ignore' });
    t.after(() => killQuietly(stranger));
    await writeFile(file, `${stranger.pid}\n`);
    const procfs = await readFile(`/proc/${stranger.pid}/cmdline`, 'utf8').then(
      () => true,
      () => false,
    );
    // Without procfs the only evidence is that the process exists.
    assert.equal(processAlive(stranger.pid!), !procfs);
  });

  test('a process whose name only contains "otelake" is not otelake; its launcher or CLI entry is', async (t) => {
    const run = (args: string[]) => {
      const c = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)', ...args], { stdio: 'ignore' });
      t.after(() => killQuietly(c));
      return c.pid!;
    };
    const procfs = await readFile(`/proc/${process.pid}/cmdline`).then(
      () => true,
      () => false,
    );
    if (!procfs) {
      t.skip('no procfs: the command line cannot be read here');
      return;
    }
    assert.equal(processAlive(run(['otelake-notes'])), false);
    assert.equal(processAlive(run(['/home/u/otelake-data/notes.txt'])), false);
    assert.equal(processAlive(run(['/usr/local/bin/otelake', 'start'])), true);
    assert.equal(processAlive(run(['/srv/app/node_modules/otelake/bin/otelake.js', 'start'])), true);
    assert.equal(processAlive(run(['/srv/otelake/src/cli/main.ts', 'start'])), true);
  });

  test('a server that exited but was not yet collected by its parent (a zombie) is not alive', async (t) => {
    // `sh` starts an otelake-named child, then becomes `sleep`, which never collects it.
    const parent = spawn(
      'sh',
      ['-c', `${JSON.stringify(process.execPath)} -e 0 /opt/otelake/bin/otelake.js & echo $!; exec sleep 60`],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    t.after(() => killQuietly(parent));
    const pid = Number(
      await new Promise<string>((r) => parent.stdout!.once('data', (c: Buffer) => r(String(c)))),
    );
    const state = async () => {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
      return stat === null ? null : stat[stat.lastIndexOf(')') + 2];
    };
    const deadline = Date.now() + 10_000;
    while ((await state()) !== 'Z' && (await state()) !== null && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    if ((await state()) === null) {
      t.skip('no procfs: nothing tells a zombie from a live process here');
      return;
    }
    assert.equal(await state(), 'Z');
    assert.equal(processAlive(pid), false);
  });

  test('removal only removes our own pid, a garbled pidfile reads as stale', async () => {
    const file = join(dir.path, 'own.pid');
    await writeFile(file, '12345\n');
    assert.equal(await removePidFile(file, 999), false);
    assert.equal(await readPid(file), 12345);
    assert.equal(await removePidFile(file, 12345), true);
    assert.equal(await readPid(file), undefined);
    await writeFile(file, 'garbage');
    assert.equal(await readPid(file), 0);
  });
});

describe('rendering', () => {
  test('cells stay on one line and are truncated with an ellipsis', () => {
    assert.equal(oneLine('a\nb\tc\u001b'), 'a\\nb\\tc\\x1b');
    // C1 controls (CSI, OSC, ST) and bidi overrides and isolates, which terminals act on or reorder by.
    assert.equal(oneLine('\u009b31mRED\u009d0;t\u009c'), '\\x9b31mRED\\x9d0;t\\x9c');
    assert.equal(oneLine('ab\u202ecd\u2066e\u2069'), 'ab\\u202ecd\\u2066e\\u2069');
    assert.equal(oneLine('é日本\u00a0'), 'é日本\u00a0', 'printable text as it is');
    assert.equal(truncate('abcdef', 4), 'abc…');
    assert.equal(truncate('abc', 4), 'abc');
    // Widths are terminal columns: CJK and emoji take two.
    assert.equal(truncate('日本語', 6), '日本語');
    assert.equal(truncate('日本語x', 6), '日本…');
    assert.equal(truncate('a🎉b', 4), 'a🎉b');
  });

  test('a grid sizes columns by terminal width: wide characters are not cut when they fit', () => {
    const body = 'zoë unicode 日本語 🎉 declined';
    const text = grid(['body', 'project_id'], [[body, 'alpha']], 120)!;
    assert.match(text, /zoë unicode 日本語 🎉 declined/);
    for (const width of [30, 40]) {
      const cut = grid(['body', 'project_id'], [[body.repeat(3), 'alpha']], width)!;
      for (const line of cut.split('\n'))
        assert.ok(stringWidth(line) <= width, `${stringWidth(line)} > ${width}: ${line}`);
      assert.match(cut, /…/);
    }
  });

  test('columns that fit keep their width; the widest are cut to a common cap; too many give null', () => {
    assert.deepEqual(fitColumns([5, 10], [5, 5], 80), [5, 10]);
    const w = fitColumns([26, 200, 8], [8, 4, 6], 80)!;
    assert.equal(w[0], 26);
    assert.equal(w[2], 8);
    assert.equal(w.reduce((a, b) => a + b, 0) + 3 * 3 + 1, 80);
    // Two wide columns are cut to the same width.
    assert.deepEqual(fitColumns([50, 50, 4], [4, 4, 4], 71), [29, 28, 4]);
    assert.equal(fitColumns(Array(20).fill(30), Array(20).fill(10), 60), null);
  });

  test('kept columns (timestamps) are cut only when the others cannot give enough', () => {
    // Without keep the 27-wide timestamp would be cut like the 30-wide column.
    assert.deepEqual(fitColumns([27, 30, 5], [8, 4, 5], 60), [23, 22, 5]);
    assert.deepEqual(fitColumns([27, 30, 5], [8, 4, 5], 60, [true, false, false]), [27, 18, 5]);
    assert.deepEqual(fitColumns([27, 20, 20], [8, 4, 4], 60), [17, 17, 16]);
    assert.deepEqual(fitColumns([27, 20, 20], [8, 4, 4], 60, [true]), [27, 12, 11]);
    // Not enough even so: the kept column gives way too.
    const w = fitColumns([27, 20, 20], [8, 6, 6], 30, [true])!;
    assert.equal(w.reduce((a, b) => a + b, 0) + 10, 30);
    assert.ok(w[0]! < 27);
  });

  test('fitted widths always fill the table exactly and respect the minimums', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let k = 0; k < 500; k++) {
      const n = 1 + rand(9);
      const natural = Array.from({ length: n }, () => 1 + rand(80));
      const header = Array.from({ length: n }, () => 1 + rand(15));
      const keep = Array.from({ length: n }, () => rand(4) === 0);
      const total = 20 + rand(200);
      const w = fitColumns(natural, header, total, keep);
      const budget = total - (3 * n + 1);
      if (natural.reduce((a, b) => a + b, 0) <= budget) {
        assert.deepEqual(w, natural);
        continue;
      }
      if (w === null) continue;
      assert.equal(
        w.reduce((a, b) => a + b, 0),
        budget,
        JSON.stringify({ natural, header, total, w }),
      );
      w.forEach((x, i) => {
        assert.ok(x <= natural[i]!);
        assert.ok(x >= Math.min(natural[i]!, 6));
      });
    }
  });

  test('a grid never exceeds the width', () => {
    const long = 'x'.repeat(500);
    for (const width of [40, 80, 133]) {
      const text = grid(['event_ts', 'body'], [['2024-01-01T00:00:00.000000Z', long]], width)!;
      for (const line of text.split('\n')) assert.ok([...line].length <= width, `${line.length} > ${width}`);
      assert.match(text, /…/);
    }
  });

  test('rows render as a grid, or as one panel per row when the columns cannot fit', () => {
    const rows = [
      {
        event_ts: '2024-06-10T08:00:00.123456Z',
        service_name: 'checkout',
        body: 'paid\nok',
        severity_text: 'INFO',
      },
    ];
    const wide = renderRows('logs', ['event_ts', 'service_name', 'severity_text', 'body'], rows, 120);
    assert.deepEqual(wide.hidden, []);
    assert.match(wide.text, /event_ts.*service_name.*severity_text.*body/);
    assert.match(wide.text, /checkout/);
    assert.match(wide.text, /paid\\nok/);
    const all = SCHEMAS.logs.columns.map((c) => c.name);
    const narrow = renderRows('logs', all, rows, 60);
    assert.match(narrow.text, /row 1/);
    assert.match(narrow.text, /│ body\s+│ paid\\nok/);
  });

  test('on a narrow terminal, empty and then optional default columns are left out', () => {
    const rows = [
      {
        event_ts: '2024-06-10T08:00:00.123456Z',
        service_name: 'checkout',
        severity_text: 'INFO',
        body: 'payment accepted',
        trace_id: '',
        span_id: 'aaaaaaaaaaaaaaaa',
      },
    ];
    const columns = ['event_ts', 'service_name', 'severity_text', 'body', 'trace_id', 'span_id'];
    const wide = renderRows('logs', columns, rows, 160, ['span_id', 'trace_id']);
    assert.deepEqual(wide.hidden, []);
    const mid = renderRows('logs', columns, rows, 100, ['span_id', 'trace_id']);
    assert.deepEqual(mid.hidden, ['trace_id'], 'the empty column goes first');
    assert.match(mid.text, /aaaaaaaaaaaaaaaa/);
    const narrow = renderRows('logs', columns, rows, 85, ['span_id', 'trace_id']);
    assert.deepEqual(narrow.hidden, ['trace_id', 'span_id']);
    assert.match(narrow.text, /2024-06-10T08:00:00\.123456Z/, 'the timestamp is not cut');
    assert.match(narrow.text, /payment accepted/);
    for (const line of narrow.text.split('\n')) assert.ok([...line].length <= 85);
    // Narrower still: hiding stops at the optional columns, then cells are cut (never the time first).
    const tight = renderRows('logs', columns, rows, 70, ['span_id', 'trace_id']);
    assert.deepEqual(tight.hidden, ['trace_id', 'span_id']);
    assert.match(tight.text, /2024-06-10T08:00:00\.123456Z/);
    assert.match(tight.text, /…/);
    for (const line of tight.text.split('\n')) assert.ok([...line].length <= 70);
  });

  test('default columns exist in their tables', () => {
    for (const t of TABLE_NAMES)
      for (const c of DEFAULT_COLUMNS[t]) assert.ok(SCHEMAS[t].byName.has(c), `${t}.${c}`);
  });

  test('cell text of each JSON value', () => {
    assert.equal(cellText(null), '');
    assert.equal(cellText('9007199254740993'), '9007199254740993');
    assert.equal(cellText(1.5), '1.5');
    assert.equal(cellText(false), 'false');
    assert.equal(cellText(['1', '2']), '["1","2"]');
  });

  test('bind errors: one clear message per cause, none for other errors', () => {
    const err = (code: string) => Object.assign(new Error(code), { code });
    assert.match(bindError(err('EADDRINUSE'), 'h', 1)!.message, /^port 1 on h is already in use/);
    assert.match(bindError(err('EACCES'), 'h', 80)!.message, /^not allowed to bind port 80 on h$/);
    for (const code of ['EADDRNOTAVAIL', 'ENOTFOUND', 'EAI_AGAIN'])
      assert.match(
        bindError(err(code), 'nowhere', 1)!.message,
        /^cannot bind nowhere: no such local address$/,
      );
    assert.equal(bindError(err('ENOENT'), 'h', 1), null);
    assert.equal(bindError(new TypeError('x'), 'h', 1), null);
  });

  test('health: the server panel reads the fields /healthz sends', () => {
    const text = renderHealth(
      {
        status: 'ok',
        version: '0.1.1',
        instance_id: 'prod',
        pid: 4242,
        uptime_s: 125,
        memory: { rss: 3 * 1024 * 1024 },
        auth: { enabled: true, required: false },
      },
      'http://127.0.0.1:4318',
      Date.now(),
      100,
    );
    assert.match(text, /auth\s+│ on \(tokens\) /);
    assert.match(
      renderHealth({ status: 'ok', auth: { enabled: false } }, 'http://127.0.0.1:4318', Date.now(), 100),
      /auth\s+│ off /,
    );
    assert.match(text, /instance\s+│ prod /);
    assert.match(text, /pid\s+│ 4242 /);
    assert.match(text, /uptime\s+│ 2 min 5 s /);
    assert.match(text, /memory \(rss\)\s+│ 3\.0 MiB /);
  });

  test('health: missing S3 settings are named with their environment variables', () => {
    const text = renderHealth(
      {
        status: 'ok',
        shipper: { state: 'not_configured', configured: false, missing: ['bucket', 'region'] },
      },
      'http://127.0.0.1:4318',
      Date.now(),
      200,
    );
    assert.match(
      text,
      /configured\s+│ no: missing bucket \(S3_BUCKET\), region \(CLOUD_REGION or S3_REGION\)/,
    );
  });

  test("stop: the server's last line when its flush left rows unwritten, else nothing", async () => {
    const dir = await tempDir('stop-line');
    try {
      const log = join(dir.path, 'server.log');
      const line = (msg: string) => `${JSON.stringify({ level: 40, time: 1, msg })}\n`;
      await writeFile(
        log,
        line('SIGTERM: stopping') + line('stopped; 412 accepted rows are not written yet: ...'),
      );
      assert.equal(await leftRows(log), 'stopped; 412 accepted rows are not written yet: ...');
      await writeFile(log, line('stopped; 3 accepted rows ...') + line('stopped cleanly'));
      assert.equal(await leftRows(log), null, 'only the last line counts');
      assert.equal(await leftRows(join(dir.path, 'none.log')), null);
    } finally {
      await dir.remove();
    }
  });

  test('durations read naturally', () => {
    assert.equal(duration(5), '5 s');
    assert.equal(duration(125), '2 min 5 s');
    assert.equal(duration(3 * 3600 + 60), '3 h 1 min');
    assert.equal(duration(3 * 86400), '3 d 0 h');
  });

  test('health: queue fill, drops and rejections by reason, pending rows per table, last error', () => {
    const now = Date.parse('2024-06-10T08:00:10Z');
    const text = renderHealth(
      {
        status: 'ok',
        version: '0.1.1',
        producer: {
          queue_depth: 512,
          queue_capacity: 2048,
          drop_policy: 'drop_newest',
          blocked_producers: 0,
          accepted: 12345,
          rejected: { missing_required: 3 },
          dropped: { queue_full: 7 },
        },
        aggregator: {
          pending_rows: { spans: 4, logs: 9 },
          writes_in_flight: 1,
          batches_written: 17,
          rows_written: 12000,
          rows_failed: 0,
          last_flush_at: '2024-06-10T08:00:05Z',
          last_error: { at: '2024-06-10T08:00:00Z', message: 'disk full' },
        },
      },
      'http://127.0.0.1:4318',
      now,
      100,
    );
    assert.match(text, /512 \/ 2,048 \(25 %\)/);
    assert.match(text, /accepted\s+│ 12,345/);
    assert.match(text, /rejected\s+│ 3: missing_required 3/);
    assert.match(text, /dropped\s+│ 7: queue_full 7/);
    assert.match(text, /│ logs\s+│\s+9 │/);
    assert.match(text, /│ metrics_hist\s+│\s+0 │/);
    assert.match(text, /last flush\s+│ 2024-06-10T08:00:05Z \(5 s ago\)/);
    assert.match(text, /disk full/);
  });
});
