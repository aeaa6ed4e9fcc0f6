// Maps an ExportMetricsServiceRequest, read through either reader, to metrics_points (gauge and
// sum points) and metrics_hist (histogram, exponential histogram and summary points) columns. A
// point's metric columns (name, type, temporality...) are written down its rows when the metric
// ends: protobuf sends a metric's metadata after its points.

import { nanosToMicros } from '../schema/time.ts';
import { columnsOf, float64Cell, Int64List, TableRows } from './columns.ts';
import {
  BUCKETS,
  EXEMPLAR,
  EXPONENTIAL_HISTOGRAM,
  EXPONENTIAL_POINT,
  F,
  GAUGE,
  HISTOGRAM,
  HISTOGRAM_POINT,
  METRIC,
  METRICS_REQUEST,
  type MessageType,
  NUMBER_POINT,
  QUANTILE,
  RESOURCE_METRICS,
  SCOPE_METRICS,
  SUM,
  SUMMARY,
  SUMMARY_POINT,
} from './messages.ts';
import { END, type OtlpReader, type ReadId } from './reader.ts';
import type { MapContext } from './request.ts';
import { jsonDouble, jsonInt, jsonText, TEMPORALITY } from './values.ts';
import { RequestWalker } from './walk.ts';

/** The columns both metric tables have (not all at the same positions). */
const METRIC_COLUMNS = [
  'event_ts',
  'metric_name',
  'description',
  'unit',
  'metric_type',
  'metric_metadata',
  'aggregation_temporality',
  'start_time_unix_nano',
  'time_unix_nano',
  'attributes',
  'flags',
  'exemplars',
] as const;
type MetricColumns = { readonly [K in (typeof METRIC_COLUMNS)[number]]: number };
const POINTS: MetricColumns = columnsOf('metrics_points', METRIC_COLUMNS);
const HIST: MetricColumns = columnsOf('metrics_hist', METRIC_COLUMNS);
const P = columnsOf('metrics_points', ['is_monotonic', 'value_double', 'value_int']);
const H = columnsOf('metrics_hist', [
  'count',
  'sum',
  'min',
  'max',
  'bucket_counts',
  'explicit_bounds',
  'scale',
  'zero_count',
  'zero_threshold',
  'positive_offset',
  'positive_bucket_counts',
  'negative_offset',
  'negative_bucket_counts',
  'quantiles',
  'quantile_values',
]);

/** Each member of Metric's oneof `data`: its message, its points' message, its metric_type. */
const DATA: ReadonlyMap<number, { message: MessageType; point: MessageType; type: string }> = new Map([
  [F.gauge, { message: GAUGE, point: NUMBER_POINT, type: 'gauge' }],
  [F.sum, { message: SUM, point: NUMBER_POINT, type: 'sum' }],
  [F.histogram, { message: HISTOGRAM, point: HISTOGRAM_POINT, type: 'histogram' }],
  [
    F.exponentialHistogram,
    { message: EXPONENTIAL_HISTOGRAM, point: EXPONENTIAL_POINT, type: 'exponential_histogram' },
  ],
  [F.summary, { message: SUMMARY, point: SUMMARY_POINT, type: 'summary' }],
]);

/** The value of a NumberDataPoint or an Exemplar (oneof `value`): which member, and its value. */
interface PointValue {
  member: number;
  double: number;
  int: bigint;
}

export class MetricMapper extends RequestWalker {
  private readonly points: TableRows;
  private readonly hist: TableRows;
  /** A point's bucket counts as they are read (each cell takes a copy). */
  private readonly bucketCounts = new Int64List();
  private readonly positiveCounts = new Int64List();
  private readonly negativeCounts = new Int64List();

  constructor(r: OtlpReader, ctx: MapContext) {
    const points = new TableRows('metrics_points', ctx.maxRows);
    const hist = new TableRows('metrics_hist', ctx.maxRows);
    super(
      r,
      ctx,
      {
        request: METRICS_REQUEST,
        resources: F.resourceMetrics,
        resource: RESOURCE_METRICS,
        scopes: F.scopeMetrics,
        scope: SCOPE_METRICS,
        items: F.metrics,
        item: METRIC,
      },
      [points, hist],
    );
    this.points = points;
    this.hist = hist;
  }

  protected items(): number {
    return this.points.flushed + this.points.n + this.hist.flushed + this.hist.n;
  }

