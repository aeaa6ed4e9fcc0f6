// Maps an OTLP/JSON ExportTraceServiceRequest straight from its bytes to spans, span_events and
// span_links rows: the same rows map.ts gives for JSON.parse's tree (a test holds the two equal),
// without the tree. JSON.parse and the tree's attribute lists took most of a JSON span's decoding.
// It reads the shape SDKs and the Collector send (lowerCamelCase keys, any order, whitespace,
// unknown fields); on anything else (invalid JSON, snake_case keys, a value of the wrong type, a
// repeated list) mapTraceJson returns null and the caller maps the tree, which also words errors.

import { resourceProjectId } from '../schema/project.ts';
import type { Row } from '../schema/tables.ts';
import { nanosToMicros } from '../schema/time.ts';
import { LossyJsonNumber, OtlpDecodeError } from './errors.ts';
import {
  DECLINED,
  END_OF_OBJECT,
  FIRST_KEY,
  JsonReader,
  KeySet,
  Literal,
  type Scalar,
} from './json-reader.ts';
import type { MapContext, Mapped } from './map.ts';
import {
  attributesJson,
  double,
  flags,
  id,
  int32,
  int64,
  jsonDouble,
  jsonInt,
  type MapState,
  SPAN_KIND,
  STATUS_CODE,
  str,
  stringAttribute,
} from './values.ts';
import { MAX_WRITTEN_KEYS } from './wire.ts';
import type { Shared } from './wire-request.ts';

const NAMES = [
  'resourceSpans',
  'resource',
  'scopeSpans',
  'schemaUrl',
  'attributes',
  'droppedAttributesCount',
  'scope',
  'spans',
  'name',
  'version',
  'traceId',
  'spanId',
  'parentSpanId',
  'traceState',
  'kind',
  'startTimeUnixNano',
  'endTimeUnixNano',
  'events',
  'droppedEventsCount',
  'links',
  'droppedLinksCount',
  'status',
  'flags',
  'timeUnixNano',
  'code',
  'message',
  'key',
  'value',
  'stringValue',
  'intValue',
  'boolValue',
  'doubleValue',
  // The snake_case spellings map.ts also reads: a body using them is left to the tree path.
  'resource_spans',
  'scope_spans',
  'schema_url',
  'dropped_attributes_count',
  'trace_id',
  'span_id',
  'parent_span_id',
  'trace_state',
  'start_time_unix_nano',
  'end_time_unix_nano',
  'dropped_events_count',
  'dropped_links_count',
  'time_unix_nano',
] as const;
type Name = (typeof NAMES)[number];
const KEYS = new KeySet(NAMES);
const k = (name: Name): number => NAMES.indexOf(name);
const RESOURCE_SPANS = k('resourceSpans');
const RESOURCE = k('resource');
const SCOPE_SPANS = k('scopeSpans');
const SCHEMA_URL = k('schemaUrl');
const ATTRIBUTES = k('attributes');
const DROPPED_ATTRIBUTES = k('droppedAttributesCount');
const SCOPE = k('scope');
const SPANS = k('spans');
const NAME = k('name');
const VERSION = k('version');
const TRACE_ID = k('traceId');
const SPAN_ID = k('spanId');
const PARENT_SPAN_ID = k('parentSpanId');
const TRACE_STATE = k('traceState');
const KIND = k('kind');
const START = k('startTimeUnixNano');
const END = k('endTimeUnixNano');
const EVENTS = k('events');
const DROPPED_EVENTS = k('droppedEventsCount');
const LINKS = k('links');
const DROPPED_LINKS = k('droppedLinksCount');
const STATUS = k('status');
const FLAGS = k('flags');
const TIME = k('timeUnixNano');
const CODE = k('code');
const MESSAGE = k('message');
const KEY = k('key');
const VALUE = k('value');
const STRING_VALUE = k('stringValue');
const INT_VALUE = k('intValue');
const BOOL_VALUE = k('boolValue');
const DOUBLE_VALUE = k('doubleValue');
const FIRST_SNAKE = k('resource_spans');

/** Reads the key ids of one object; a snake_case key declines the body. */
function key(j: JsonReader, prev: number): number {
  const id = j.key(prev, KEYS);
  if (id >= FIRST_SNAKE) throw DECLINED;
  return id;
}

