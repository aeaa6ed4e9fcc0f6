import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AddAction } from '../../src/delta/actions.ts';
import { type CheckpointContent, decodeCheckpoint } from '../../src/delta/checkpoint.ts';
import { encodeCheckpoint } from '../../src/delta/checkpoint-writer.ts';

const content: CheckpointContent = {
  protocol: { minReaderVersion: 1, minWriterVersion: 2 },
  metaData: {
    id: 'table-id',
    name: null,
    format: { provider: 'parquet', options: {} },
    schemaString: '{"type":"struct","fields":[]}',
    partitionColumns: ['a', 'b'],
    configuration: { 'delta.dataSkippingNumIndexedCols': '-1', 'delta.checkpointInterval': '100' },
    createdTime: 1_700_000_000_000,
  },
  txns: [
    { appId: 'otelake-1', version: 7, lastUpdated: 1_700_000_000_001 },
    { appId: 'otelake-2', version: 0 },
  ],
  adds: [
    {
      path: 'part-1.parquet',
      partitionValues: {},
      size: 123,
      modificationTime: 2,
      dataChange: true,
      stats: '{"numRecords":5}',
    },
    {
      path: 'dir%20x/part-2.parquet',
      partitionValues: { a: '1', b: null, ü: 'ö' },
      size: 2 ** 40,
      modificationTime: 5,
      dataChange: false,
      tags: { t: 'v' },
    },
  ],
  removes: [
    {
      path: 'old.parquet',
      deletionTimestamp: 9,
      dataChange: false,
      extendedFileMetadata: true,
      partitionValues: {},
      size: 10,
    },
    { path: 'old2.parquet', dataChange: true },
  ],
};

test('a checkpoint the engine writes reads back as its actions (maps with null values, empty maps, lists)', () => {
  const { bytes, actions } = encodeCheckpoint(content);
  assert.equal(actions, 8);
  assert.deepEqual(decodeCheckpoint(bytes), [
    { protocol: content.protocol },
    {
      metaData: {
        id: 'table-id',
        format: { provider: 'parquet', options: {} },
        schemaString: '{"type":"struct","fields":[]}',
        partitionColumns: ['a', 'b'],
        configuration: { 'delta.dataSkippingNumIndexedCols': '-1', 'delta.checkpointInterval': '100' },
        createdTime: 1_700_000_000_000,
      },
    },
    { txn: { appId: 'otelake-1', version: 7, lastUpdated: 1_700_000_000_001 } },
    { txn: { appId: 'otelake-2', version: 0 } },
    { add: content.adds[0] },
    { add: content.adds[1] },
    { remove: content.removes[0] },
    // A remove without a deletion time is stored with 0, as Delta asks for the field.
    { remove: { path: 'old2.parquet', deletionTimestamp: 0, dataChange: true } },
  ]);
});

test('many actions: every row keeps its own map entries', () => {
  const adds: AddAction[] = Array.from({ length: 5000 }, (_, i) => ({
    path: `part-${i}.parquet`,
    partitionValues:
      i % 3 === 0 ? {} : ({ k: String(i), z: i % 2 ? null : 'x' } as Record<string, string | null>),
    size: i,
    modificationTime: i * 10,
    dataChange: i % 2 === 0,
    stats: i % 5 === 0 ? null : `{"numRecords":${i}}`,
  }));
  const decoded = decodeCheckpoint(encodeCheckpoint({ ...content, txns: [], removes: [], adds }).bytes);
  const back = decoded.flatMap((a) => (a.add ? [a.add] : []));
  assert.equal(back.length, adds.length);
  assert.deepEqual(
    back,
    adds
      .map((a) => (a.stats === null ? { ...a, stats: undefined } : a))
      .map((a) => JSON.parse(JSON.stringify(a))),
  );
});