  /** A metric: the rows of its data points. */
  protected item(): void {
    const r = this.r;
    const { points, hist } = this;
    const pointsFrom = points.n;
    const histFrom = hist.n;
    const invalidIds = this.invalidIds;
    let name: string | null = null;
    let description: string | null = null;
    let unit: string | null = null;
    let member = -1;
    for (let f = r.next(); f !== END; f = r.next()) {
      switch (f) {
        case F.name:
          name = r.string();
          break;
        case F.description:
          description = r.string();
          break;
        case F.unit:
          unit = r.string();
          break;
        case F.metadata:
          r.attributes();
          break;
        case F.gauge:
        case F.sum:
        case F.histogram:
        case F.exponentialHistogram:
        case F.summary: {
          if (member !== -1) {
            // Only the last member counts: the points of the one before are forgotten.
            if (member !== f) r.otherMember();
            points.truncate(pointsFrom);
            hist.truncate(histFrom);
            this.invalidIds = invalidIds;
          }
          member = -1;
          const data = DATA.get(f)!;
          if (r.enter(data.message)) {
            member = f;
            this.data(f, data.point, data.type);
          }
          break;
        }
        default:
          r.skip();
      }
    }
    const metadata = r.attributesJson();
    for (const [t, c, from] of [
      [points, POINTS, pointsFrom],
      [hist, HIST, histFrom],
    ] as const) {
      t.fill(c.metric_name, from, name);
      t.fill(c.description, from, description);
      t.fill(c.unit, from, unit);
      t.fill(c.metric_metadata, from, metadata);
    }
  }

