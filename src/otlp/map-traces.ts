// Maps an ExportTraceServiceRequest, read through either reader, to spans, span_events and
// span_links columns. A span's events and links are rows of their own, tied to the span by its
// trace id, span id and name (written down their rows when the span ends: ids may come last).

import { nanosToMicros } from '../schema/time.ts';
import { columnsOf, TableRows } from './columns.ts';
import { EVENT, F, LINK, RESOURCE_SPANS, SCOPE_SPANS, SPAN, STATUS, TRACES_REQUEST } from './messages.ts';
import { END, type OtlpReader, type ReadId } from './reader.ts';
import type { MapContext } from './request.ts';
import { SPAN_KIND, STATUS_CODE } from './values.ts';
import { RequestWalker } from './walk.ts';

const S = columnsOf('spans', [
  'event_ts',
  'trace_id',
  'span_id',
  'parent_span_id',
  'trace_state',
  'flags',
  'name',
  'kind',
  'start_time_unix_nano',
  'end_time_unix_nano',
  'status_code',
  'status_message',
  'attributes',
  'dropped_attributes_count',
  'events_count',
  'dropped_events_count',
  'links_count',
  'dropped_links_count',
]);
const E = columnsOf('span_events', [
  'event_ts',
  'trace_id',
  'span_id',
  'span_name',
  'time_unix_nano',
  'name',
  'attributes',
  'dropped_attributes_count',
]);
const L = columnsOf('span_links', [
  'event_ts',
  'trace_id',
  'span_id',
  'span_name',
  'linked_trace_id',
  'linked_span_id',
  'trace_state',
  'flags',
  'attributes',
  'dropped_attributes_count',
]);

export class TraceMapper extends RequestWalker {
  private readonly spans: TableRows;
  private readonly events: TableRows;
  private readonly links: TableRows;

  constructor(r: OtlpReader, ctx: MapContext) {
    const spans = new TableRows('spans', ctx.maxRows);
    const events = new TableRows('span_events', ctx.maxRows);
    const links = new TableRows('span_links', ctx.maxRows);
    super(
      r,
      ctx,
      {
        request: TRACES_REQUEST,
        resources: F.resourceSpans,
        resource: RESOURCE_SPANS,
        scopes: F.scopeSpans,
        scope: SCOPE_SPANS,
        items: F.spans,
        item: SPAN,
      },
      [spans, events, links],
    );
    this.spans = spans;
    this.events = events;
    this.links = links;
  }

  protected items(): number {
    return this.spans.flushed + this.spans.n;
  }

