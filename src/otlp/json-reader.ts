// The reader (reader.ts) over an OTLP/JSON request body: fields are read from the body's bytes as
// the mapper asks for them (json-cursor.ts), without JSON.parse's tree. It reads the shape SDKs
// and the Collector send: lowerCamelCase keys in any order, whitespace, unknown fields, ids in hex,
// int64 as decimal strings. On anything else (invalid JSON, snake_case keys, a value of an
// unexpected type, a list given twice, an int64 number beyond 2^53...) it throws DECLINED, and
// the body is mapped from JSON.parse's tree instead (tree.ts), which decides and words any error.
// What it reads equals what that tree holds (tests hold the two equal): a key given twice keeps
// its last value.

import type { Int64List } from './columns.ts';
import { OtlpDecodeError } from './errors.ts';
import { JsonAttributes } from './json-attributes.ts';
import { DECLINED, END_OF_OBJECT, FIRST_KEY, JsonCursor, KeySet } from './json-cursor.ts';
import { FIELD_NAMES, MESSAGES, type MessageType, SFIXED64, UINT32 } from './messages.ts';
import { END, INVALID_ID, type OtlpReader, type ReadId } from './reader.ts';
import {
  bool,
  double,
  droppedCount,
  flags,
  id,
  int32,
  int64,
  type MapState,
  optionalDouble,
  str,
} from './values.ts';

