import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SCHEMAS } from '../../src/schema/tables.ts';
import { normalizeRow, RowNormalizer, type ValidationSettings } from '../../src/schema/validate.ts';

const settings: ValidationSettings = {
  validateRequired: true,
  validateTypes: true,
  normalizeServiceName: true,
  defaultServiceName: 'unknown_service',
  strictColumns: true,
};

const ok = (row: unknown, s = settings) => {
  const r = normalizeRow(SCHEMAS.logs, row, s);
  assert.ok(r.ok, `expected ok, got ${r.ok ? '' : r.reason}`);
  return r.row;
};
const reason = (row: unknown, s = settings, table = SCHEMAS.logs) => {
  const r = normalizeRow(table, row, s);
  assert.equal(r.ok, false);
  return r.ok ? '' : r.reason;
};

describe('normalizeRow', () => {
  it('accepts times as bigint, number and decimal string, exactly', () => {
    const big = 1_763_700_000_123_456_789n;
    for (const t of [big, big.toString(), ` ${big} `]) {
      const row = ok({ project_id: 'p', time_unix_nano: t });
      assert.equal(row['time_unix_nano'], big);
      assert.equal(row['event_ts'], 1_763_700_000_123_456n);
    }
    assert.equal(ok({ project_id: 'p', time_unix_nano: 5_000 })['time_unix_nano'], 5_000n);
  });

  it('takes numbers beyond 2^53 as they are, and rejects values outside int64', () => {
    assert.equal(ok({ project_id: 'p', time_unix_nano: 2 ** 60 })['time_unix_nano'], 2n ** 60n);
    assert.equal(reason({ project_id: 'p', time_unix_nano: 2 ** 64 }), 'out_of_range:time_unix_nano');
    assert.equal(
      reason({ project_id: 'p', time_unix_nano: (2n ** 63n).toString() }),
      'out_of_range:time_unix_nano',
    );
    assert.equal(reason({ project_id: 'p', time_unix_nano: 1.5 }), 'invalid_type:time_unix_nano');
    assert.equal(reason({ project_id: 'p', time_unix_nano: 'soon' }), 'invalid_type:time_unix_nano');
  });

  it('checks required fields with stable reasons', () => {
    assert.equal(reason({ time_unix_nano: 1n }), 'missing_required:project_id');
    assert.equal(reason({ project_id: '', time_unix_nano: 1n }), 'missing_required:project_id');
    assert.equal(reason({ project_id: 'p' }), 'missing_required:time_unix_nano');
    assert.equal(reason('not a row'), 'not_an_object');
    assert.equal(reason(null), 'not_an_object');
  });

  it("holds a row object's project id to the rule of X-Project-Id (the library's rows)", () => {
    for (const bad of ['../../etc', 'has space', 'a..b', 'p'.repeat(129), '-lead'])
      assert.equal(reason({ project_id: bad, time_unix_nano: 1n }), 'invalid_value:project_id', bad);
    for (const good of ['p', 'shop-1', 'a.b_c', 'p'.repeat(128)])
      assert.equal(ok({ project_id: good, time_unix_nano: 1n })['project_id'], good);
  });

  it('with validate_required off, still needs a project and something to order by', () => {
    const loose = { ...settings, validateRequired: false };
    const row = ok({ project_id: 'p', observed_time_unix_nano: 7_000n }, loose);
    assert.equal(row['time_unix_nano'], null);
    assert.equal(row['event_ts'], 7n);
    assert.equal(reason({ project_id: 'p' }, loose, SCHEMAS.spans), 'missing_required:event_ts');
    assert.equal(reason({ time_unix_nano: 1n }, loose), 'missing_required:project_id');
  });

  it('stamps a log without an observed time with its arrival, which orders a log without any time', () => {
    const loose = { ...settings, validateRequired: false };
    const n = new RowNormalizer(SCHEMAS.logs, loose, () => 1_763_700_000_123);
    const timeless = n.normalize({ project_id: 'p', body: 'no time at all' });
    assert.ok(Array.isArray(timeless));
    const row = n.toRow(timeless);
    assert.equal(row['observed_time_unix_nano'], 1_763_700_000_123_000_000n);
    assert.equal(row['event_ts'], 1_763_700_000_123_000n);
    const sent = n.toRow(
      n.normalize({ project_id: 'p', time_unix_nano: 5_000n, observed_time_unix_nano: 0n }) as unknown[],
    );
    assert.equal(sent['observed_time_unix_nano'], 1_763_700_000_123_000_000n, '0 is OTLP for unset');
    assert.equal(sent['event_ts'], 5n, 'the record time still orders it');
  });

  it('type checks integers, doubles and booleans', () => {
    assert.equal(
      reason({ project_id: 'p', time_unix_nano: 1n, severity_number: 'high' }),
      'invalid_type:severity_number',
    );
    assert.equal(
      reason({ project_id: 'p', time_unix_nano: 1n, severity_number: 2 ** 31 }),
      'out_of_range:severity_number',
    );
    assert.equal(ok({ project_id: 'p', time_unix_nano: 1n, severity_number: '17' })['severity_number'], 17);
    const m = normalizeRow(
      SCHEMAS.metrics_points,
      { project_id: 'p', time_unix_nano: 1n, value_double: 'NaN', is_monotonic: 'yes' },
      settings,
    );
    assert.deepEqual(m, { ok: false, reason: 'invalid_type:is_monotonic' });
  });

  it('with validate_types off, an unconvertible value becomes null instead of failing the row', () => {
    const loose = { ...settings, validateTypes: false };
    const row = ok({ project_id: 'p', time_unix_nano: 1n, severity_number: 'high' }, loose);
    assert.equal(row['severity_number'], null);
  });

  it('applies and normalizes the service name', () => {
    assert.equal(ok({ project_id: 'p', time_unix_nano: 1n })['service_name'], 'unknown_service');
    assert.equal(ok({ project_id: 'p', time_unix_nano: 1n, service_name: '  api  ' })['service_name'], 'api');
    assert.equal(
      ok({ project_id: 'p', time_unix_nano: 1n, service_name: '   ' })['service_name'],
      'unknown_service',
    );
    const raw = { ...settings, normalizeServiceName: false };
    assert.equal(
      ok({ project_id: 'p', time_unix_nano: 1n, service_name: ' api ' }, raw)['service_name'],
      ' api ',
    );
  });

  it('uses the observed time for event_ts when the log time is 0', () => {
    const row = ok({ project_id: 'p', time_unix_nano: 0n, observed_time_unix_nano: 9_999_000n });
    assert.equal(row['event_ts'], 9_999n);
  });

  it('serializes object attributes as JSON, keeping int64 exact', () => {
    const row = ok({ project_id: 'p', time_unix_nano: 1n, attributes: { a: 1, big: 2n ** 62n, s: 'x' } });
    assert.equal(row['attributes'], `{"a":1,"big":"${2n ** 62n}","s":"x"}`);
  });

  it('rejects unknown columns with strict_df and ignores them without', () => {
    assert.equal(reason({ project_id: 'p', time_unix_nano: 1n, colour: 'red' }), 'unknown_column:colour');
    const row = ok(
      { project_id: 'p', time_unix_nano: 1n, colour: 'red' },
      { ...settings, strictColumns: false },
    );
    assert.equal('colour' in row, false);
  });

  it('computes span duration and coerces lists', () => {
    const r = normalizeRow(
      SCHEMAS.spans,
      { project_id: 'p', start_time_unix_nano: 1_000n, end_time_unix_nano: 4_500n },
      settings,
    );
    assert.ok(r.ok);
    assert.equal(r.row['duration_ns'], 3_500n);
    // Start and end near both ends of int64: the difference does not fit the column.
    const extremes = { project_id: 'p', start_time_unix_nano: -(2n ** 63n), end_time_unix_nano: 1n };
    const wide = normalizeRow(SCHEMAS.spans, extremes, settings);
    assert.deepEqual(wide, { ok: false, reason: 'out_of_range:duration_ns' });
    const lenient = normalizeRow(SCHEMAS.spans, extremes, { ...settings, validateTypes: false });
    assert.ok(lenient.ok);
    assert.equal(lenient.row['duration_ns'], null);
    const h = normalizeRow(
      SCHEMAS.metrics_hist,
      {
        project_id: 'p',
        time_unix_nano: 1n,
        bucket_counts: [1, '2', 3n],
        explicit_bounds: [0.5, 'Infinity'],
      },
      settings,
    );
    assert.ok(h.ok);
    assert.deepEqual(h.row['bucket_counts'], [1n, 2n, 3n]);
    assert.deepEqual(h.row['explicit_bounds'], [0.5, Infinity]);
    assert.equal(
      reason({ project_id: 'p', time_unix_nano: 1n, bucket_counts: [1.5] }, settings, SCHEMAS.metrics_hist),
      'invalid_type:bucket_counts',
    );
  });
});