  /** A span, its events and links. Its duration_ns is left to the normalizer. */
  protected item(): void {
    const r = this.r;
    const { spans, events, links } = this;
    const row = spans.add();
    const eventsFrom = events.n;
    const linksFrom = links.n;
    let traceId: ReadId = null;
    let spanId: ReadId = null;
    let parentId: ReadId = null;
    let traceState: string | null = null;
    let name: string | null = null;
    let kind = 0;
    let start = 0n;
    let end = 0n;
    let flags = 0n;
    let dropped = 0;
    let droppedEvents = 0;
    let droppedLinks = 0;
    let statusCode = 0;
    let statusMessage: string | null = null;
    for (let f = r.next(); f !== END; f = r.next()) {
      switch (f) {
        case F.traceId:
          traceId = r.id(16);
          break;
        case F.spanId:
          spanId = r.id(8);
          break;
        case F.parentSpanId:
          parentId = r.id(8);
          break;
        case F.traceState:
          traceState = r.string();
          break;
        case F.name:
          name = r.string();
          break;
        case F.kind:
          kind = r.int32(SPAN_KIND);
          break;
        case F.startTimeUnixNano:
          start = r.int64();
          break;
        case F.endTimeUnixNano:
          end = r.int64();
          break;
        case F.flags:
          flags = r.flags();
          break;
        case F.attributes:
          r.attributes();
          break;
        case F.droppedAttributesCount:
          dropped = r.int32();
          break;
        case F.events:
          if (r.enter(EVENT)) this.event();
          break;
        case F.droppedEventsCount:
          droppedEvents = r.int32();
          break;
        case F.links:
          if (r.enter(LINK)) this.link();
          break;
        case F.droppedLinksCount:
          droppedLinks = r.int32();
          break;
        case F.status:
          statusCode = 0;
          statusMessage = null;
          if (!r.enter(STATUS)) break;
          for (let g = r.next(); g !== END; g = r.next()) {
            if (g === F.code) statusCode = r.int32(STATUS_CODE);
            else if (g === F.message) statusMessage = r.string();
            else r.skip();
          }
          break;
        default:
          r.skip();
      }
    }
    const trace = this.checkId(traceId);
    const span = this.checkId(spanId);
    const eventTs = nanosToMicros(start);
    spans.set(S.event_ts, row, eventTs);
    spans.set(S.trace_id, row, trace);
    spans.set(S.span_id, row, span);
    spans.set(S.parent_span_id, row, this.checkId(parentId));
    spans.set(S.trace_state, row, traceState);
    spans.set(S.flags, row, flags);
    spans.set(S.name, row, name);
    spans.set(S.kind, row, kind);
    spans.set(S.start_time_unix_nano, row, start);
    spans.set(S.end_time_unix_nano, row, end);
    spans.set(S.status_code, row, statusCode);
    spans.set(S.status_message, row, statusMessage);
    spans.set(S.attributes, row, r.attributesJson());
    spans.set(S.dropped_attributes_count, row, dropped);
    spans.set(S.events_count, row, events.n - eventsFrom);
    spans.set(S.dropped_events_count, row, droppedEvents);
    spans.set(S.links_count, row, links.n - linksFrom);
    spans.set(S.dropped_links_count, row, droppedLinks);
    events.fill(E.trace_id, eventsFrom, trace);
    events.fill(E.span_id, eventsFrom, span);
    events.fill(E.span_name, eventsFrom, name);
    links.fill(L.trace_id, linksFrom, trace);
    links.fill(L.span_id, linksFrom, span);
    links.fill(L.span_name, linksFrom, name);
    // A link has no time of its own: its row is ordered by the span's start.
    links.fill(L.event_ts, linksFrom, eventTs);
  }

  private event(): void {
    const r = this.r;
    const events = this.events;
    const row = events.add();
    let time = 0n;
    let name: string | null = null;
    let dropped = 0;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.timeUnixNano) time = r.int64();
      else if (f === F.name) name = r.string();
      else if (f === F.attributes) r.attributes();
      else if (f === F.droppedAttributesCount) dropped = r.int32();
      else r.skip();
    }
    events.set(E.event_ts, row, nanosToMicros(time));
    events.set(E.time_unix_nano, row, time);
    events.set(E.name, row, name);
    events.set(E.attributes, row, r.attributesJson());
    events.set(E.dropped_attributes_count, row, dropped);
  }

  private link(): void {
    const r = this.r;
    const links = this.links;
    const row = links.add();
    let traceId: ReadId = null;
    let spanId: ReadId = null;
    let traceState: string | null = null;
    let flags = 0n;
    let dropped = 0;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.traceId) traceId = r.id(16);
      else if (f === F.spanId) spanId = r.id(8);
      else if (f === F.traceState) traceState = r.string();
      else if (f === F.flags) flags = r.flags();
      else if (f === F.attributes) r.attributes();
      else if (f === F.droppedAttributesCount) dropped = r.int32();
      else r.skip();
    }
    links.set(L.linked_trace_id, row, this.checkId(traceId));
    links.set(L.linked_span_id, row, this.checkId(spanId));
    links.set(L.trace_state, row, traceState);
    links.set(L.flags, row, flags);
    links.set(L.attributes, row, r.attributesJson());
    links.set(L.dropped_attributes_count, row, dropped);
  }
}