// The snake_case spelling of each name (the tree reads both): a body using it is left to the tree.
const SNAKE_OF = FIELD_NAMES.map((name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
const SNAKE = FIELD_NAMES.flatMap((name, id) => (SNAKE_OF[id] === name ? [] : [id]));
const KEYS = new KeySet([...FIELD_NAMES, ...SNAKE.map((id) => SNAKE_OF[id]!)]);
const FIRST_SNAKE = FIELD_NAMES.length;

/** The usual order of each message's keys, kept from body to body (writers keep theirs). */
const ORDERS = new Map<MessageType, Int16Array>();
function orderOf(type: MessageType): Int16Array {
  let order = ORDERS.get(type);
  if (order === undefined) {
    order = KEYS.newOrder();
    ORDERS.set(type, order);
  }
  return order;
}

/** An empty body is an empty request. */
const EMPTY_REQUEST = Buffer.from('{}');
const OPEN_OBJECT = 0x7b;
const NULL_START = 0x6e;

export class JsonReader implements OtlpReader {
  private readonly j: JsonCursor;
  private readonly attrs: JsonAttributes;
  /** The objects entered, innermost last, each with the key read last in it (FIRST_KEY: none yet). */
  private depth = -1;
  private readonly types: MessageType[] = [];
  private readonly orders: Int16Array[] = [];
  private readonly lastKey: number[] = [];
  /**
   * The repeated message field whose array is being walked in each object (-1: none), and whether
   * its first element is still to come.
   */
  private readonly list: number[] = [];
  private readonly listFirst: boolean[] = [];
  /** Each object's serial number; `listsMet[id]`: the serial of the object that last gave list `id`. */
  private readonly serial: number[] = [];
  private serials = 0;
  private readonly listsMet = new Int32Array(FIELD_NAMES.length);
  /** The attribute list of each object, as JSON text. */
  private readonly attributeText: string[] = [];
  /** The field `next` returned. */
  private field = 0;
  /** Ids read through values.ts' id, which counts the invalid ones here. */
  private readonly ids: MapState = { invalidIds: 0 };
  serviceName: string | null = null;
  projectId: string | null | undefined;

  /** Declines a body that is not valid UTF-8 (the tree decodes it with replacement characters). */
  constructor(body: Uint8Array) {
    this.j = new JsonCursor(body.length === 0 ? EMPTY_REQUEST : body);
    this.attrs = new JsonAttributes(this.j);
  }

  begin(type: MessageType): void {
    // Any top level but an object is the tree's to refuse.
    if (!this.enter(type)) throw DECLINED;
  }

  enter(type: MessageType): boolean {
    if (!this.j.object()) return false;
    this.push(type);
    return true;
  }

  private push(type: MessageType): void {
    const d = ++this.depth;
    this.types[d] = type;
    this.orders[d] = orderOf(type);
    this.lastKey[d] = FIRST_KEY;
    this.list[d] = -1;
    this.listFirst[d] = false;
    this.serial[d] = ++this.serials;
    this.attributeText[d] = '{}';
    if (type.names) {
      this.serviceName = null;
      this.projectId = undefined;
    }
  }

  next(): number {
    const j = this.j;
    const d = this.depth;
    const type = this.types[d]!;
    const list = this.list[d]!;
    if (list >= 0) {
      if (j.next(this.listFirst[d]!)) {
        this.listFirst[d] = false;
        // An element that is not an object: the tree refuses it, in its words.
        if (j.peek() !== OPEN_OBJECT) throw DECLINED;
        this.field = list;
        return list;
      }
      this.list[d] = -1;
    }
    for (;;) {
      const id = j.key(this.lastKey[d]!, KEYS, this.orders[d]!);
      if (id === END_OF_OBJECT) {
        this.depth = d - 1;
        if (d === 0 && !j.atEnd()) throw DECLINED;
        return END;
      }
      this.lastKey[d] = id;
      if (id < 0) {
        j.skip();
        continue;
      }
      if (id >= FIRST_SNAKE) {
        if (type.types[SNAKE[id - FIRST_SNAKE]!] !== 0) throw DECLINED;
        j.skip();
        continue;
      }
      const fieldType = type.types[id]!;
      if (fieldType === 0) {
        j.skip();
      } else if (fieldType === MESSAGES) {
        // JSON.parse keeps only the last of a list given twice; the rows of the first are made.
        if (this.listsMet[id] === this.serial[d]) throw DECLINED;
        this.listsMet[id] = this.serial[d]!;
        if (j.array()) {
          this.list[d] = id;
          this.listFirst[d] = true;
          return this.next();
        }
      } else {
        this.field = id;
        return id;
      }
    }
  }

  skip(): void {
    this.j.skip();
  }

  /** What values.ts' errors call the field (they only decline the body here). */
  private label(): string {
    return FIELD_NAMES[this.field]!;
  }

  string(): string | null {
    const j = this.j;
    if (j.string()) return j.strEnd === j.strStart ? null : j.stringValue();
    return str(j.scalar(), this.label());
  }

  id(byteLength: 16 | 8): ReadId {
    const j = this.j;
    const hex = j.hexId(byteLength);
    if (hex !== undefined) return hex;
    const ids = this.ids;
    const before = ids.invalidIds;
    const value = id(j.scalar(), byteLength, this.label(), ids);
    return ids.invalidIds === before ? value : INVALID_ID;
  }

  int64(): bigint {
    const j = this.j;
    const signed = this.types[this.depth]!.types[this.field] === SFIXED64;
    const v = j.digits64();
    if (v === undefined) return int64(j.scalar(), this.label(), signed);
    // Unsigned digits read as a negative number: 2^63 or more, which only an unsigned field keeps.
    if (v < 0n && signed)
      throw new OtlpDecodeError(`${this.label()}: ${BigInt.asUintN(64, v)} is outside the int64 range`);
    return v;
  }

  int32(names?: Readonly<Record<string, number>>): number {
    if (this.types[this.depth]!.types[this.field] === UINT32)
      return droppedCount(this.j.scalar(), this.label());
    return int32(this.j.scalar(), this.label(), names);
  }

  flags(): bigint {
    return flags(this.j.scalar(), this.label());
  }

  double(): number {
    return double(this.j.scalar(), this.label());
  }

  optionalDouble(): number | null {
    return optionalDouble(this.j.scalar(), this.label());
  }

  bool(): boolean {
    return bool(this.j.scalar(), this.label());
  }

  present(): boolean {
    const j = this.j;
    if (j.peek() !== NULL_START) return true;
    j.scalar();
    return false;
  }

  int64s(out: Int64List): void {
    const j = this.j;
    out.clear();
    if (!j.array()) return;
    for (let first = true; j.next(first); first = false) {
      const small = j.digits15(); // no BigInt for the common case
      if (small >= 0) out.pushSafe(small);
      else out.push(j.digits64() ?? int64(j.scalar(), this.label()));
    }
  }

  doubles(out: number[]): void {
    const j = this.j;
    out.length = 0;
    if (!j.array()) return;
    for (let first = true; j.next(first); first = false) out.push(double(j.scalar(), this.label()));
  }

  attributes(): void {
    const d = this.depth;
    const names = this.types[d]!.names;
    this.attributeText[d] = this.attrs.json(names);
    if (names) {
      this.serviceName = this.attrs.serviceName;
      this.projectId = this.attrs.projectId;
    }
  }

  attributesJson(): string {
    return this.attributeText[this.depth + 1]!;
  }

  body(): string | null {
    return this.attrs.body();
  }

  otherMember(): void {
    throw DECLINED;
  }

  /** Not in JSON: it would scan the items twice; the walk then holds a resource's rows to its end. */
  readAhead(): boolean {
    return false;
  }
}
