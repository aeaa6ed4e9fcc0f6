import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { daysBetween, InstanceLayout, validateDay, validateInstanceId } from '../../src/storage/layout.ts';
import {
  defaultOptions,
  mergeOptions,
  OptionsFileError,
  resolveOptions,
  saveOptions,
} from '../../src/storage/options.ts';

describe('options', () => {
  it('has the specification defaults', () => {
    const o = defaultOptions();
    assert.equal(o.producer_config.max_queue_size, 2048);
    assert.equal(o.producer_config.drop_policy, 'block');
    assert.equal(o.producer_config.validate_required, true);
    assert.equal(o.producer_config.validate_types, true);
    assert.equal(o.aggregator_config.max_age_s, 0.5);
    assert.equal(o.aggregator_config.min_batch_rows, 100);
    assert.equal(o.aggregator_config.max_batch_rows, 1000);
    assert.equal(o.server_config.port, 4318);
  });

  it('merges group by group and refuses unknown or invalid values', () => {
    const o = mergeOptions(defaultOptions(), {
      producer_config: { drop_policy: 'drop_oldest' },
      auto_start: false,
    });
    assert.equal(o.producer_config.drop_policy, 'drop_oldest');
    assert.equal(o.producer_config.max_queue_size, 2048);
    assert.equal(o.auto_start, false);
    assert.throws(
      () => mergeOptions(defaultOptions(), { producer_config: { queue: 1 } } as never),
      /unknown option "producer_config.queue"/,
    );
    assert.throws(() => mergeOptions(defaultOptions(), { colour: 1 } as never), /unknown option "colour"/);
    assert.throws(
      () => mergeOptions(defaultOptions(), { producer_config: { drop_policy: 'maybe' as never } }),
      /drop_policy: expected one of block, drop_newest, drop_oldest/,
    );
    assert.throws(
      () => mergeOptions(defaultOptions(), { aggregator_config: { min_batch_rows: 5000 } }),
      /min_batch_rows: must not exceed max_batch_rows/,
    );
    assert.equal(defaultOptions().server_config.decode_workers, null, 'one per core by default');
    assert.equal(
      mergeOptions(defaultOptions(), { server_config: { decode_workers: 0 } }).server_config.decode_workers,
      0,
    );
    for (const bad of [-1, 1.5, '2']) {
      assert.throws(
        () => mergeOptions(defaultOptions(), { server_config: { decode_workers: bad as never } }),
        /decode_workers: expected null \(one per core\) or an integer >= 0/,
      );
    }
  });

  it('refuses values that would start a half-working server or not save back as they were', () => {
    const refused: [unknown, RegExp][] = [
      [{ storage_config: { compact_min_files: 1 } }, /compact_min_files: expected an integer >= 2/],
      // JSON reads 1e400 as Infinity, which would be saved as null.
      [
        { producer_config: { block_timeout_s: Number.POSITIVE_INFINITY } },
        /block_timeout_s: expected 0 <= seconds <= 2147483/,
      ],
      [{ producer_config: { block_timeout_s: 3e6 } }, /block_timeout_s/],
      [
        { aggregator_config: { max_age_s: Number.POSITIVE_INFINITY } },
        /max_age_s: expected 0 < seconds <= 2147483/,
      ],
      [{ aggregator_config: { max_age_s: 0 } }, /max_age_s/],
      [{ server_config: { port: 0 } }, /port: expected 1\.\.65535/],
      [
        { server_config: { default_project_id: 'a/../b' } },
        /default_project_id "a\/..\/b": use 1-128 letters/,
      ],
      [
        { server_config: { project_max_rows_per_s: 1e-300 } },
        /project_max_rows_per_s: expected null \(no limit\) or a number >= 1/,
      ],
      [{ server_config: { host: 'not a host' } }, /host "not a host": expected a host name or IP address/],
      [{ server_config: { host: '127.0.0.1:80' } }, /host "127.0.0.1:80"/],
      // An object's built-in names are not options.
      [{ toString: 1 }, /unknown option "toString"/],
      [{ producer_config: { constructor: 5 } }, /unknown option "producer_config.constructor"/],
      [{ server_config: { hasOwnProperty: 1 } }, /unknown option "server_config.hasOwnProperty"/],
      [JSON.parse('{"__proto__": {"port": 1}}'), /unknown option "__proto__"/],
      // A whole options.json of null, false, 0 or "".
      [null, /options must be an object/],
      [false, /options must be an object/],
      [0, /options must be an object/],
      ['', /options must be an object/],
    ];
    for (const [over, message] of refused) {
      assert.throws(() => mergeOptions(defaultOptions(), over as never), message, JSON.stringify(over));
    }
    for (const host of ['0.0.0.0', '::', '[::1]', 'localhost', 'otelake.internal', 'svc_a.local']) {
      assert.equal(mergeOptions(defaultOptions(), { server_config: { host } }).server_config.host, host);
    }
    assert.equal(
      mergeOptions(defaultOptions(), { producer_config: { block_timeout_s: 2_147_483 } }).producer_config
        .block_timeout_s,
      2_147_483,
    );
  });

  it('CORS: origins as browsers send them, with at most one *; header names; a max age', () => {
    const corsOf = (server_config: object) => mergeOptions(defaultOptions(), { server_config }).server_config;
    assert.deepEqual(defaultOptions().server_config.cors_allowed_origins, [], 'off by default');
    const origins = ['*', 'https://app.example.com', 'http://localhost:3000', 'https://*.example.org'];
    assert.deepEqual(corsOf({ cors_allowed_origins: origins }).cors_allowed_origins, origins);
    assert.deepEqual(corsOf({ cors_allowed_headers: ['X-Custom', '*'] }).cors_allowed_headers, [
      'X-Custom',
      '*',
    ]);
    for (const bad of ['https://app.example.com/', 'app.example.com', 'https://*.*.example.org', '', 5]) {
      assert.throws(
        () => corsOf({ cors_allowed_origins: [bad] }),
        /cors_allowed_origins: expected a list of origins/,
        String(bad),
      );
    }
    assert.throws(() => corsOf({ cors_allowed_origins: 'https://a.example' }), /cors_allowed_origins/);
    for (const bad of ['X Custom', 'X-Custom:', '']) {
      assert.throws(() => corsOf({ cors_allowed_headers: [bad] }), /cors_allowed_headers: expected a list/);
    }
    for (const bad of [-1, 1.5, 86_401, '60']) {
      assert.throws(() => corsOf({ cors_max_age_s: bad }), /cors_max_age_s: expected an integer 0\.\.86400/);
    }
  });

  it('an options.json that cannot be read or parsed is named, on one line', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-opts-'));
    try {
      const folder = join(dir, 'folder.json');
      await mkdir(folder);
      await assert.rejects(resolveOptions(folder, undefined), (err: unknown) => {
        assert.ok(err instanceof OptionsFileError);
        assert.match(err.message, new RegExp(`^cannot read ${folder}: EISDIR`));
        return true;
      });
      const broken = join(dir, 'broken.json');
      await writeFile(broken, '{\n  "producer_config": {\n    "max_queue_size": 10,\n  }\n}\n');
      await assert.rejects(resolveOptions(broken, undefined), (err: unknown) => {
        assert.ok(err instanceof OptionsFileError);
        assert.match(err.message, new RegExp(`^${broken} is not valid JSON: `));
        assert.doesNotMatch(err.message, /\n/);
        return true;
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('persists options and a later load without options reloads and merges them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'otelake-opts-'));
    try {
      const file = join(dir, 'configs', 'options.json');
      const first = await resolveOptions(file, { aggregator_config: { max_batch_rows: 5000 } });
      await saveOptions(file, first);
      const saved = JSON.parse(await readFile(file, 'utf8'));
      assert.equal(saved.aggregator_config.max_batch_rows, 5000);
      assert.ok('producer_config' in saved && 'auto_start' in saved);
      const reloaded = await resolveOptions(file, undefined);
      assert.equal(reloaded.aggregator_config.max_batch_rows, 5000);
      const merged = await resolveOptions(file, { producer_config: { max_queue_size: 10 } });
      assert.equal(merged.aggregator_config.max_batch_rows, 5000);
      assert.equal(merged.producer_config.max_queue_size, 10);
      // A mistyped key in the saved file is named with the file to mend.
      const typo = join(dir, 'typo.json');
      await writeFile(typo, JSON.stringify({ server_config: { prot: 1 } }));
      await assert.rejects(resolveOptions(typo, undefined), (err: unknown) => {
        assert.ok(err instanceof TypeError);
        assert.equal(err.message, `${typo}: unknown option "server_config.prot"`);
        return true;
      });
      // The same options again: the file is left as it is (a start on a full disk must not fail).
      const before = await stat(file);
      await saveOptions(file, reloaded);
      assert.equal((await stat(file)).ino, before.ino, 'not replaced');
      await saveOptions(file, merged);
      assert.notEqual((await stat(file)).ino, before.ino, 'other options: replaced');
      assert.deepEqual(await readdir(join(dir, 'configs')), ['options.json'], 'no temp file left');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('layout', () => {
  it('validates days and instance ids so no path escapes the instance', () => {
    assert.equal(validateDay('2026-02-28'), '2026-02-28');
    for (const bad of ['2026-02-30', '2026-2-1', '../x', '', 20260101])
      assert.throws(() => validateDay(bad), /YYYY-MM-DD/);
    assert.equal(validateInstanceId('prod-1.a_b'), 'prod-1.a_b');
    for (const bad of ['..', '../etc', 'a/b', '', '.hidden', 'x'.repeat(200)])
      assert.throws(() => validateInstanceId(bad));
    const l = new InstanceLayout('/tmp/d', 'i');
    assert.equal(l.tableDir('2026-11-21', 'logs'), '/tmp/d/i/staging/days/2026-11-21/otel/logs');
    assert.throws(() => l.tableDir('2026-11-21', '../x' as never), /unknown table/);
    assert.deepEqual(daysBetween('2026-02-27', '2026-03-01'), ['2026-02-27', '2026-02-28', '2026-03-01']);
  });
});