const SERVICE_NAME = Buffer.from('service.name');
const PROJECT_ID = Buffer.from('project.id');

/** The rows of a JSON traces request, or null when the tree path must map it (see the header). */
export function mapTraceJson(body: Uint8Array, ctx: MapContext): Mapped | null {
  try {
    return new JsonTraceMapper(body, ctx).map();
  } catch (err) {
    if (err === DECLINED || err instanceof OtlpDecodeError || err instanceof LossyJsonNumber) return null;
    throw err;
  } finally {
    // A list of megabytes grew the attributes' buffer: it is not kept for the requests after.
    if (scratch.length > SCRATCH_KEPT) scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
  }
}

/** A span's fields as JSON.parse gives them (undefined: absent), read before its row is made. */
interface SpanFields {
  /** Ids as read: checked hex strings (`JsonReader.hexId`) when the `*Hex` flag is set, else for values.ts' id. */
  traceId: Scalar | undefined;
  spanId: Scalar | undefined;
  parentSpanId: Scalar | undefined;
  traceIdHex: boolean;
  spanIdHex: boolean;
  parentSpanIdHex: boolean;
  traceState: Scalar | undefined;
  name: Scalar | undefined;
  kind: Scalar | undefined;
  /** Times as read: bigint when `JsonReader.digits64` took them. */
  start: Scalar | bigint | undefined;
  end: Scalar | bigint | undefined;
  flags: Scalar | undefined;
  dropped: Scalar | undefined;
  droppedEvents: Scalar | undefined;
  droppedLinks: Scalar | undefined;
  statusCode: Scalar | undefined;
  statusMessage: Scalar | undefined;
  hasStatus: boolean;
  attributes: string;
  /** Where the events and links arrays are (start < 0: absent), and how many objects each has. */
  eventsAt: number;
  eventsCount: number;
  linksAt: number;
  linksCount: number;
}

class JsonTraceMapper {
  private readonly j: JsonReader;
  private readonly ctx: MapContext;
  private readonly attrs: JsonAttributes;
  private readonly st: MapState = { invalidIds: 0 };
  private readonly spanRows: Row[] = [];
  private readonly eventRows: Row[] = [];
  private readonly linkRows: Row[] = [];

  constructor(body: Uint8Array, ctx: MapContext) {
    this.j = new JsonReader(body);
    this.ctx = ctx;
    this.attrs = new JsonAttributes(this.j);
  }

