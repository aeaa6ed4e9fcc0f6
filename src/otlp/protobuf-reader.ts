// The reader (reader.ts) over a protobuf request body: fields are read from the wire bytes as the
// mapper asks for them, by the numbers and types messages.ts gives, without a message tree. What
// it reads equals what protobufjs' tree of the same bytes holds (tests hold the two equal): a
// singular field given twice keeps its last value; a repeated field's runs are joined; a oneof
// keeps its last member. One departure: a message field given twice keeps its last message,
// whole, where protobuf (and protobufjs) merge the two; no encoder splits a message so. A field
// whose wire type is not its type's is skipped as unknown, as protobuf specifies. An invalid body
// is refused with OtlpDecodeError.

import type { Int64List } from './columns.ts';
import { FIXED32, type MessageType, SINT32, UINT32, UINT64, UINT64S } from './messages.ts';
import { END, INVALID_ID, type OtlpReader, type ReadId } from './reader.ts';
import { INT32_MAX } from './values.ts';
import { AttributesWriter, LEN, Ranges, stringAttribute, WireCursor } from './wire.ts';

const SERVICE_NAME_KEY = Buffer.from('service.name');
const PROJECT_ID_KEY = Buffer.from('project.id');

/** The two hex digits' char codes of each byte. */
const HEX_HIGH = new Uint8Array(256);
const HEX_LOW = new Uint8Array(256);
for (let i = 0; i < 256; i++) {
  HEX_HIGH[i] = '0123456789abcdef'.charCodeAt(i >> 4);
  HEX_LOW[i] = '0123456789abcdef'.charCodeAt(i & 15);
}

// An id in hex by one String.fromCharCode, not Buffer's toString('hex') (a call into C++): ~100
// against ~160 ns a trace and span id pair; the decode step of spans and log records over
// protobuf 0.98-0.99x (bench/otlp-decode-map.ts --vs, 40 pairs of blocks).
function hex8(b: Uint8Array, a: number): string {
  const H = HEX_HIGH;
  const L = HEX_LOW;
  // biome-ignore format: four bytes a line
  return String.fromCharCode(
    H[b[a]!]!, L[b[a]!]!, H[b[a + 1]!]!, L[b[a + 1]!]!, H[b[a + 2]!]!, L[b[a + 2]!]!, H[b[a + 3]!]!, L[b[a + 3]!]!,
    H[b[a + 4]!]!, L[b[a + 4]!]!, H[b[a + 5]!]!, L[b[a + 5]!]!, H[b[a + 6]!]!, L[b[a + 6]!]!, H[b[a + 7]!]!, L[b[a + 7]!]!,
  );
}

// Written out, not two hex8 joined: a joined string of 32 characters is a rope that has to be
// flattened later (the decode step of log records 1.05x with the join).
function hex16(b: Uint8Array, a: number): string {
  const H = HEX_HIGH;
  const L = HEX_LOW;
  // biome-ignore format: four bytes a line
  return String.fromCharCode(
    H[b[a]!]!, L[b[a]!]!, H[b[a + 1]!]!, L[b[a + 1]!]!, H[b[a + 2]!]!, L[b[a + 2]!]!, H[b[a + 3]!]!, L[b[a + 3]!]!,
    H[b[a + 4]!]!, L[b[a + 4]!]!, H[b[a + 5]!]!, L[b[a + 5]!]!, H[b[a + 6]!]!, L[b[a + 6]!]!, H[b[a + 7]!]!, L[b[a + 7]!]!,
    H[b[a + 8]!]!, L[b[a + 8]!]!, H[b[a + 9]!]!, L[b[a + 9]!]!, H[b[a + 10]!]!, L[b[a + 10]!]!, H[b[a + 11]!]!, L[b[a + 11]!]!,
    H[b[a + 12]!]!, L[b[a + 12]!]!, H[b[a + 13]!]!, L[b[a + 13]!]!, H[b[a + 14]!]!, L[b[a + 14]!]!, H[b[a + 15]!]!, L[b[a + 15]!]!,
  );
}

export class ProtobufReader implements OtlpReader {
  private readonly w: WireCursor;
  private readonly writer: AttributesWriter;
  /** The messages entered, innermost last: where each ends, its type, the attribute runs it has. */
  private depth = -1;
  private readonly ends: number[] = [];
  private readonly types: MessageType[] = [];
  private readonly attributeRuns: Ranges[] = [];
  /** The field `next` returned: its type, tag and wire type. */
  private type = 0;
  private fieldTag = 0;
  private wireType = 0;
  serviceName: string | null = null;
  projectId: string | null | undefined;

  constructor(body: Uint8Array) {
    this.w = new WireCursor(body);
    this.writer = new AttributesWriter(this.w);
  }

  begin(type: MessageType): void {
    this.push(type, this.w.buf.length);
  }

  enter(type: MessageType): boolean {
    const n = this.w.length(this.ends[this.depth]!);
    this.push(type, this.w.pos + n);
    return true;
  }

