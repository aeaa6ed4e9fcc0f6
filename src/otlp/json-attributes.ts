// KeyValue lists and AnyValues of an OTLP/JSON body written as JSON text while the JSON reader
// (json-reader.ts) passes over them: byte for byte what values.ts' attributesJson and bodyText give
// for JSON.parse's tree of the same list (tests hold the two equal). Keys and string values are
// copied as they stand; a list or value this writer does not take is parsed alone and given to
// values.ts.

import { DECLINED, END_OF_OBJECT, FIRST_KEY, type JsonCursor, KeySet, Literal } from './json-cursor.ts';
import { JsonTextWriter, ObjectKeys } from './json-text.ts';
import { attributesJson, bodyText, double, jsonInt, jsonText, stringAttribute } from './values.ts';

const NAMES = ['key', 'value', 'stringValue', 'intValue', 'boolValue', 'doubleValue'] as const;
const KEYS = new KeySet(NAMES);
const KEY = 0;
const VALUE = 1;
const STRING_VALUE = 2;
const INT_VALUE = 3;
const BOOL_VALUE = 4;
const DOUBLE_VALUE = 5;

/** The id of the next key of an object (-1: one this writer does not read). */
function key(j: JsonCursor, prev: number): number {
  return j.key(prev, KEYS);
}

const SERVICE_NAME = Buffer.from('service.name');
const PROJECT_ID = Buffer.from('project.id');

/**
 * Writes a KeyValue list as JSON text, byte for byte what `attributesJson` gives for the parsed
 * list: keys and string values are copied as they stand. A list this does not take (a repeated
 * or integer-like key, a value that is not one string, int, bool or double, a key after its
 * value, a key with escapes) is parsed alone and given to `attributesJson`.
 */
export class JsonAttributes extends JsonTextWriter {
  private readonly j: JsonCursor;
  /** Whether a byte beyond ASCII was written (the text is then decoded as UTF-8). */
  private nonAscii = false;
  /** Keys of the list being written, for the repeated-key check. */
  private readonly keys: ObjectKeys;
  /** Set by `json(true)`: the list's service.name and project.id (`stringAttribute`). */
  serviceName: string | null = null;
  projectId: string | null | undefined;

  constructor(j: JsonCursor) {
    super();
    this.j = j;
    this.keys = new ObjectKeys(j.buf);
  }

  /** The list at the cursor (or a null) as a JSON object text; `names`: also read service.name and project.id. */
  json(names: boolean): string {
    const j = this.j;
    this.serviceName = null;
    this.projectId = undefined;
    if (!j.array()) return '{}';
    const listStart = j.pos - 1;
    this.len = 0;
    this.nonAscii = false;
    this.keys.reset();
    this.keys.open();
    this.byte(0x7b);
    let simple = true;
    for (let first = true; j.next(first); first = false) {
      if (!simple) j.skip();
      else simple = this.compact(first, names) || this.keyValue(first, names);
    }
    if (!simple) {
      const list = JSON.parse(j.buf.toString('utf8', listStart, j.pos)) as unknown[];
      if (names) {
        this.serviceName = stringAttribute(list, 'service.name') ?? null;
        this.projectId = stringAttribute(list, 'project.id');
      }
      return attributesJson(list);
    }
    if (this.len === 1) return '{}';
    this.byte(0x7d);
    return this.out.toString(this.nonAscii ? 'utf8' : 'latin1', 0, this.len);
  }

  /** The AnyValue at the cursor (or a null) as a log body, as values.ts' bodyText gives it. */
  body(): string | null {
    const j = this.j;
    j.peek();
    const start = j.pos;
    if (!j.object()) return null;
    // The common body, a string value alone, is read where it stands.
    const first = key(j, FIRST_KEY);
    if (first === STRING_VALUE && j.string()) {
      const text = j.stringValue();
      if (key(j, first) === END_OF_OBJECT) return text;
    }
    j.pos = start;
    j.skip();
    return bodyText(JSON.parse(j.buf.toString('utf8', start, j.pos)));
  }

