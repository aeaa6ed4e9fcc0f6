// The walk protobuf traces and logs requests share: request -> ResourceSpans|ResourceLogs ->
// ScopeSpans|ScopeLogs -> span or log record. It reads the resource and scope columns every row
// carries (as map.ts' resourceCols and scopeCols do); a subclass maps the items. Field numbers are
// those of proto/opentelemetry/proto/{trace,logs}/v1/*.proto and resource/v1/resource.proto.

import { resourceProjectId } from '../schema/project.ts';
import type { MapContext, ResourceCols, ScopeCols } from './map.ts';
import { int32, str } from './values.ts';
import { AttributesWriter, LEN, Ranges, stringAttribute, tag, VARINT, WireReader } from './wire.ts';

// The request's repeated resource_spans or resource_logs
const RESOURCES = tag(1, LEN);
// ResourceSpans|ResourceLogs (resource, scope_*, schema_url), ScopeSpans|ScopeLogs (scope, items, schema_url)
const HEAD = tag(1, LEN);
const ITEMS = tag(2, LEN);
const SCHEMA_URL = tag(3, LEN);
// Resource
const RESOURCE_ATTRIBUTES = tag(1, LEN);
const RESOURCE_DROPPED = tag(2, VARINT);
// InstrumentationScope
const SCOPE_NAME = tag(1, LEN);
const SCOPE_VERSION = tag(2, LEN);
const SCOPE_ATTRIBUTES = tag(3, LEN);
const SCOPE_DROPPED = tag(4, VARINT);

const SERVICE_NAME_KEY = Buffer.from('service.name');
const PROJECT_ID_KEY = Buffer.from('project.id');

/** The columns every row of one resource and scope shares (map.ts' resourceCols and scopeCols). */
export type Shared = ResourceCols & ScopeCols;

/** Where the resource or scope of an envelope (below) is (-1: absent), and its schema URL. */
interface Envelope {
  start: number;
  end: number;
  schemaUrl: string | null;
}

export abstract class RequestWalker {
  protected readonly r: WireReader;
  protected readonly writer: AttributesWriter;
  private readonly ctx: MapContext;
  protected invalidIds = 0;
  // Element ranges, reused; each is read before the next message of its kind is gathered.
  private readonly resources = new Ranges();
  private readonly scopes = new Ranges();
  private readonly items = new Ranges();
  /** Attribute ranges of the message being mapped (resource, scope, then each item in turn). */
  protected readonly attributes = new Ranges();

  constructor(body: Uint8Array, ctx: MapContext) {
    this.r = new WireReader(body);
    this.writer = new AttributesWriter(this.r);
    this.ctx = ctx;
  }

  /** Maps the item (span or log record) in [start, end) with the columns of its resource and scope. */
  protected abstract item(start: number, end: number, s: Shared): void;

  /** Maps every item of the request. */
  protected walk(): void {
    const resources = this.r.collect(0, this.r.buf.length, RESOURCES, this.resources);
    for (let i = 0; i < resources.n; i += 2) this.resourceItems(resources.at[i]!, resources.at[i + 1]!);
  }

  private resourceItems(start: number, end: number): void {
    const scopes = this.scopes;
    const e = this.envelope(start, end, scopes);
    const shared = this.resource(e.start, e.end, e.schemaUrl);
    for (let i = 0; i < scopes.n; i += 2) this.scope(scopes.at[i]!, scopes.at[i + 1]!, shared);
  }

  /**
   * Reads a ResourceSpans|ResourceLogs or ScopeSpans|ScopeLogs: field 1 the resource or scope
   * (the last one counts), 2 the repeated items, gathered into `items`, 3 the schema URL (which
   * may come after the items).
   */
  private envelope(start: number, end: number, items: Ranges): Envelope {
    const r = this.r;
    const e: Envelope = { start: -1, end: -1, schemaUrl: null };
    items.reset();
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      if (t === HEAD || t === ITEMS || t === SCHEMA_URL) {
        const n = r.length(end);
        const at = r.pos;
        r.pos += n;
        if (t === HEAD) {
          e.start = at;
          e.end = at + n;
        } else if (t === ITEMS) items.push(at, at + n);
        else e.schemaUrl = str(r.string(at, at + n), 'schemaUrl');
      } else r.skip(t & 7, end);
    }
    return e;
  }

  private resource(start: number, end: number, schemaUrl: string | null): Shared {
    const r = this.r;
    const attrs = this.attributes;
    attrs.reset();
    let dropped = 0;
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      if (t === RESOURCE_ATTRIBUTES) {
        const n = r.length(end);
        attrs.push(r.pos, r.pos + n);
        r.pos += n;
      } else if (t === RESOURCE_DROPPED) dropped = r.uint32(end);
      else r.skip(t & 7, end);
    }
    return {
      project_id: resourceProjectId(this.ctx, stringAttribute(r, attrs, PROJECT_ID_KEY)),
      service_name: stringAttribute(r, attrs, SERVICE_NAME_KEY) || null,
      resource_attributes: this.writer.json(attrs),
      resource_dropped_attributes_count: int32(dropped, 'resource.droppedAttributesCount'),
      resource_schema_url: schemaUrl,
      scope_name: null,
      scope_version: null,
      scope_attributes: '{}',
      scope_dropped_attributes_count: 0,
      scope_schema_url: null,
    };
  }

  private scope(start: number, end: number, resource: Shared): void {
    const items = this.items;
    const e = this.envelope(start, end, items);
    const shared: Shared = { ...resource, scope_schema_url: e.schemaUrl };
    if (e.start >= 0) this.scopeColumns(e.start, e.end, shared);
    for (let i = 0; i < items.n; i += 2) this.item(items.at[i]!, items.at[i + 1]!, shared);
  }

  private scopeColumns(start: number, end: number, s: Shared): void {
    const r = this.r;
    const attrs = this.attributes;
    attrs.reset();
    let name = '';
    let version = '';
    let dropped = 0;
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      if (t === SCOPE_NAME || t === SCOPE_VERSION || t === SCOPE_ATTRIBUTES) {
        const n = r.length(end);
        const at = r.pos;
        r.pos += n;
        if (t === SCOPE_NAME) name = r.string(at, at + n);
        else if (t === SCOPE_VERSION) version = r.string(at, at + n);
        else attrs.push(at, at + n);
      } else if (t === SCOPE_DROPPED) dropped = r.uint32(end);
      else r.skip(t & 7, end);
    }
    s.scope_name = str(name, 'scope.name');
    s.scope_version = str(version, 'scope.version');
    s.scope_attributes = this.writer.json(attrs);
    s.scope_dropped_attributes_count = int32(dropped, 'scope.droppedAttributesCount');
  }

  /**
   * The trace id (16 bytes) or span id (8) in [start, end) as hex: null when empty (or never sent:
   * start = end = 0), null and counted when invalid (values.ts' id).
   */
  protected id(start: number, end: number, byteLength: number): string | null {
    if (start === end) return null;
    const buf = this.r.buf;
    let any = 0;
    for (let i = start; i < end; i++) any |= buf[i]!;
    if (end - start !== byteLength || any === 0) {
      this.invalidIds++;
      return null;
    }
    return buf.toString('hex', start, end);
  }
}
