// Classic single-file Delta checkpoints: encoded with apache-arrow (real MAP columns, which polars
// cannot write) and parquet-wasm, decoded the same way. One action per row, other columns null.

import {
  Bool,
  Field,
  Int32,
  Int64,
  List,
  Map_,
  Struct,
  Table,
  tableFromIPC,
  tableToIPC,
  Utf8,
  type Vector,
  vectorFromArray,
} from 'apache-arrow';
import {
  Compression,
  readParquet,
  Table as WasmTable,
  WriterPropertiesBuilder,
  writeParquet,
} from 'parquet-wasm/node';
import type { Action, AddAction, MetadataAction, RemoveAction, TxnAction } from './actions.ts';

const opt = (name: string, type: ConstructorParameters<typeof Field>[1]): Field =>
  new Field(name, type, true);

/** string -> string map with the standard Parquet MAP layout (key_value / key REQUIRED / value). */
const stringMap = (): Map_ =>
  new Map_(
    new Field(
      'key_value',
      new Struct([new Field('key', new Utf8(), false), new Field('value', new Utf8(), true)]),
      false,
    ),
    false,
  );

const PROTOCOL = new Struct([opt('minReaderVersion', new Int32()), opt('minWriterVersion', new Int32())]);
const METADATA = new Struct([
  opt('id', new Utf8()),
  opt('name', new Utf8()),
  opt('description', new Utf8()),
  opt('format', new Struct([opt('provider', new Utf8()), opt('options', stringMap())])),
  opt('schemaString', new Utf8()),
  opt('partitionColumns', new List(opt('element', new Utf8()))),
  opt('configuration', stringMap()),
  opt('createdTime', new Int64()),
]);
// An all-null deletionVector column: some older kernels expect it in every checkpoint.
const DELETION_VECTOR = new Struct([
  opt('storageType', new Utf8()),
  opt('pathOrInlineDv', new Utf8()),
  opt('offset', new Int32()),
  opt('sizeInBytes', new Int32()),
  opt('cardinality', new Int64()),
]);
const ADD = new Struct([
  opt('path', new Utf8()),
  opt('partitionValues', stringMap()),
  opt('size', new Int64()),
  opt('modificationTime', new Int64()),
  opt('dataChange', new Bool()),
  opt('stats', new Utf8()),
  opt('tags', stringMap()),
  opt('deletionVector', DELETION_VECTOR),
]);
const REMOVE = new Struct([
  opt('path', new Utf8()),
  opt('deletionTimestamp', new Int64()),
  opt('dataChange', new Bool()),
  opt('extendedFileMetadata', new Bool()),
  opt('partitionValues', stringMap()),
  opt('size', new Int64()),
]);
const TXN = new Struct([
  opt('appId', new Utf8()),
  opt('version', new Int64()),
  opt('lastUpdated', new Int64()),
]);

const mapOf = (o: Record<string, string | null> | null | undefined): Map<string, string | null> | null =>
  o ? new Map(Object.entries(o)) : null;
const big = (v: number | null | undefined): bigint | null =>
  v === null || v === undefined ? null : BigInt(v);

/** The actions a checkpoint holds (protocol, metaData, txns, live adds, unexpired removes). */
export interface CheckpointContent {
  protocol: Action['protocol'];
  metaData: MetadataAction;
  txns: readonly TxnAction[];
  adds: readonly AddAction[];
  removes: readonly RemoveAction[];
}

export function encodeCheckpoint(c: CheckpointContent): { bytes: Uint8Array; actions: number } {
  const rows: Action[] = [
    { protocol: c.protocol },
    { metaData: c.metaData },
    ...c.txns.map((txn) => ({ txn })),
    ...c.adds.map((add) => ({ add })),
    ...c.removes.map((remove) => ({ remove })),
  ];
  const column = <T>(pick: (a: Action) => T | undefined, type: Struct, conv: (v: T) => unknown): Vector =>
    vectorFromArray(
      rows.map((r) => {
        const v = pick(r);
        return v === undefined ? null : conv(v);
      }),
      type,
    );
  const table = new Table({
    txn: column(
      (r) => r.txn,
      TXN,
      (t) => ({
        appId: t.appId,
        version: big(t.version),
        lastUpdated: big(t.lastUpdated),
      }),
    ),
    add: column(
      (r) => r.add,
      ADD,
      (a) => ({
        path: a.path,
        partitionValues: mapOf(a.partitionValues) ?? new Map(),
        size: big(a.size),
        modificationTime: big(a.modificationTime),
        dataChange: a.dataChange,
        stats: a.stats ?? null,
        tags: mapOf(a.tags),
        deletionVector: null,
      }),
    ),
    remove: column(
      (r) => r.remove,
      REMOVE,
      (a) => ({
        path: a.path,
        deletionTimestamp: big(a.deletionTimestamp ?? 0),
        dataChange: a.dataChange,
        extendedFileMetadata: a.extendedFileMetadata ?? null,
        partitionValues: mapOf(a.partitionValues),
        size: big(a.size),
      }),
    ),
    metaData: column(
      (r) => r.metaData,
      METADATA,
      (m) => ({
        id: m.id,
        name: m.name ?? null,
        description: m.description ?? null,
        format: { provider: m.format.provider, options: mapOf(m.format.options) ?? new Map() },
        schemaString: m.schemaString,
        partitionColumns: m.partitionColumns,
        configuration: mapOf(m.configuration) ?? new Map(),
        createdTime: big(m.createdTime),
      }),
    ),
    protocol: column(
      (r) => r.protocol,
      PROTOCOL,
      (p) => p,
    ),
  });
  const wasmTable = WasmTable.fromIPCStream(tableToIPC(table, 'stream'));
  const props = new WriterPropertiesBuilder().setCompression(Compression.SNAPPY).build();
  return { bytes: writeParquet(wasmTable, props), actions: rows.length };
}

// ---------------------------------------------------------------------------------------------
// Decoding (our checkpoints and any classic checkpoint with these columns).

type Obj = Record<string, unknown>;

/** Arrow row values -> plain JSON-like values; int64 becomes a JS number (sizes, times, versions). */
function plain(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v !== 'object') return v;
  const json = (v as { toJSON?: () => unknown }).toJSON?.() ?? v;
  if (Array.isArray(json)) return json.map(plain);
  if (json instanceof Map) return Object.fromEntries([...json].map(([k, x]) => [k, plain(x)]));
  const out: Obj = {};
  for (const [k, x] of Object.entries(json as Obj)) out[k] = plain(x);
  return out;
}

export function decodeCheckpoint(bytes: Uint8Array): Action[] {
  const table = tableFromIPC(readParquet(bytes).intoIPCStream());
  const out: Action[] = [];
  const kinds = ['protocol', 'metaData', 'txn', 'add', 'remove'] as const;
  for (const kind of kinds) {
    const col = table.getChild(kind);
    if (!col) continue;
    for (let i = 0; i < col.length; i++) {
      if (!col.isValid(i)) continue;
      const value = plain(col.get(i)) as Obj | null;
      if (value === null) continue;
      // Struct rows of other actions come back with every field null.
      if (kind === 'add' || kind === 'remove' || kind === 'txn') {
        if (value.path === null && value.appId === null) continue;
        if (kind !== 'txn' && value.path === null) continue;
      } else if (kind === 'metaData' && value.id === null) continue;
      else if (kind === 'protocol' && value.minReaderVersion === null) continue;
      // Optional fields absent from the checkpoint's row are absent, as in a JSON commit.
      for (const [k, x] of Object.entries(value)) if (x === null) delete value[k];
      out.push({ [kind]: value } as Action);
    }
  }
  return out;
}