  map(): Mapped {
    const j = this.j;
    // An empty body is an empty request, as for the tree path; any top level but an object is its to refuse.
    if (j.buf.length === 0) return this.mapped();
    if (!j.object()) throw DECLINED;
    let lists = 0;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id !== RESOURCE_SPANS) j.skip();
      else if (lists++ > 0)
        throw DECLINED; // JSON.parse keeps only the last list
      else if (j.array()) for (let f = true; j.next(f); f = false) this.resourceSpans();
    }
    if (!j.atEnd()) throw DECLINED;
    return this.mapped();
  }

  private mapped(): Mapped {
    const tables: Mapped['tables'] = {};
    if (this.spanRows.length > 0) tables.spans = this.spanRows;
    if (this.eventRows.length > 0) tables.span_events = this.eventRows;
    if (this.linkRows.length > 0) tables.span_links = this.linkRows;
    return { tables, items: this.spanRows.length, invalidIds: this.st.invalidIds };
  }

  /**
   * A ResourceSpans. Its resource and schema URL may come after its spans: rows made before are
   * given the final values when the object ends.
   */
  private resourceSpans(): void {
    const j = this.j;
    if (!j.object()) throw DECLINED;
    const s: Shared = {
      project_id: resourceProjectId(this.ctx, undefined),
      service_name: null,
      resource_attributes: '{}',
      resource_dropped_attributes_count: 0,
      resource_schema_url: null,
      scope_name: null,
      scope_version: null,
      scope_attributes: '{}',
      scope_dropped_attributes_count: 0,
      scope_schema_url: null,
    };
    const from = this.rowCounts();
    let late = false;
    let lists = 0;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === RESOURCE) {
        this.resource(s);
        late = this.spanRows.length > from[0];
      } else if (id === SCHEMA_URL) {
        s.resource_schema_url = str(j.scalar(), 'schemaUrl');
        late = this.spanRows.length > from[0];
      } else if (id !== SCOPE_SPANS) j.skip();
      else if (lists++ > 0) throw DECLINED;
      else if (j.array()) for (let f = true; j.next(f); f = false) this.scopeSpans({ ...s });
    }
    if (late) this.patch(from, s, RESOURCE_COLUMNS);
  }

  private resource(s: Shared): void {
    const j = this.j;
    const attrs = this.attrs;
    s.service_name = null;
    s.resource_attributes = '{}';
    s.resource_dropped_attributes_count = 0;
    let project: string | null | undefined;
    if (j.object()) {
      let dropped: Scalar | undefined;
      for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
        if (id === ATTRIBUTES) {
          s.resource_attributes = attrs.json(true);
          s.service_name = attrs.serviceName || null;
          project = attrs.projectId;
        } else if (id === DROPPED_ATTRIBUTES) dropped = j.scalar();
        else j.skip();
      }
      s.resource_dropped_attributes_count = int32(dropped, 'resource.droppedAttributesCount');
    }
    s.project_id = resourceProjectId(this.ctx, project);
  }

  private scopeSpans(s: Shared): void {
    const j = this.j;
    if (!j.object()) throw DECLINED;
    const from = this.rowCounts();
    let late = false;
    let lists = 0;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === SCOPE) {
        this.scope(s);
        late = this.spanRows.length > from[0];
      } else if (id === SCHEMA_URL) {
        s.scope_schema_url = str(j.scalar(), 'schemaUrl');
        late = this.spanRows.length > from[0];
      } else if (id !== SPANS) j.skip();
      else if (lists++ > 0) throw DECLINED;
      else if (j.array()) for (let f = true; j.next(f); f = false) this.span(s);
    }
    if (late) this.patch(from, s, SCOPE_COLUMNS);
  }

  private scope(s: Shared): void {
    const j = this.j;
    s.scope_name = null;
    s.scope_version = null;
    s.scope_attributes = '{}';
    s.scope_dropped_attributes_count = 0;
    if (!j.object()) return;
    let dropped: Scalar | undefined;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === NAME) s.scope_name = str(j.scalar(), 'scope.name');
      else if (id === VERSION) s.scope_version = str(j.scalar(), 'scope.version');
      else if (id === ATTRIBUTES) s.scope_attributes = this.attrs.json(false);
      else if (id === DROPPED_ATTRIBUTES) dropped = j.scalar();
      else j.skip();
    }
    s.scope_dropped_attributes_count = int32(dropped, 'scope.droppedAttributesCount');
  }

  private rowCounts(): [number, number, number] {
    return [this.spanRows.length, this.eventRows.length, this.linkRows.length];
  }

  /** Sets `columns` of the rows made since `from` to their values in `s`. */
  private patch(from: readonly number[], s: Shared, columns: readonly (keyof Shared)[]): void {
    const tables = [this.spanRows, this.eventRows, this.linkRows];
    for (let t = 0; t < 3; t++) {
      const rows = tables[t]!;
      for (let i = from[t]!; i < rows.length; i++) for (const c of columns) rows[i]![c] = s[c];
    }
  }

  private span(s: Shared): void {
    const j = this.j;
    if (!j.object()) throw DECLINED;
    const f: SpanFields = {
      traceId: undefined,
      spanId: undefined,
      parentSpanId: undefined,
      traceIdHex: false,
      spanIdHex: false,
      parentSpanIdHex: false,
      traceState: undefined,
      name: undefined,
      kind: undefined,
      start: undefined,
      end: undefined,
      flags: undefined,
      dropped: undefined,
      droppedEvents: undefined,
      droppedLinks: undefined,
      statusCode: undefined,
      statusMessage: undefined,
      hasStatus: false,
      attributes: '{}',
      eventsAt: -1,
      eventsCount: 0,
      linksAt: -1,
      linksCount: 0,
    };
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      switch (id) {
        case TRACE_ID:
          f.traceId = j.hexId(16);
          f.traceIdHex = f.traceId !== undefined;
          if (!f.traceIdHex) f.traceId = j.scalar();
          break;
        case SPAN_ID:
          f.spanId = j.hexId(8);
          f.spanIdHex = f.spanId !== undefined;
          if (!f.spanIdHex) f.spanId = j.scalar();
          break;
        case PARENT_SPAN_ID:
          f.parentSpanId = j.hexId(8);
          f.parentSpanIdHex = f.parentSpanId !== undefined;
          if (!f.parentSpanIdHex) f.parentSpanId = j.scalar();
          break;
        case TRACE_STATE:
          f.traceState = j.scalar();
          break;
        case NAME:
          f.name = j.scalar();
          break;
        case KIND:
          f.kind = j.scalar();
          break;
        case START:
          f.start = j.digits64() ?? j.scalar();
          break;
        case END:
          f.end = j.digits64() ?? j.scalar();
          break;
        case FLAGS:
          f.flags = j.scalar();
          break;
        case DROPPED_ATTRIBUTES:
          f.dropped = j.scalar();
          break;
        case DROPPED_EVENTS:
          f.droppedEvents = j.scalar();
          break;
        case DROPPED_LINKS:
          f.droppedLinks = j.scalar();
          break;
        case ATTRIBUTES:
          f.attributes = this.attrs.json(false);
          break;
        case STATUS:
          this.status(f);
          break;
        case EVENTS:
          f.eventsAt = j.pos;
          f.eventsCount = j.objects();
          break;
        case LINKS:
          f.linksAt = j.pos;
          f.linksCount = j.objects();
          break;
        default:
          j.skip();
      }
    }
    const after = j.pos;
    const st = this.st;
    const traceId = f.traceIdHex ? (f.traceId as string) : id(f.traceId, 16, 'span.traceId', st);
    const spanId = f.spanIdHex ? (f.spanId as string) : id(f.spanId, 8, 'span.spanId', st);
    const name = str(f.name, 'span.name');
    const start = int64(f.start, 'span.startTimeUnixNano');
    const end = int64(f.end, 'span.endTimeUnixNano');
    const eventTs = nanosToMicros(start);
    this.spanRows.push({
      project_id: s.project_id,
      event_ts: eventTs,
      service_name: s.service_name,
      trace_id: traceId,
      span_id: spanId,
      parent_span_id: f.parentSpanIdHex
        ? (f.parentSpanId as string)
        : id(f.parentSpanId, 8, 'span.parentSpanId', st),
      trace_state: str(f.traceState, 'span.traceState'),
      flags: flags(f.flags, 'span.flags'),
      name,
      kind: int32(f.kind, 'span.kind', SPAN_KIND),
      start_time_unix_nano: start,
      end_time_unix_nano: end,
      duration_ns: null, // derived by RowNormalizer, as for rows given to the library
      status_code: f.hasStatus ? int32(f.statusCode, 'span.status.code', STATUS_CODE) : 0,
      status_message: f.hasStatus ? str(f.statusMessage, 'span.status.message') : null,
      attributes: f.attributes,
      dropped_attributes_count: int32(f.dropped, 'span.droppedAttributesCount'),
      events_count: f.eventsCount,
      dropped_events_count: int32(f.droppedEvents, 'span.droppedEventsCount'),
      links_count: f.linksCount,
      dropped_links_count: int32(f.droppedLinks, 'span.droppedLinksCount'),
      resource_attributes: s.resource_attributes,
      resource_dropped_attributes_count: s.resource_dropped_attributes_count,
      resource_schema_url: s.resource_schema_url,
      scope_name: s.scope_name,
      scope_version: s.scope_version,
      scope_attributes: s.scope_attributes,
      scope_dropped_attributes_count: s.scope_dropped_attributes_count,
      scope_schema_url: s.scope_schema_url,
    });
    // Events and links were checked and counted above; now that the span is known, they are mapped.
    if (f.eventsCount > 0) {
      j.pos = f.eventsAt;
      j.array();
      for (let first = true; j.next(first); first = false) this.event(s, traceId, spanId, name);
    }
    if (f.linksCount > 0) {
      j.pos = f.linksAt;
      j.array();
      for (let first = true; j.next(first); first = false) this.link(s, traceId, spanId, name, eventTs);
    }
    j.pos = after;
  }

  /** A span's status (the last one counts, whole): code and message. */
  private status(f: SpanFields): void {
    const j = this.j;
    f.statusCode = undefined;
    f.statusMessage = undefined;
    f.hasStatus = j.object();
    if (!f.hasStatus) return;
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === CODE) f.statusCode = j.scalar();
      else if (id === MESSAGE) f.statusMessage = j.scalar();
      else j.skip();
    }
  }

  private event(s: Shared, traceId: string | null, spanId: string | null, spanName: string | null): void {
    const j = this.j;
    j.object();
    let time: Scalar | bigint | undefined;
    let name: Scalar | undefined;
    let dropped: Scalar | undefined;
    let attributes = '{}';
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === TIME) time = j.digits64() ?? j.scalar();
      else if (id === NAME) name = j.scalar();
      else if (id === ATTRIBUTES) attributes = this.attrs.json(false);
      else if (id === DROPPED_ATTRIBUTES) dropped = j.scalar();
      else j.skip();
    }
    const t = int64(time, 'event.timeUnixNano');
    this.eventRows.push({
      project_id: s.project_id,
      event_ts: nanosToMicros(t),
      service_name: s.service_name,
      trace_id: traceId,
      span_id: spanId,
      span_name: spanName,
      time_unix_nano: t,
      name: str(name, 'event.name'),
      attributes,
      dropped_attributes_count: int32(dropped, 'event.droppedAttributesCount'),
      resource_attributes: s.resource_attributes,
      resource_dropped_attributes_count: s.resource_dropped_attributes_count,
      resource_schema_url: s.resource_schema_url,
      scope_name: s.scope_name,
      scope_version: s.scope_version,
      scope_attributes: s.scope_attributes,
      scope_dropped_attributes_count: s.scope_dropped_attributes_count,
      scope_schema_url: s.scope_schema_url,
    });
  }

  private link(
    s: Shared,
    traceId: string | null,
    spanId: string | null,
    spanName: string | null,
    eventTs: bigint,
  ): void {
    const j = this.j;
    j.object();
    let linkedTrace: Scalar | undefined;
    let linkedSpan: Scalar | undefined;
    let traceState: Scalar | undefined;
    let linkFlags: Scalar | undefined;
    let dropped: Scalar | undefined;
    let attributes = '{}';
    for (let id = key(j, FIRST_KEY); id !== END_OF_OBJECT; id = key(j, id)) {
      if (id === TRACE_ID) linkedTrace = j.scalar();
      else if (id === SPAN_ID) linkedSpan = j.scalar();
      else if (id === TRACE_STATE) traceState = j.scalar();
      else if (id === FLAGS) linkFlags = j.scalar();
      else if (id === ATTRIBUTES) attributes = this.attrs.json(false);
      else if (id === DROPPED_ATTRIBUTES) dropped = j.scalar();
      else j.skip();
    }
    const st = this.st;
    this.linkRows.push({
      project_id: s.project_id,
      event_ts: eventTs,
      service_name: s.service_name,
      trace_id: traceId,
      span_id: spanId,
      span_name: spanName,
      linked_trace_id: id(linkedTrace, 16, 'link.traceId', st),
      linked_span_id: id(linkedSpan, 8, 'link.spanId', st),
      trace_state: str(traceState, 'link.traceState'),
      flags: flags(linkFlags, 'link.flags'),
      attributes,
      dropped_attributes_count: int32(dropped, 'link.droppedAttributesCount'),
      resource_attributes: s.resource_attributes,
      resource_dropped_attributes_count: s.resource_dropped_attributes_count,
      resource_schema_url: s.resource_schema_url,
      scope_name: s.scope_name,
      scope_version: s.scope_version,
      scope_attributes: s.scope_attributes,
      scope_dropped_attributes_count: s.scope_dropped_attributes_count,
      scope_schema_url: s.scope_schema_url,
    });
  }
}

