// Classic single-file Delta checkpoints written by the engine: one action per row, the other
// action columns null, with real MAP columns (partitionValues, tags, configuration, format
// options) and a LIST (partitionColumns), in the layout Delta readers expect. Nested values are
// shredded into repetition and definition levels here (the Dremel encoding), for this fixed
// schema only; checkpoint.ts reads them back. apache-arrow and parquet-wasm wrote them before:
// loaded in the Parquet worker, its old generation held 24-31 MiB instead of 12-16.

import type { AddAction, MetadataAction, RemoveAction, TxnAction } from './actions.ts';
import type { CheckpointContent } from './checkpoint.ts';
import {
  Bytes,
  bin,
  CONVERTED_LIST,
  CONVERTED_MAP,
  CONVERTED_UTF8,
  columnChunk,
  fileEnd,
  i32,
  LevelRuns,
  OPTIONAL,
  PackedBits,
  REPEATED,
  REQUIRED,
  rowGroup,
  struct,
  TYPE,
  writeDataPage,
} from './parquet-encoding.ts';
import { MAGIC } from './parquet-format.ts';
import type { TStruct } from './thrift.ts';

type Leaf = 'string' | 'int32' | 'int64' | 'bool';
type Node =
  | { name: string; leaf: Leaf }
  | { name: string; fields: Node[] }
  /** map<string, string | null>: key REQUIRED, value OPTIONAL. */
  | { name: string; map: true }
  /** list<string>, elements OPTIONAL. */
  | { name: string; list: true };

const s = (name: string): Node => ({ name, leaf: 'string' });
const i = (name: string): Node => ({ name, leaf: 'int32' });
const l = (name: string): Node => ({ name, leaf: 'int64' });
const b = (name: string): Node => ({ name, leaf: 'bool' });
const map = (name: string): Node => ({ name, map: true });

/** Every node is OPTIONAL, as the checkpoints apache-arrow wrote had them. */
const SCHEMA: Node[] = [
  { name: 'txn', fields: [s('appId'), l('version'), l('lastUpdated')] },
  {
    name: 'add',
    fields: [
      s('path'),
      map('partitionValues'),
      l('size'),
      l('modificationTime'),
      b('dataChange'),
      s('stats'),
      map('tags'),
      // All null: some older kernels expect the column in every checkpoint.
      {
        name: 'deletionVector',
        fields: [s('storageType'), s('pathOrInlineDv'), i('offset'), i('sizeInBytes'), l('cardinality')],
      },
    ],
  },
  {
    name: 'remove',
    fields: [
      s('path'),
      l('deletionTimestamp'),
      b('dataChange'),
      b('extendedFileMetadata'),
      map('partitionValues'),
      l('size'),
    ],
  },
  {
    name: 'metaData',
    fields: [
      s('id'),
      s('name'),
      s('description'),
      { name: 'format', fields: [s('provider'), map('options')] },
      s('schemaString'),
      { name: 'partitionColumns', list: true },
      map('configuration'),
      l('createdTime'),
    ],
  },
  { name: 'protocol', fields: [i('minReaderVersion'), i('minWriterVersion')] },
];

const PHYSICAL: Record<Leaf, number> = {
  string: TYPE.BYTE_ARRAY,
  int32: TYPE.INT32,
  int64: TYPE.INT64,
  bool: TYPE.BOOLEAN,
};

const stringLeaf = (name: string, repetition: number): TStruct => [
  i32(1, TYPE.BYTE_ARRAY),
  i32(3, repetition),
  bin(4, name),
  i32(6, CONVERTED_UTF8),
  struct(10, [struct(1, [])]), // STRING
];