  /** Writes one KeyValue; false (the rest of it skipped) when the list must go the parsed way. */
  private keyValue(first: boolean, names: boolean): boolean {
    const j = this.j;
    j.peek();
    const at = j.pos;
    if (!j.object()) throw DECLINED; // a null element: the tree path refuses it
    let keyStart = -1;
    let keyEnd = -1;
    let written = false;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === KEY) {
        if (keyStart >= 0 || !j.string() || j.strEscaped) return this.giveUp(at);
        keyStart = j.strStart;
        keyEnd = j.strEnd;
        if (!this.keys.add(keyStart, keyEnd)) return this.giveUp(at);
        if (!first) this.byte(0x2c);
        this.copy(keyStart, keyEnd, j.strNonAscii);
        this.byte(0x3a);
      } else if (id === VALUE) {
        if (keyStart < 0 || written) return this.giveUp(at);
        written = true;
        const text = this.anyValue();
        if (text === null) return this.giveUp(at);
        if (names) this.noteName(keyStart, keyEnd, text ? j.stringValue() : null);
      } else j.skip();
    }
    if (keyStart < 0) return this.giveUp(at); // no key: '' in the tree, which may repeat
    if (!written) {
      this.ascii('null');
      if (names) this.noteName(keyStart, keyEnd, null);
    }
    return true;
  }

  /** Skips the KeyValue that starts at `at` (checking it): the list goes the parsed way. */
  private giveUp(at: number): false {
    this.j.pos = at;
    this.j.skip();
    return false;
  }

  /**
   * Writes an AnyValue that has one string, int, bool or double member: true for a string value,
   * false for another; null (nothing sensible written) when the value needs the parsed way.
   */
  private anyValue(): boolean | null {
    const j = this.j;
    if (!j.object()) {
      this.ascii('null');
      return false;
    }
    let kind = -1;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (kind >= 0) return null; // two members: the tree's precedence decides
      kind = id;
      if (id === STRING_VALUE) {
        if (!j.string()) return null;
        if (j.strEscaped) this.ascii(JSON.stringify(j.stringValue()));
        else this.copy(j.strStart, j.strEnd, j.strNonAscii);
      } else if (id === INT_VALUE) {
        const v = j.scalar();
        if (typeof v !== 'string' && typeof v !== 'number') return null;
        this.ascii(jsonText(jsonInt(v, 'intValue')));
      } else if (id === DOUBLE_VALUE) {
        const v = j.scalar();
        if (typeof v !== 'string' && typeof v !== 'number') return null;
        this.double(double(v, 'doubleValue'));
      } else if (id === BOOL_VALUE) {
        const v = j.scalar();
        if (typeof v !== 'boolean') return null;
        this.ascii(v ? 'true' : 'false');
      } else return null;
    }
    if (kind < 0) this.ascii('null');
    return kind === STRING_VALUE;
  }

  /** Remembers the value of service.name or project.id (a string value, else null). */
  private noteName(keyStart: number, keyEnd: number, value: string | null): void {
    const buf = this.j.buf;
    if (equalBytes(buf, keyStart, keyEnd, SERVICE_NAME)) this.serviceName = value;
    else if (equalBytes(buf, keyStart, keyEnd, PROJECT_ID)) this.projectId = value;
  }

  /**
   * Writes a KeyValue in the form SDKs and the Collector write, {"key":"k","value":{"stringValue":
   * "v"}} (or a canonical intValue or doubleValue, or a boolValue), without whitespace or escapes,
   * in one pass; false, having read nothing, for any other form.
   */
  private compact(first: boolean, names: boolean): boolean {
    const j = this.j;
    const buf = j.buf;
    let p = j.pos;
    if (!KV_KEY.at(j, p)) return false;
    p += KV_KEY.length;
    // The key and value are copied while they are scanned, and kept only if the whole form
    // matches and fits: writes past the end of a typed array are dropped, and checked for below.
    if (this.out.length - this.len < COMPACT_ROOM) this.reserve(COMPACT_ROOM);
    const out = this.out;
    let o = this.len;
    if (!first) out[o++] = 0x2c;
    out[o++] = 0x22;
    const keyStart = p;
    let seen = 0;
    let c = buf[p]!;
    while (PLAIN[c] === 1) {
      out[o++] = c;
      seen |= c;
      c = buf[++p]!;
    }
    const keyEnd = p;
    if (!KV_VALUE.at(j, p)) return false;
    p += KV_VALUE.length;
    out[o++] = 0x22;
    out[o++] = 0x3a;
    let valueStart = -1;
    let valueEnd = -1;
    if (STRING_MEMBER.at(j, p)) {
      valueStart = p += STRING_MEMBER.length;
      out[o++] = 0x22;
      c = buf[p]!;
      while (PLAIN[c] === 1) {
        out[o++] = c;
        seen |= c;
        c = buf[++p]!;
      }
      if (c !== 0x22) return false;
      valueEnd = p++;
      out[o++] = 0x22;
    } else if (INT_MEMBER.at(j, p)) {
      p += INT_MEMBER.length;
      const quoted = buf[p] === 0x22;
      if (quoted) p++;
      const digits = p;
      c = buf[p]!;
      while (c >= 0x30 && c <= 0x39) {
        out[o++] = c;
        c = buf[++p]!;
      }
      // Canonical digits only (what jsonInt writes back unchanged): no sign, no leading zero, below 2^53.
      const n = p - digits;
      if (n === 0 || n > 15 || (n > 1 && buf[digits] === 0x30)) return false;
      if (quoted && buf[p++] !== 0x22) return false;
    } else if (DOUBLE_MEMBER.at(j, p)) {
      p += DOUBLE_MEMBER.length;
      const start = o;
      o = canonicalDouble(buf, p, out, o);
      if (o < 0) return false;
      p += o - start;
    } else if (BOOL_MEMBER.at(j, p)) {
      p += BOOL_MEMBER.length;
      const word = TRUE.at(j, p) ? TRUE : FALSE.at(j, p) ? FALSE : null;
      if (word === null) return false;
      for (let i = 0; i < word.length; i++) out[o++] = buf[p++]!;
    } else return false;
    if (buf[p] !== 0x7d || buf[p + 1] !== 0x7d || o > out.length) return false;
    if (!this.keys.add(keyStart, keyEnd)) return false;
    this.len = o;
    if (seen >= 0x80) this.nonAscii = true;
    j.pos = p + 2;
    if (names) {
      const value =
        valueStart >= 0 ? buf.toString(seen >= 0x80 ? 'utf8' : 'latin1', valueStart, valueEnd) : null;
      this.noteName(keyStart, keyEnd, value);
    }
    return true;
  }

  /** A string's bytes (checked: no escapes, no control characters) with quotes. */
  private copy(start: number, end: number, nonAscii: boolean): void {
    this.reserve(end - start + 2);
    const out = this.out;
    const buf = this.j.buf;
    let o = this.len;
    out[o++] = 0x22;
    for (let i = start; i < end; i++) out[o++] = buf[i]!;
    out[o++] = 0x22;
    this.len = o;
    if (nonAscii) this.nonAscii = true;
  }

  private ascii(s: string): void {
    this.reserve(s.length * 3);
    // JSON.stringify of a string with escapes may keep characters beyond ASCII.
    const n = this.out.write(s, this.len, 'utf8');
    if (n !== s.length) this.nonAscii = true;
    this.len += n;
  }
}

