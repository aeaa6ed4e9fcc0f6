// Attribute limits on mapped rows (the OpenTelemetry SDKs' AttributeCountLimit and
// AttributeValueLengthLimit, applied by the server): an item keeps at most `countLimit`
// attributes, the first ones, and the others are counted in its dropped_attributes_count (the
// OTLP convention); string values longer than `valueLengthLimit` characters are cut, which OTLP
// does not count as a drop. They protect what comes after ingest (tables, readers) from one
// outsized item; nothing is refused for them.
//
// The mappers write attributes as compact JSON object texts; a text too short to break either
// limit is left alone without being parsed, so rows of ordinary size cost two comparisons.

import type { Row, TableName } from '../schema/tables.ts';

export interface AttributeLimits {
  /** Attributes an item, resource or scope keeps at most. */
  countLimit: number;
  /** Characters (UTF-16 code units) a string value keeps at most, also inside arrays and maps. */
  valueLengthLimit: number;
}

const INT32_MAX = 2 ** 31 - 1;

/** Attribute columns and the column counting their drops (null: the item has none). */
const COLUMNS: Record<TableName, readonly (readonly [string, string | null])[]> = (() => {
  const shared = [
    ['resource_attributes', 'resource_dropped_attributes_count'],
    ['scope_attributes', 'scope_dropped_attributes_count'],
  ] as const;
  const item = [['attributes', 'dropped_attributes_count'], ...shared] as const;
  // A data point's attributes identify its series and OTLP has no count of dropped ones for
  // them: only their long values are cut.
  const point = [['attributes', null], ...shared] as const;
  return {
    spans: item,
    span_events: item,
    span_links: item,
    logs: item,
    metrics_points: point,
    metrics_hist: point,
  };
})();

/** Applies the limits to the rows of one table, in place; returns how many attributes were dropped. */
export class AttributeLimiter {
  private readonly limits: AttributeLimits;
  /**
   * Texts up to this length are within both limits: no value is longer than the text, and n
   * distinct keys take at least 5n+1 characters (`{"":0,"a":0}`).
   */
  private readonly safeLength: number;
  /** Rows of a resource or scope share one text: the last one limited in a column, and its result. */
  private lastText = '';
  private lastResult: Limited | null = null;

  constructor(limits: AttributeLimits) {
    this.limits = limits;
    this.safeLength = Math.min(limits.valueLengthLimit, 5 * limits.countLimit + 5);
  }

  apply(table: TableName, rows: readonly Row[]): number {
    let dropped = 0;
    for (const [column, droppedColumn] of COLUMNS[table]) {
      this.lastText = '';
      for (const row of rows) {
        const text = row[column];
        if (typeof text !== 'string' || text.length <= this.safeLength) continue;
        const r = this.limit(text, droppedColumn !== null);
        if (r === null) continue;
        row[column] = r.text;
        if (droppedColumn !== null && r.dropped > 0) {
          const before = row[droppedColumn];
          row[droppedColumn] = Math.min(INT32_MAX, (typeof before === 'number' ? before : 0) + r.dropped);
          dropped += r.dropped;
        }
      }
    }
    return dropped;
  }

  /** The text within the limits, or null when it already is. */
  private limit(text: string, countable: boolean): Limited | null {
    if (text === this.lastText) return this.lastResult;
    const result = limitAttributes(text, countable ? this.limits.countLimit : Infinity, this.limits);
    this.lastText = text;
    this.lastResult = result;
    return result;
  }
}

interface Limited {
  text: string;
  dropped: number;
}

function limitAttributes(text: string, countLimit: number, limits: AttributeLimits): Limited | null {
  let attrs: Record<string, unknown>;
  try {
    attrs = JSON.parse(text) as Record<string, unknown>;
  } catch {
    return null; // not written by a mapper: left as it is
  }
  if (attrs === null || typeof attrs !== 'object' || Array.isArray(attrs)) return null;
  const keys = Object.keys(attrs);
  const dropped = Math.max(0, keys.length - countLimit);
  let changed = dropped > 0;
  const out: Record<string, unknown> = {};
  const max = limits.valueLengthLimit;
  for (let i = 0; i < keys.length - dropped; i++) {
    const key = keys[i]!;
    const value = attrs[key];
    const cut = cutStrings(value, max);
    if (cut !== value) changed = true;
    // '__proto__' is an attribute name like any other, not the object's prototype.
    Object.defineProperty(out, key, { value: cut, enumerable: true, writable: true, configurable: true });
  }
  return changed ? { text: JSON.stringify(out), dropped } : null;
}

/** The value with every string in it cut to `max` characters (the same value when none is longer). */
function cutStrings(value: unknown, max: number): unknown {
  if (typeof value === 'string') {
    if (value.length <= max) return value;
    // Never half of a surrogate pair.
    const end = max > 0 && isHighSurrogate(value.charCodeAt(max - 1)) ? max - 1 : max;
    return value.slice(0, end);
  }
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const cut = cutStrings(value[i], max);
      if (cut === value[i]) continue;
      out ??= value.slice();
      out[i] = cut;
    }
    return out ?? value;
  }
  let out: Record<string, unknown> | null = null;
  for (const [k, v] of Object.entries(value)) {
    const cut = cutStrings(v, max);
    if (cut === v) continue;
    out ??= { ...value };
    Object.defineProperty(out, k, { value: cut, enumerable: true, writable: true, configurable: true });
  }
  return out ?? value;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
