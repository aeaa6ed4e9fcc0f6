// Turns a query result (Arrow IPC from a query worker) into plain row objects with exact values:
// int64 and timestamps as bigint (read from the raw 64-bit buffers, never through a JS number),
// int32 and doubles as numbers, lists as arrays. Long results are converted in slices so the event
// loop is never held for more than a few milliseconds.

import { DataType as ArrowType, type Data, makeVector, tableFromIPC } from 'apache-arrow';
import type { Row } from '../schema/tables.ts';

type Getter = (index: number) => unknown;

/** A column's values as rowsFromIpc gives them (int64 and timestamps as bigint). */
export function getterOf(data: Data): Getter {
  const type = data.type;
  if ((ArrowType.isInt(type) && type.bitWidth === 64) || ArrowType.isTimestamp(type)) {
    // Arrow's own getter turns timestamps into millisecond numbers: read the int64 values.
    const values = data.values as BigInt64Array;
    if (data.nullCount === 0) return (i) => values[i];
    return (i) => (data.getValid(i) ? values[i] : null);
  }
  const vector = makeVector(data);
  if (ArrowType.isList(type) || ArrowType.isLargeList(type)) {
    return (i) => {
      const items = vector.get(i);
      return items === null ? null : Array.from(items.toArray() as ArrayLike<unknown>);
    };
  }
  return (i) => vector.get(i) ?? null;
}

/** How long a conversion may hold the event loop before it yields. */
const SLICE_MS = 4;

const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Rows of an Arrow IPC buffer, columns in the buffer's order. */
export async function rowsFromIpc(ipc: Uint8Array): Promise<Row[]> {
  const table = tableFromIPC(ipc);
  const names = table.schema.fields.map((f) => f.name);
  const rows: Row[] = new Array(table.numRows);
  let next = 0;
  let started = performance.now();
  for (const batch of table.batches) {
    const getters = names.map((_, c) => getterOf(batch.data.children[c]!));
    for (let i = 0; i < batch.numRows; i++) {
      const row: Row = {};
      for (let c = 0; c < names.length; c++) row[names[c]!] = getters[c]!(i);
      rows[next++] = row;
      if ((i & 255) === 255 && performance.now() - started > SLICE_MS) {
        await yieldToLoop();
        started = performance.now();
      }
    }
  }
  return rows;
}