/** Room `compact` makes before a KeyValue; a longer one is written by `keyValue`. */
const COMPACT_ROOM = 4096;

const KV_KEY = new Literal('{"key":"');
const KV_VALUE = new Literal('","value":{"');
const STRING_MEMBER = new Literal('stringValue":"');
const INT_MEMBER = new Literal('intValue":');
const BOOL_MEMBER = new Literal('boolValue":');
const DOUBLE_MEMBER = new Literal('doubleValue":');
const TRUE = new Literal('true');
const FALSE = new Literal('false');

const isDigit = (c: number | undefined) => c !== undefined && c >= 0x30 && c <= 0x39;

/**
 * Copies the number literal at buf[p] to out[o] when it is written as JavaScript writes its
 * double (what JSON.stringify gives for the parsed value): no exponent, no fraction ending in 0,
 * at most 15 significant digits (a double's decimal form of up to 15 digits is its shortest one),
 * at most 5 zeros after the point before them, not -0. Returns the end in `out`, or -1 for any
 * other literal (which the caller leaves to the parsed way).
 */
function canonicalDouble(buf: Buffer, p: number, out: Buffer, o: number): number {
  const negative = buf[p] === 0x2d;
  if (negative) out[o++] = buf[p++]!;
  const intStart = p;
  while (isDigit(buf[p])) out[o++] = buf[p++]!;
  const intDigits = p - intStart;
  if (intDigits === 0 || (intDigits > 1 && buf[intStart] === 0x30)) return -1;
  let significant = buf[intStart] === 0x30 ? 0 : intDigits;
  if (buf[p] === 0x2e) {
    out[o++] = buf[p++]!;
    const fracStart = p;
    while (isDigit(buf[p])) out[o++] = buf[p++]!;
    if (p === fracStart || buf[p - 1] === 0x30) return -1;
    if (significant > 0) significant += p - fracStart;
    else {
      let zeros = 0;
      while (buf[fracStart + zeros] === 0x30) zeros++;
      if (zeros > 5) return -1;
      significant = p - fracStart - zeros;
    }
  }
  if (significant > 15 || (significant === 0 && negative)) return -1;
  return o;
}

/** Bytes a string's content may hold as it stands: all but quote, backslash and controls. */
const PLAIN = new Uint8Array(256).fill(1);
PLAIN.fill(0, 0, 0x20);
PLAIN[0x22] = 0;
PLAIN[0x5c] = 0;

function equalBytes(buf: Buffer, start: number, end: number, name: Buffer): boolean {
  if (end - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[start + i] !== name[i]) return false;
  return true;
}