const RESOURCE_COLUMNS: readonly (keyof Shared)[] = [
  'project_id',
  'service_name',
  'resource_attributes',
  'resource_dropped_attributes_count',
  'resource_schema_url',
];
const SCOPE_COLUMNS: readonly (keyof Shared)[] = [
  'scope_name',
  'scope_version',
  'scope_attributes',
  'scope_dropped_attributes_count',
  'scope_schema_url',
];

/**
 * Writes a KeyValue list as JSON text, byte for byte what `attributesJson` gives for the parsed
 * list: keys and string values are copied as they stand. A list this does not take (a repeated
 * or integer-like key, a value that is not one string, int, bool or double, a key after its
 * value, a key with escapes) is parsed alone and given to `attributesJson`.
 */
class JsonAttributes {
  private readonly j: JsonReader;
  private out: Buffer = scratch;
  private len = 0;
  /** Whether a byte beyond ASCII was written (the text is then decoded as UTF-8). */
  private nonAscii = false;
  /** Key ranges of the list being written, for the repeated-key check. */
  private keys: number[] = [];
  private nKeys = 0;
  /** Set by `json(true)`: the list's service.name and project.id (`stringAttribute`). */
  serviceName: string | null = null;
  projectId: string | null | undefined;

  constructor(j: JsonReader) {
    this.j = j;
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
    this.nKeys = 0;
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
        if (!this.newKey(keyStart, keyEnd)) return this.giveUp(at);
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
        this.ascii(jsonText(jsonDouble(double(v, 'doubleValue'))));
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
   * "v"}} (or a canonical intValue, or a boolValue), without whitespace or escapes, in one pass;
   * false, having read nothing, for any other form.
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
    } else if (BOOL_MEMBER.at(j, p)) {
      p += BOOL_MEMBER.length;
      const word = TRUE.at(j, p) ? TRUE : FALSE.at(j, p) ? FALSE : null;
      if (word === null) return false;
      for (let i = 0; i < word.length; i++) out[o++] = buf[p++]!;
    } else return false;
    if (buf[p] !== 0x7d || buf[p + 1] !== 0x7d || o > out.length) return false;
    if (!this.newKey(keyStart, keyEnd)) return false;
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

  /** Records a key of the list; false when it repeats one or looks like an array index. */
  private newKey(start: number, end: number): boolean {
    const buf = this.j.buf;
    let digits = end > start;
    for (let i = start; i < end && digits; i++) digits = buf[i]! >= 0x30 && buf[i]! <= 0x39;
    if (digits) return false;
    // Quadratic, like the wire writer's: a longer list goes the parsed way.
    if (this.nKeys >= 2 * MAX_WRITTEN_KEYS) return false;
    const keys = this.keys;
    const n = end - start;
    for (let i = 0; i < this.nKeys; i += 2) {
      const s = keys[i]!;
      if (keys[i + 1]! - s === n && equalRange(buf, s, start, n)) return false;
    }
    keys[this.nKeys++] = start;
    keys[this.nKeys++] = end;
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

  private byte(c: number): void {
    this.reserve(1);
    this.out[this.len++] = c;
  }

  private reserve(n: number): void {
    if (this.len + n <= this.out.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.out.length * 2, this.len + n));
    this.out.copy(bigger, 0, 0, this.len);
    this.out = scratch = bigger;
  }
}

