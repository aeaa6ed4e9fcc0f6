// The JSON text of a read's slice, written in the query worker straight from the Arrow IPC buffer
// polars hands over (apache-arrow is loaded there, not in the server).

import { DataType as ArrowType, type Data, Precision, tableFromIPC } from 'apache-arrow';
import { type ColumnType, SCHEMAS, type TableName } from '../schema/tables.ts';
import { getterOf } from './arrow-rows.ts';
import { isoFromMicros, toJsonValue } from './json.ts';

/**
 * The rows of an Arrow IPC buffer (a query worker's slice) as JSON text, each row's rowToJson text
 * preceded by a comma (`,{...},{...}`), and the byte offset where each row ends: an HTTP answer
 * takes whole rows up to its byte limit without parsing.
 *
 * Written value by value from Arrow's buffers, not through a row object per row (which took half
 * of a read's time): strings are escaped from their UTF-8 bytes as they are copied, never decoded;
 * int64 and timestamps come from their 64-bit values. Columns of other kinds (lists) go through
 * rowToJson's conversion, value by value.
 */
export function ipcJsonText(ipc: Uint8Array, table: TableName): { json: Uint8Array; ends: Uint32Array } {
  const arrow = tableFromIPC(ipc);
  const names = arrow.schema.fields.map((f) => f.name);
  const schema = SCHEMAS[table];
  // `,{"name":` for the first column, `,"name":` for the others: written before each value (a
  // query selects one column at least, normalizeQuery).
  const keys = names.map((name, c) => Buffer.from(`${c === 0 ? ',{' : ','}${JSON.stringify(name)}:`));
  const out = new JsonBytes();
  const ends = new Uint32Array(arrow.numRows);
  let row = 0;
  for (const batch of arrow.batches) {
    const writers = names.map((name, c) =>
      columnWriter(out, batch.data.children[c]!, schema.byName.get(name)?.type),
    );
    for (let i = 0; i < batch.numRows; i++) {
      for (let c = 0; c < writers.length; c++) {
        out.raw(keys[c]!);
        writers[c]!(i);
      }
      out.ascii('}');
      ends[row++] = out.at;
    }
  }
  return { json: out.done(), ends };
}

/** JSON text's bytes, in a buffer grown as it fills. */
class JsonBytes {
  buf = Buffer.allocUnsafe(64 * 1024);
  at = 0;

