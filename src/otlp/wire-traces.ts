// Maps a protobuf ExportTraceServiceRequest straight from its bytes to spans, span_events and
// span_links rows: the same rows map.ts gives for the protobufjs message tree (a test holds the two
// equal), without the tree. Spans are the service's largest stream, and the tree cost a third of a
// decode worker's time. Field numbers are those of proto/opentelemetry/proto/trace/v1/trace.proto.

import type { Row } from '../schema/tables.ts';
import { nanosToMicros } from '../schema/time.ts';
import type { MapContext, Mapped } from './map.ts';
import { int32, str } from './values.ts';
import { I32, I64, LEN, Ranges, tag, VARINT } from './wire.ts';
import { RequestWalker, type Shared } from './wire-request.ts';

// Span
const TRACE_ID = tag(1, LEN);
const SPAN_ID = tag(2, LEN);
const TRACE_STATE = tag(3, LEN);
const PARENT_SPAN_ID = tag(4, LEN);
const NAME = tag(5, LEN);
const KIND = tag(6, VARINT);
const START = tag(7, I64);
const END = tag(8, I64);
const ATTRIBUTES = tag(9, LEN);
const DROPPED_ATTRIBUTES = tag(10, VARINT);
const EVENTS = tag(11, LEN);
const DROPPED_EVENTS = tag(12, VARINT);
const LINKS = tag(13, LEN);
const DROPPED_LINKS = tag(14, VARINT);
const STATUS = tag(15, LEN);
const FLAGS = tag(16, I32);
// Span.Event
const EVENT_TIME = tag(1, I64);
const EVENT_NAME = tag(2, LEN);
const EVENT_ATTRIBUTES = tag(3, LEN);
const EVENT_DROPPED = tag(4, VARINT);
// Span.Link (trace id, span id and trace state share the span's numbers 1-3)
const LINK_ATTRIBUTES = tag(4, LEN);
const LINK_DROPPED = tag(5, VARINT);
const LINK_FLAGS = tag(6, I32);
// Status
const STATUS_MESSAGE = tag(2, LEN);
const STATUS_CODE = tag(3, VARINT);

class TraceMapper extends RequestWalker {
  private readonly events = new Ranges();
  private readonly links = new Ranges();
  private readonly spanRows: Row[] = [];
  private readonly eventRows: Row[] = [];
  private readonly linkRows: Row[] = [];

  map(): Mapped {
    this.walk();
    const tables: Mapped['tables'] = {};
    if (this.spanRows.length > 0) tables.spans = this.spanRows;
    if (this.eventRows.length > 0) tables.span_events = this.eventRows;
    if (this.linkRows.length > 0) tables.span_links = this.linkRows;
    return { tables, items: this.spanRows.length, invalidIds: this.invalidIds };
  }