function schemaElements(node: Node): TStruct[] {
  if ('leaf' in node) {
    if (node.leaf === 'string') return [stringLeaf(node.name, OPTIONAL)];
    return [[i32(1, PHYSICAL[node.leaf]), i32(3, OPTIONAL), bin(4, node.name)]];
  }
  if ('map' in node) {
    return [
      [i32(3, OPTIONAL), bin(4, node.name), i32(5, 1), i32(6, CONVERTED_MAP), struct(10, [struct(2, [])])], // MAP
      [i32(3, REPEATED), bin(4, 'key_value'), i32(5, 2)],
      stringLeaf('key', REQUIRED),
      stringLeaf('value', OPTIONAL),
    ];
  }
  if ('list' in node) {
    return [
      [i32(3, OPTIONAL), bin(4, node.name), i32(5, 1), i32(6, CONVERTED_LIST), struct(10, [struct(3, [])])], // LIST
      [i32(3, REPEATED), bin(4, 'list'), i32(5, 1)],
      stringLeaf('element', OPTIONAL),
    ];
  }
  return [
    [i32(3, OPTIONAL), bin(4, node.name), i32(5, node.fields.length)],
    ...node.fields.flatMap(schemaElements),
  ];
}

/** A leaf column: the nodes from the top down to it, and the leaf's place in a map or list. */
interface Column {
  path: string[];
  nodes: Node[];
  type: Leaf;
  /** 'key' or 'value' of a map, 'element' of a list (repeated), null for a plain leaf. */
  part: 'key' | 'value' | 'element' | null;
}

function columnsOf(node: Node, above: Node[] = [], path: string[] = []): Column[] {
  const nodes = [...above, node];
  const here = [...path, node.name];
  if ('leaf' in node) return [{ path: here, nodes, type: node.leaf, part: null }];
  if ('map' in node) {
    return (['key', 'value'] as const).map((part) => ({
      path: [...here, 'key_value', part],
      nodes,
      type: 'string' as const,
      part,
    }));
  }
  if ('list' in node) return [{ path: [...here, 'list', 'element'], nodes, type: 'string', part: 'element' }];
  return node.fields.flatMap((f) => columnsOf(f, nodes, here));
}

const COLUMNS = SCHEMA.flatMap((n) => columnsOf(n));

type Value = string | number | bigint | boolean;

/**
 * Calls `emit(rep, def, value)` for each value of `column` in `row` (value undefined when it is
 * null or absent at some level): Parquet's repetition and definition levels.
 */
function shred(
  column: Column,
  row: Record<string, unknown>,
  emit: (rep: number, def: number, v?: Value) => void,
): void {
  let value: unknown = row;
  let def = 0;
  for (const node of column.nodes) {
    const v = (value as Record<string, unknown>)[node.name];
    if (v === null || v === undefined) {
      emit(0, def);
      return;
    }
    if ('leaf' in node) {
      emit(0, def + 1, v as Value);
      return;
    }
    if ('fields' in node) {
      def++;
      value = v;
      continue;
    }
    // A map (an object) or a list: present (+1), then each entry (+1) repeated, then the value
    // of the entry (+1 where OPTIONAL and not null).
    const entries: [string, unknown][] =
      'map' in node ? Object.entries(v as object) : (v as string[]).map((x) => ['', x]);
    if (entries.length === 0) {
      emit(0, def + 1);
      return;
    }
    entries.forEach(([key, x], j) => {
      const rep = j === 0 ? 0 : 1;
      if (column.part === 'key') emit(rep, def + 2, key);
      else if (x === null || x === undefined) emit(rep, def + 2);
      else emit(rep, def + 3, x as Value);
    });
    return;
  }
}

function writeValue(type: Leaf, v: Value, out: Bytes, bits: PackedBits): void {
  switch (type) {
    case 'string': {
      const bytes = Buffer.from(v as string);
      out.u32(bytes.length);
      out.raw(bytes);
      return;
    }
    case 'int32':
      out.room(4);
      out.view.setInt32(out.pos, v as number, true);
      out.pos += 4;
      return;
    case 'int64':
      out.room(8);
      out.view.setBigInt64(out.pos, BigInt(v as number), true);
      out.pos += 8;
      return;
    case 'bool':
      bits.push(v as boolean);
  }
}