  /** A metric's data (gauge, sum...): its points, then what they share. */
  private data(member: number, point: MessageType, type: string): void {
    const r = this.r;
    const numbers = member === F.gauge || member === F.sum;
    const t = numbers ? this.points : this.hist;
    const c = numbers ? POINTS : HIST;
    const from = t.n;
    let temporality = 0;
    let monotonic = false;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.dataPoints) {
        if (r.enter(point)) this.point(member, t, c);
      } else if (f === F.aggregationTemporality) temporality = r.int32(TEMPORALITY);
      else if (f === F.isMonotonic) monotonic = r.bool();
      else r.skip();
    }
    // A gauge and a summary have no temporality; only a sum is monotonic.
    t.fill(c.metric_type, from, type);
    t.fill(c.aggregation_temporality, from, member === F.gauge || member === F.summary ? null : temporality);
    if (numbers) t.fill(P.is_monotonic, from, member === F.sum ? monotonic : null);
  }

  /** Reads the field of a oneof `value` member (asDouble, asInt) into `v`. */
  private value(f: number, v: PointValue): void {
    const r = this.r;
    if (!r.present()) {
      if (v.member === f) v.member = -1;
      return;
    }
    if (v.member !== -1 && v.member !== f) r.otherMember();
    v.member = f;
    if (f === F.asDouble) v.double = r.double();
    else v.int = r.int64();
  }

  /**
   * A data point of `member`'s kind into `t` (`c`: its columns). The reader hands over only the
   * fields of the point's own message, so one loop reads the five kinds.
   */
  private point(member: number, t: TableRows, c: MetricColumns): void {
    const r = this.r;
    const row = t.add();
    let start = 0n;
    let time = 0n;
    let flags = 0n;
    let exemplars: string[] | null = null;
    const value: PointValue = { member: -1, double: 0, int: 0n };
    let count = 0n;
    // A summary's sum is a plain double (0 when absent); the histograms' an optional one.
    let sum: number | null = member === F.summary ? 0 : null;
    let min: number | null = null;
    let max: number | null = null;
    const buckets = this.bucketCounts;
    buckets.clear();
    const bounds: number[] = [];
    let scale = 0;
    let zeroCount = 0n;
    let zeroThreshold = 0;
    let positive: Buckets | null = null;
    let negative: Buckets | null = null;
    const quantiles: number[] = [];
    const values: number[] = [];
    for (let f = r.next(); f !== END; f = r.next()) {
      switch (f) {
        case F.startTimeUnixNano:
          start = r.int64();
          break;
        case F.timeUnixNano:
          time = r.int64();
          break;
        case F.attributes:
          r.attributes();
          break;
        case F.flags:
          flags = r.flags();
          break;
        case F.exemplars:
          if (r.enter(EXEMPLAR)) exemplars = this.withExemplar(exemplars);
          break;
        case F.asDouble:
        case F.asInt:
          this.value(f, value);
          break;
        case F.count:
          count = r.int64();
          break;
        case F.sum:
          sum = member === F.summary ? r.double() : r.optionalDouble();
          break;
        case F.min:
          min = r.optionalDouble();
          break;
        case F.max:
          max = r.optionalDouble();
          break;
        case F.bucketCounts:
          r.int64s(buckets);
          break;
        case F.explicitBounds:
          r.doubles(bounds);
          break;
        case F.scale:
          scale = r.int32();
          break;
        case F.zeroCount:
          zeroCount = r.int64();
          break;
        case F.zeroThreshold:
          zeroThreshold = r.double();
          break;
        case F.positive:
          positive = this.buckets(this.positiveCounts);
          break;
        case F.negative:
          negative = this.buckets(this.negativeCounts);
          break;
        case F.quantileValues:
          if (r.enter(QUANTILE)) this.quantile(quantiles, values);
          break;
        default:
          r.skip();
      }
    }
    t.set(c.event_ts, row, nanosToMicros(time));
    t.set(c.start_time_unix_nano, row, start);
    t.set(c.time_unix_nano, row, time);
    t.set(c.attributes, row, r.attributesJson());
    t.set(c.flags, row, flags);
    t.set(c.exemplars, row, exemplars === null ? null : `[${exemplars.join(',')}]`);
    if (member === F.gauge || member === F.sum) {
      t.set(P.value_double, row, value.member === F.asDouble ? value.double : null);
      t.set(P.value_int, row, value.member === F.asInt ? value.int : null);
      return;
    }
    t.set(H.count, row, count);
    t.set(H.sum, row, sum);
    if (member === F.summary) {
      t.set(H.quantiles, row, float64Cell(quantiles));
      t.set(H.quantile_values, row, float64Cell(values));
      return;
    }
    t.set(H.min, row, min);
    t.set(H.max, row, max);
    if (member === F.histogram) {
      t.set(H.bucket_counts, row, buckets.take());
      t.set(H.explicit_bounds, row, float64Cell(bounds));
      return;
    }
    t.set(H.scale, row, scale);
    t.set(H.zero_count, row, zeroCount);
    t.set(H.zero_threshold, row, zeroThreshold);
    t.set(H.positive_offset, row, positive === null ? null : positive.offset);
    t.set(H.positive_bucket_counts, row, positive === null ? null : positive.counts.take());
    t.set(H.negative_offset, row, negative === null ? null : negative.offset);
    t.set(H.negative_bucket_counts, row, negative === null ? null : negative.counts.take());
  }

  /** An exponential histogram's positive or negative buckets, counted into `counts`; null when absent. */
  private buckets(counts: Int64List): Buckets | null {
    const r = this.r;
    if (!r.enter(BUCKETS)) return null;
    counts.clear();
    const b: Buckets = { offset: 0, counts };
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.offset) b.offset = r.int32();
      else if (f === F.bucketCounts) r.int64s(b.counts);
      else r.skip();
    }
    return b;
  }

  /** A summary's value at a quantile, added to `quantiles` and `values`. */
  private quantile(quantiles: number[], values: number[]): void {
    const r = this.r;
    let quantile = 0;
    let value = 0;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.quantile) quantile = r.double();
      else if (f === F.value) value = r.double();
      else r.skip();
    }
    quantiles.push(quantile);
    values.push(value);
  }

  /** `list` with the exemplar just entered. */
  private withExemplar(list: string[] | null): string[] {
    const out = list ?? [];
    out.push(this.exemplar());
    return out;
  }

  /** An exemplar as the JSON object text the exemplars column holds a list of. */
  private exemplar(): string {
    const r = this.r;
    let time = 0n;
    let traceId: ReadId = null;
    let spanId: ReadId = null;
    const value: PointValue = { member: -1, double: 0, int: 0n };
    for (let f = r.next(); f !== END; f = r.next()) {
      switch (f) {
        case F.timeUnixNano:
          time = r.int64();
          break;
        case F.asDouble:
        case F.asInt:
          this.value(f, value);
          break;
        case F.traceId:
          traceId = r.id(16);
          break;
        case F.spanId:
          spanId = r.id(8);
          break;
        case F.filteredAttributes:
          r.attributes();
          break;
        default:
          r.skip();
      }
    }
    const attributes = r.attributesJson();
    const v =
      value.member === F.asDouble
        ? `,"as_double":${jsonText(jsonDouble(value.double))}`
        : value.member === F.asInt
          ? `,"as_int":${jsonText(jsonInt(value.int, 'exemplar.asInt'))}`
          : '';
    const trace = this.checkId(traceId);
    const span = this.checkId(spanId);
    return (
      `{"filtered_attributes":${attributes},"time_unix_nano":"${time}"${v},` +
      `"trace_id":${trace === null ? 'null' : `"${trace}"`},"span_id":${span === null ? 'null' : `"${span}"`}}`
    );
  }
}

interface Buckets {
  offset: number;
  counts: Int64List;
}