  /** A span, then its events and links. */
  protected item(start: number, end: number, s: Shared): void {
    const r = this.r;
    const attrs = this.attributes;
    const events = this.events;
    const links = this.links;
    attrs.reset();
    events.reset();
    links.reset();
    let traceId = 0;
    let traceIdEnd = 0;
    let spanId = 0;
    let spanIdEnd = 0;
    let parentId = 0;
    let parentIdEnd = 0;
    let traceState = '';
    let name = '';
    let kind = 0;
    let startNano = 0n;
    let endNano = 0n;
    let flags = 0;
    let dropped = 0;
    let droppedEvents = 0;
    let droppedLinks = 0;
    let statusStart = -1;
    let statusEnd = -1;
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      switch (t) {
        case TRACE_ID:
        case SPAN_ID:
        case PARENT_SPAN_ID:
        case TRACE_STATE:
        case NAME:
        case ATTRIBUTES:
        case EVENTS:
        case LINKS:
        case STATUS: {
          const n = r.length(end);
          const at = r.pos;
          r.pos += n;
          if (t === ATTRIBUTES) attrs.push(at, at + n);
          else if (t === EVENTS) events.push(at, at + n);
          else if (t === LINKS) links.push(at, at + n);
          else if (t === NAME) name = r.string(at, at + n);
          else if (t === TRACE_ID) {
            traceId = at;
            traceIdEnd = at + n;
          } else if (t === SPAN_ID) {
            spanId = at;
            spanIdEnd = at + n;
          } else if (t === PARENT_SPAN_ID) {
            parentId = at;
            parentIdEnd = at + n;
          } else if (t === TRACE_STATE) traceState = r.string(at, at + n);
          else {
            statusStart = at;
            statusEnd = at + n;
          }
          break;
        }
        case KIND:
          kind = r.uint32(end) | 0;
          break;
        case START:
          startNano = r.fixed64(end);
          break;
        case END:
          endNano = r.fixed64(end);
          break;
        case FLAGS:
          flags = r.fixed32(end);
          break;
        case DROPPED_ATTRIBUTES:
          dropped = r.uint32(end);
          break;
        case DROPPED_EVENTS:
          droppedEvents = r.uint32(end);
          break;
        case DROPPED_LINKS:
          droppedLinks = r.uint32(end);
          break;
        default:
          r.skip(t & 7, end);
      }
    }
    let statusCode = 0;
    let statusMessage = '';
    if (statusStart >= 0) {
      r.pos = statusStart;
      while (r.pos < statusEnd) {
        const t = r.uint32(statusEnd);
        if (t === STATUS_CODE) statusCode = r.uint32(statusEnd) | 0;
        else if (t === STATUS_MESSAGE) {
          const n = r.length(statusEnd);
          statusMessage = r.string(r.pos, r.pos + n);
          r.pos += n;
        } else r.skip(t & 7, statusEnd);
      }
    }
    const trace = this.id(traceId, traceIdEnd, 16);
    const span = this.id(spanId, spanIdEnd, 8);
    const spanName = str(name, 'span.name');
    const eventTs = nanosToMicros(startNano);
    this.spanRows.push({
      project_id: s.project_id,
      event_ts: eventTs,
      service_name: s.service_name,
      trace_id: trace,
      span_id: span,
      parent_span_id: this.id(parentId, parentIdEnd, 8),
      trace_state: str(traceState, 'span.traceState'),
      flags: BigInt(flags),
      name: spanName,
      kind,
      start_time_unix_nano: startNano,
      end_time_unix_nano: endNano,
      duration_ns: null, // derived by RowNormalizer, as for rows given to the library
      status_code: statusCode,
      status_message: str(statusMessage, 'span.status.message'),
      attributes: this.writer.json(attrs),
      dropped_attributes_count: int32(dropped, 'span.droppedAttributesCount'),
      events_count: events.n / 2,
      dropped_events_count: int32(droppedEvents, 'span.droppedEventsCount'),
      links_count: links.n / 2,
      dropped_links_count: int32(droppedLinks, 'span.droppedLinksCount'),
      resource_attributes: s.resource_attributes,
      resource_dropped_attributes_count: s.resource_dropped_attributes_count,
      resource_schema_url: s.resource_schema_url,
      scope_name: s.scope_name,
      scope_version: s.scope_version,
      scope_attributes: s.scope_attributes,
      scope_dropped_attributes_count: s.scope_dropped_attributes_count,
      scope_schema_url: s.scope_schema_url,
    });
    for (let i = 0; i < events.n; i += 2)
      this.event(events.at[i]!, events.at[i + 1]!, s, trace, span, spanName);
    for (let i = 0; i < links.n; i += 2)
      this.link(links.at[i]!, links.at[i + 1]!, s, trace, span, spanName, eventTs);
  }

  private event(
    start: number,
    end: number,
    s: Shared,
    traceId: string | null,
    spanId: string | null,
    spanName: string | null,
  ): void {
    const r = this.r;
    const attrs = this.attributes;
    attrs.reset();
    let time = 0n;
    let name = '';
    let dropped = 0;
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      if (t === EVENT_TIME) time = r.fixed64(end);
      else if (t === EVENT_NAME || t === EVENT_ATTRIBUTES) {
        const n = r.length(end);
        const at = r.pos;
        r.pos += n;
        if (t === EVENT_NAME) name = r.string(at, at + n);
        else attrs.push(at, at + n);
      } else if (t === EVENT_DROPPED) dropped = r.uint32(end);
      else r.skip(t & 7, end);
    }
    this.eventRows.push({
      project_id: s.project_id,
      event_ts: nanosToMicros(time),
      service_name: s.service_name,
      trace_id: traceId,
      span_id: spanId,
      span_name: spanName,
      time_unix_nano: time,
      name: str(name, 'event.name'),
      attributes: this.writer.json(attrs),
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
    start: number,
    end: number,
    s: Shared,
    traceId: string | null,
    spanId: string | null,
    spanName: string | null,
    eventTs: bigint,
  ): void {
    const r = this.r;
    const attrs = this.attributes;
    attrs.reset();
    let linkedTrace = 0;
    let linkedTraceEnd = 0;
    let linkedSpan = 0;
    let linkedSpanEnd = 0;
    let traceState = '';
    let flags = 0;
    let dropped = 0;
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      if (t === TRACE_ID || t === SPAN_ID || t === TRACE_STATE || t === LINK_ATTRIBUTES) {
        const n = r.length(end);
        const at = r.pos;
        r.pos += n;
        if (t === TRACE_ID) {
          linkedTrace = at;
          linkedTraceEnd = at + n;
        } else if (t === SPAN_ID) {
          linkedSpan = at;
          linkedSpanEnd = at + n;
        } else if (t === TRACE_STATE) traceState = r.string(at, at + n);
        else attrs.push(at, at + n);
      } else if (t === LINK_FLAGS) flags = r.fixed32(end);
      else if (t === LINK_DROPPED) dropped = r.uint32(end);
      else r.skip(t & 7, end);
    }
    this.linkRows.push({
      project_id: s.project_id,
      event_ts: eventTs,
      service_name: s.service_name,
      trace_id: traceId,
      span_id: spanId,
      span_name: spanName,
      linked_trace_id: this.id(linkedTrace, linkedTraceEnd, 16),
      linked_span_id: this.id(linkedSpan, linkedSpanEnd, 8),
      trace_state: str(traceState, 'link.traceState'),
      flags: BigInt(flags),
      attributes: this.writer.json(attrs),
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

/** Maps a protobuf traces request body to rows. Throws OtlpDecodeError for an invalid body. */
export function mapTraceBytes(body: Uint8Array, ctx: MapContext): Mapped {
  return new TraceMapper(body, ctx).map();
}