/** Where attribute lists are written, kept from request to request (a mapper runs to its end alone). */
const SCRATCH_BYTES = 64 * 1024;
const SCRATCH_KEPT = 1024 * 1024;
let scratch = Buffer.allocUnsafe(SCRATCH_BYTES);
/** Room `compact` makes before a KeyValue; a longer one is written by `keyValue`. */
const COMPACT_ROOM = 4096;

const KV_KEY = new Literal('{"key":"');
const KV_VALUE = new Literal('","value":{"');
const STRING_MEMBER = new Literal('stringValue":"');
const INT_MEMBER = new Literal('intValue":');
const BOOL_MEMBER = new Literal('boolValue":');
const TRUE = new Literal('true');
const FALSE = new Literal('false');

/** Bytes a string's content may hold as it stands: all but quote, backslash and controls. */
const PLAIN = new Uint8Array(256).fill(1);
PLAIN.fill(0, 0, 0x20);
PLAIN[0x22] = 0;
PLAIN[0x5c] = 0;

/** An int64 or double as values.ts' jsonInt or jsonDouble gives it, as JSON text. */
function jsonText(v: number | string): string {
  return typeof v === 'number' ? String(v) : `"${v}"`;
}

function equalBytes(buf: Buffer, start: number, end: number, name: Buffer): boolean {
  if (end - start !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[start + i] !== name[i]) return false;
  return true;
}

function equalRange(buf: Buffer, a: number, b: number, n: number): boolean {
  for (let i = 0; i < n; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}
