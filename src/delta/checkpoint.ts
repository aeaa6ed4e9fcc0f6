// Classic single-file Delta checkpoints, read: with parquet-wasm and apache-arrow, ours
// (checkpoint-writer.ts writes them) and any other writer's with these columns. One action per
// row, other columns null.

import { tableFromIPC } from 'apache-arrow';
import { readParquet } from 'parquet-wasm/node';
import type { Action, AddAction, MetadataAction, RemoveAction, TxnAction } from './actions.ts';

/** The actions a checkpoint holds (protocol, metaData, txns, live adds, unexpired removes). */
export interface CheckpointContent {
  protocol: Action['protocol'];
  metaData: MetadataAction;
  txns: readonly TxnAction[];
  adds: readonly AddAction[];
  removes: readonly RemoveAction[];
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