describe('RowNormalizer.normalizeValues', () => {
  it('holds a row given as values in column order to the rules of the same row as an object', () => {
    const rules = [
      settings,
      { ...settings, validateTypes: false, normalizeServiceName: false, validateRequired: false },
    ];
    const odd: Record<string, unknown>[] = [
      { project_id: 'p', time_unix_nano: '12', severity_number: '9', service_name: '  svc  ' },
      { project_id: 'p', time_unix_nano: 1.5 },
      { project_id: 'p', observed_time_unix_nano: 0n, severity_number: 2 ** 40 },
      { project_id: '', time_unix_nano: 1n },
      { project_id: 'p', time_unix_nano: 1n, flags: 'x', body: { a: [1n] }, service_name: '' },
      { project_id: 'p', start_time_unix_nano: -(2n ** 63n), end_time_unix_nano: 2n ** 63n - 1n },
      { project_id: 'p', time_unix_nano: 3n, bucket_counts: ['1', 2], explicit_bounds: [1, 'NaN'] },
      { project_id: 'p', time_unix_nano: 3n, bucket_counts: [1.5] },
    ];
    let rejected = 0;
    for (const table of ['logs', 'spans', 'metrics_hist'] as const) {
      const schema = SCHEMAS[table];
      const names = schema.columns.map((c) => c.name);
      for (const s of rules) {
        const n = new RowNormalizer(schema, s, () => 1_700_000_000_000);
        for (const row of odd) {
          const known = Object.fromEntries(Object.entries(row).filter(([k]) => schema.byName.has(k)));
          const want = n.normalize(known);
          const values = names.map((name) => known[name] ?? null);
          const reason = n.normalizeValues(values);
          if (typeof want === 'string') {
            assert.equal(
              reason,
              want,
              `${table}: ${JSON.stringify(known, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v))}`,
            );
            rejected++;
          } else assert.deepEqual([reason, values], [null, want], table);
        }
      }
    }
    assert.ok(rejected >= 5, `${rejected} rejections compared`);
  });
});