  private push(type: MessageType, end: number): void {
    const d = ++this.depth;
    this.ends[d] = end;
    this.types[d] = type;
    const runs = this.attributeRuns[d];
    if (runs === undefined) this.attributeRuns[d] = new Ranges();
    else runs.reset();
  }

  next(): number {
    const w = this.w;
    const d = this.depth;
    const end = this.ends[d]!;
    const type = this.types[d]!;
    while (w.pos < end) {
      const t = w.tag(end);
      const id = t < 256 ? type.tags[t]! : -1;
      if (id >= 0) {
        this.type = type.types[id]!;
        this.fieldTag = t;
        this.wireType = t & 7;
        return id;
      }
      w.skip(t, end);
    }
    this.depth = d - 1;
    return END;
  }

  skip(): void {
    this.w.skip(this.fieldTag, this.end());
  }

  readAhead(own: (field: number) => boolean, minBytes: number): boolean {
    const pos = this.w.pos;
    const depth = this.depth;
    if (this.ends[depth]! - pos < minBytes) return false;
    for (let f = this.next(); f !== END; f = this.next()) if (!own(f)) this.skip();
    // The messages own() entered were pushed above `depth` and left again: the stack below is as it was.
    this.w.pos = pos;
    this.depth = depth;
    return true;
  }

  private end(): number {
    return this.ends[this.depth]!;
  }

  string(): string | null {
    const w = this.w;
    const n = w.length(this.end());
    const at = w.pos;
    w.pos = at + n;
    return n === 0 ? null : w.string(at, at + n);
  }

  id(byteLength: 16 | 8): ReadId {
    const w = this.w;
    const n = w.length(this.end());
    const at = w.pos;
    w.pos = at + n;
    if (n === 0) return null;
    if (n !== byteLength) return INVALID_ID;
    const buf = w.buf;
    let any = 0;
    for (let i = at; i < at + n; i++) any |= buf[i]!;
    if (any === 0) return null; // OTLP's invalid id: no id (see values.ts `id`)
    return n === 16 ? hex16(buf, at) : hex8(buf, at);
  }

  int64(): bigint {
    // fixed64 and sfixed64 are 8 bytes; uint64 a varint.
    return this.type === UINT64 || this.type === UINT64S ? this.varint64() : this.w.fixed64(this.end());
  }

  /** A varint as the signed 64-bit value of its bits. */
  private varint64(end = this.end()): bigint {
    const w = this.w;
    const lo = w.varint64(end);
    const hi = w.hi;
    return hi === 0 ? BigInt(lo) : BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo));
  }

  int32(): number {
    const v = this.w.uint32(this.end());
    switch (this.type) {
      case UINT32:
        return Math.min(v, INT32_MAX); // OTLP's dropped counts, held at the int32 column's most
      case SINT32:
        return (v >>> 1) ^ -(v & 1);
      default:
        return v | 0; // INT32: a negative value is a 10-byte varint; its low 32 bits are the value
    }
  }

  flags(): bigint {
    return BigInt(this.type === FIXED32 ? this.w.fixed32(this.end()) : this.w.uint32(this.end()));
  }

  double(): number {
    return this.w.double(this.end());
  }

  optionalDouble(): number {
    return this.w.double(this.end());
  }

  bool(): boolean {
    const w = this.w;
    return w.varint64(this.end()) !== 0 || w.hi !== 0;
  }

  present(): boolean {
    return true;
  }

  int64s(out: Int64List): void {
    const w = this.w;
    if (this.wireType !== LEN) {
      out.push(this.int64());
      return;
    }
    // Packed: one run of values, each kept as its two 32-bit halves (`hi` is read after the value).
    const n = w.length(this.end());
    const stop = w.pos + n;
    if (this.type === UINT64S) while (w.pos < stop) out.pushWords(w.varint64(stop), w.hi);
    else while (w.pos < stop) out.pushWords(w.fixed64Words(stop), w.hi);
  }

  doubles(out: number[]): void {
    const w = this.w;
    if (this.wireType !== LEN) {
      out.push(w.double(this.end()));
      return;
    }
    const n = w.length(this.end());
    const stop = w.pos + n;
    while (w.pos < stop) out.push(w.double(stop));
  }

  attributes(): void {
    const w = this.w;
    const n = w.length(this.end());
    this.attributeRuns[this.depth]!.push(w.pos, w.pos + n);
    w.pos += n;
  }

  attributesJson(): string {
    const d = this.depth + 1;
    const runs = this.attributeRuns[d]!;
    const w = this.w;
    const pos = w.pos; // the writer reads elsewhere in the body
    const text = this.writer.json(runs);
    if (this.types[d]!.names) {
      this.serviceName = stringAttribute(w, runs, SERVICE_NAME_KEY) ?? null;
      this.projectId = stringAttribute(w, runs, PROJECT_ID_KEY);
    }
    w.pos = pos;
    return text;
  }

  body(): string | null {
    const w = this.w;
    const n = w.length(this.end());
    const at = w.pos;
    const text = this.writer.body(at, at + n);
    w.pos = at + n;
    return text;
  }

  otherMember(): void {}
}