  /** Room for `bytes` more. */
  room(bytes: number): void {
    if (this.at + bytes <= this.buf.length) return;
    const larger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + bytes));
    this.buf.copy(larger, 0, 0, this.at);
    this.buf = larger;
  }

  raw(bytes: Uint8Array): void {
    this.room(bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
  }

  /** Text known to be ASCII (numbers, keywords, ISO times). */
  ascii(text: string): void {
    this.room(text.length);
    this.at += this.buf.write(text, this.at, 'latin1');
  }

  /** Any JSON text (a value rowToJson converted), as UTF-8. */
  text(text: string): void {
    this.room(text.length * 3);
    this.at += this.buf.write(text, this.at);
  }

  /** A JSON string of the UTF-8 bytes `src[start, end)`, escaped as JSON.stringify escapes. */
  utf8String(src: Uint8Array, start: number, end: number): void {
    // Room for the bytes as they are; an escape makes more as it comes (a value may be 50 MB).
    this.room(end - start + 2);
    let buf = this.buf;
    let at = this.at;
    buf[at++] = QUOTE;
    for (let k = start; k < end; k++) {
      const b = src[k]!;
      if (b >= 0x20 && b !== QUOTE && b !== BACKSLASH) {
        buf[at++] = b;
        continue;
      }
      const escaped = ESCAPES[b]!;
      this.at = at;
      this.room(escaped.length + (end - k) + 1);
      buf = this.buf;
      for (let e = 0; e < escaped.length; e++) buf[at++] = escaped[e]!;
    }
    buf[at++] = QUOTE;
    this.at = at;
  }

  /** The text, in a buffer of its own no larger than it (to hand over whole). */
  done(): Uint8Array {
    return Uint8Array.prototype.slice.call(this.buf, 0, this.at);
  }
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
/** The escape JSON.stringify writes for each byte below 0x20, a quote and a backslash. */
const ESCAPES: Uint8Array[] = Array.from({ length: 0x80 }, (_, b) =>
  Buffer.from(JSON.stringify(String.fromCharCode(b)).slice(1, -1)),
);

/** Writes a column's value of row `i` (null included) after its key. */
type ValueWriter = (i: number) => void;

function columnWriter(out: JsonBytes, data: Data, type: ColumnType | undefined): ValueWriter {
  const valid = data.nullCount === 0 ? null : (i: number) => data.getValid(i);
  const write = valueWriter(out, data, type);
  if (valid === null) return write;
  return (i) => (valid(i) ? write(i) : out.ascii('null'));
}

function valueWriter(out: JsonBytes, data: Data, type: ColumnType | undefined): ValueWriter {
  const arrowType = data.type;
  if (ArrowType.isUtf8View(arrowType)) {
    // 16 bytes a value: its length, then the bytes themselves when at most 12, else a prefix,
    // the index of the buffer that holds them and their offset there.
    const views = data.values as Uint8Array;
    const view = new DataView(views.buffer, views.byteOffset, views.byteLength);
    const buffers = data.variadicBuffers;
    return (i) => {
      const at = i * 16;
      const length = view.getInt32(at, true);
      if (length <= 12) return out.utf8String(views, at + 4, at + 4 + length);
      const offset = view.getInt32(at + 12, true);
      out.utf8String(buffers[view.getInt32(at + 8, true)]!, offset, offset + length);
    };
  }
  if (ArrowType.isUtf8(arrowType)) {
    const bytes = data.values as Uint8Array;
    const offsets = data.valueOffsets as Int32Array;
    return (i) => out.utf8String(bytes, offsets[i]!, offsets[i + 1]!);
  }
  if ((ArrowType.isInt(arrowType) && arrowType.bitWidth === 64) || ArrowType.isTimestamp(arrowType)) {
    const values = data.values as BigInt64Array;
    if (type === 'timestamp') {
      const iso = isoWriter();
      return (i) => out.ascii(`"${iso(values[i]!)}"`);
    }
    return (i) => out.ascii(`"${values[i]}"`);
  }
  if (
    ArrowType.isInt(arrowType) ||
    (ArrowType.isFloat(arrowType) && arrowType.precision !== Precision.HALF)
  ) {
    const values = data.values as Int32Array | Float64Array;
    return (i) => {
      const n = values[i]!;
      out.ascii(Number.isFinite(n) ? String(n) : `"${n}"`);
    };
  }
  if (ArrowType.isBool(arrowType)) {
    const get = getterOf(data);
    return (i) => out.ascii(get(i) ? 'true' : 'false');
  }
  const get = getterOf(data);
  return (i) => out.text(JSON.stringify(toJsonValue(get(i), type)));
}

/** MAX_SAFE_INTEGER as a bigint: microseconds within it convert to a number exactly. */
const SAFE_MICROS = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * isoFromMicros for a column of times: runs of rows share their second, whose text is kept.
 */
function isoWriter(): (us: bigint) => string {
  let second = Number.NaN;
  let prefix = ''; // `2024-06-10T08:00:00.`
  return (us) => {
    if (us > SAFE_MICROS || us < -SAFE_MICROS) return isoFromMicros(us);
    const n = Number(us);
    const s = Math.floor(n / 1e6);
    if (s !== second) {
      const iso = new Date(s * 1000).toISOString(); // ends `.000Z`
      prefix = iso.slice(0, -4);
      second = s;
    }
    return `${prefix}${String(n - s * 1e6).padStart(6, '0')}Z`;
  };
}