/** The actions as checkpoint rows, shaped as the schema is (absent optional fields null). */
function rowsOf(c: CheckpointContent): Record<string, unknown>[] {
  const txn = (t: TxnAction) => ({ appId: t.appId, version: t.version, lastUpdated: t.lastUpdated ?? null });
  const add = (a: AddAction) => ({
    path: a.path,
    partitionValues: a.partitionValues ?? {},
    size: a.size,
    modificationTime: a.modificationTime,
    dataChange: a.dataChange,
    stats: a.stats ?? null,
    tags: a.tags ?? null,
    deletionVector: null,
  });
  const remove = (r: RemoveAction) => ({
    path: r.path,
    deletionTimestamp: r.deletionTimestamp ?? 0,
    dataChange: r.dataChange,
    extendedFileMetadata: r.extendedFileMetadata ?? null,
    partitionValues: r.partitionValues ?? null,
    size: r.size ?? null,
  });
  const metaData = (m: MetadataAction) => ({
    id: m.id,
    name: m.name ?? null,
    description: m.description ?? null,
    format: { provider: m.format.provider, options: m.format.options ?? {} },
    schemaString: m.schemaString,
    partitionColumns: m.partitionColumns,
    configuration: m.configuration ?? {},
    createdTime: m.createdTime ?? null,
  });
  return [
    { protocol: c.protocol },
    { metaData: metaData(c.metaData) },
    ...c.txns.map((t) => ({ txn: txn(t) })),
    ...c.adds.map((a) => ({ add: add(a) })),
    ...c.removes.map((r) => ({ remove: remove(r) })),
  ];
}

/** Checkpoints are small next to data files and written seldom: zstd's default level. */
const ZSTD_LEVEL = 3;

/** A checkpoint file's bytes: one row group, one zstd data page per column. */
export function encodeCheckpoint(c: CheckpointContent): { bytes: Uint8Array; actions: number } {
  const rows = rowsOf(c);
  const file = new Bytes();
  file.raw(MAGIC);
  const chunks: TStruct[] = [];
  const page = new Bytes();
  let uncompressedTotal = 0;
  for (const column of COLUMNS) {
    page.pos = 0;
    const reps = column.part !== null ? new LevelRuns(page) : null;
    // Levels first (repetition, then definition), values after: a v1 data page.
    const defsOf: number[] = [];
    const values: Value[] = [];
    for (const row of rows) {
      shred(column, row, (rep, def, v) => {
        reps?.push(rep);
        defsOf.push(def);
        if (v !== undefined) values.push(v);
      });
    }
    reps?.end();
    const defs = new LevelRuns(page);
    for (const d of defsOf) defs.push(d);
    defs.end();
    const bits = new PackedBits(page);
    for (const v of values) writeValue(column.type, v, page, bits);
    bits.end();
    const start = file.pos;
    const uncompressed = writeDataPage(page.bytes(), defsOf.length, ZSTD_LEVEL, (x) => file.raw(x));
    uncompressedTotal += uncompressed;
    const type = PHYSICAL[column.type];
    chunks.push(
      columnChunk({ type, path: column.path, entries: defsOf.length, uncompressed, start, end: file.pos }),
    );
  }
  const group = rowGroup(chunks, {
    uncompressed: uncompressedTotal,
    rows: rows.length,
    start: 4,
    end: file.pos,
    ordinal: 0,
  });
  const schema: TStruct[] = [[bin(4, 'schema'), i32(5, SCHEMA.length)], ...SCHEMA.flatMap(schemaElements)];
  for (const bytes of fileEnd(schema, rows.length, [group], COLUMNS.length)) file.raw(bytes);
  return { bytes: file.bytes(), actions: rows.length };
}
