import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { daysBetween, InstanceLayout, validateDay, validateInstanceId } from '../../src/storage/layout.ts';
import { defaultOptions, mergeOptions, resolveOptions, saveOptions } from '../../src/storage/options.ts';

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
