// Maps a protobuf ExportLogsServiceRequest straight from its bytes to logs rows: the same rows
// map.ts gives for the protobufjs message tree (a test holds the two equal), without the tree.
// Field numbers are those of proto/opentelemetry/proto/logs/v1/logs.proto.

import type { Row } from '../schema/tables.ts';
import type { MapContext, Mapped } from './map.ts';
import { int32, str } from './values.ts';
import { I32, I64, LEN, tag, VARINT } from './wire.ts';
import { RequestWalker, type Shared } from './wire-request.ts';

// LogRecord
const TIME = tag(1, I64);
const SEVERITY_NUMBER = tag(2, VARINT);
const SEVERITY_TEXT = tag(3, LEN);
const BODY = tag(5, LEN);
const ATTRIBUTES = tag(6, LEN);
const DROPPED_ATTRIBUTES = tag(7, VARINT);
const FLAGS = tag(8, I32);
const TRACE_ID = tag(9, LEN);
const SPAN_ID = tag(10, LEN);
const OBSERVED_TIME = tag(11, I64);
const EVENT_NAME = tag(12, LEN);

class LogMapper extends RequestWalker {
  private readonly rows: Row[] = [];

  map(): Mapped {
    this.walk();
    return {
      tables: this.rows.length > 0 ? { logs: this.rows } : {},
      items: this.rows.length,
      invalidIds: this.invalidIds,
    };
  }

  protected item(start: number, end: number, s: Shared): void {
    const r = this.r;
    const attrs = this.attributes;
    attrs.reset();
    let time = 0n;
    let observed = 0n;
    let severity = 0;
    let severityText = '';
    let bodyStart = -1;
    let bodyEnd = -1;
    let dropped = 0;
    let flags = 0;
    let traceId = 0;
    let traceIdEnd = 0;
    let spanId = 0;
    let spanIdEnd = 0;
    let eventName = '';
    r.pos = start;
    while (r.pos < end) {
      const t = r.uint32(end);
      switch (t) {
        case SEVERITY_TEXT:
        case BODY:
        case ATTRIBUTES:
        case TRACE_ID:
        case SPAN_ID:
        case EVENT_NAME: {
          const n = r.length(end);
          const at = r.pos;
          r.pos += n;
          if (t === ATTRIBUTES) attrs.push(at, at + n);
          else if (t === BODY) {
            bodyStart = at;
            bodyEnd = at + n;
          } else if (t === TRACE_ID) {
            traceId = at;
            traceIdEnd = at + n;
          } else if (t === SPAN_ID) {
            spanId = at;
            spanIdEnd = at + n;
          } else if (t === SEVERITY_TEXT) severityText = r.string(at, at + n);
          else eventName = r.string(at, at + n);
          break;
        }
        case TIME:
          time = r.fixed64(end);
          break;
        case OBSERVED_TIME:
          observed = r.fixed64(end);
          break;
        case SEVERITY_NUMBER:
          severity = r.uint32(end) | 0;
          break;
        case DROPPED_ATTRIBUTES:
          dropped = r.uint32(end);
          break;
        case FLAGS:
          flags = r.fixed32(end);
          break;
        default:
          r.skip(t & 7, end);
      }
    }
    this.rows.push({
      project_id: s.project_id,
      // Derived by RowNormalizer (time, else observed, else arrival), as for library rows.
      event_ts: null,
      service_name: s.service_name,
      time_unix_nano: time,
      observed_time_unix_nano: observed,
      severity_number: severity,
      severity_text: str(severityText, 'logRecord.severityText'),
      body: bodyStart < 0 ? null : this.writer.body(bodyStart, bodyEnd),
      attributes: this.writer.json(attrs),
      trace_id: this.id(traceId, traceIdEnd, 16),
      span_id: this.id(spanId, spanIdEnd, 8),
      flags: BigInt(flags),
      event_name: str(eventName, 'logRecord.eventName'),
      dropped_attributes_count: int32(dropped, 'logRecord.droppedAttributesCount'),
      schema_version: null,
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

/** Maps a protobuf logs request body to rows. Throws OtlpDecodeError for an invalid body. */
export function mapLogBytes(body: Uint8Array, ctx: MapContext): Mapped {
  return new LogMapper(body, ctx).map();
}
