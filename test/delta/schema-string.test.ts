import assert from 'node:assert/strict';
import { test } from 'node:test';
import { deltaSchemaString, schemaFromDelta } from '../../src/delta/schema-string.ts';
import { SCHEMAS, TABLE_NAMES } from '../../src/schema/tables.ts';

type Field = { name: string; type: unknown; nullable: boolean; metadata: object };

test('schemaString lists every column in order with Delta types and nullability', () => {
  for (const name of TABLE_NAMES) {
    const schema = SCHEMAS[name];
    const parsed = JSON.parse(deltaSchemaString(schema)) as { type: string; fields: Field[] };
    assert.equal(parsed.type, 'struct');
    assert.deepEqual(
      parsed.fields.map((f) => f.name),
      schema.columns.map((c) => c.name),
    );
    for (const [i, f] of parsed.fields.entries()) {
      const col = schema.columns[i]!;
      assert.equal(f.nullable, col.nullable, f.name);
      assert.deepEqual(f.metadata, {});
    }
  }
});

test('required identity columns are not nullable, lists are arrays without null elements', () => {
  const parsed = JSON.parse(deltaSchemaString(SCHEMAS.metrics_hist)) as { fields: Field[] };
  const by = new Map(parsed.fields.map((f) => [f.name, f]));
  assert.deepEqual(by.get('project_id'), {
    name: 'project_id',
    type: 'string',
    nullable: false,
    metadata: {},
  });
  assert.deepEqual(by.get('event_ts'), {
    name: 'event_ts',
    type: 'timestamp',
    nullable: false,
    metadata: {},
  });
  assert.deepEqual(by.get('bucket_counts')!.type, {
    type: 'array',
    elementType: 'long',
    containsNull: false,
  });
  assert.deepEqual(by.get('explicit_bounds')!.type, {
    type: 'array',
    elementType: 'double',
    containsNull: false,
  });
  assert.equal(by.get('scale')!.type, 'integer');
  assert.equal(by.get('sum')!.type, 'double');
  assert.equal(by.get('count')!.type, 'long');
});

test('schemaFromDelta gives back the same columns', () => {
  for (const name of TABLE_NAMES) {
    const back = schemaFromDelta(deltaSchemaString(SCHEMAS[name]), name);
    assert.equal(back.name, name);
    assert.deepEqual(
      back.columns.map((c) => [c.name, c.type, c.nullable]),
      SCHEMAS[name].columns.map((c) => [c.name, c.type, c.nullable]),
    );
    assert.equal(deltaSchemaString(back), deltaSchemaString(SCHEMAS[name]));
  }
});

test('schemaFromDelta refuses types the engine does not write', () => {
  const s = JSON.stringify({
    type: 'struct',
    fields: [{ name: 'm', type: { type: 'map', keyType: 'string' }, nullable: true, metadata: {} }],
  });
  assert.throws(() => schemaFromDelta(s, 'x'), /unsupported Delta column type of m/);
});
