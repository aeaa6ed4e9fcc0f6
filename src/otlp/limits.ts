// Attribute limits on mapped rows (the OpenTelemetry SDKs' AttributeCountLimit and
// AttributeValueLengthLimit, applied by the server): an item keeps at most `countLimit`
// attributes, the first ones, and the others are counted in its dropped_attributes_count (the
// OTLP convention); string values longer than `valueLengthLimit` characters are cut, which OTLP
// does not count as a drop. They protect what comes after ingest (tables, readers) from one
// outsized item; nothing is refused for them.
//
// The mappers write attributes as compact JSON object texts; a text too short to break either
// limit is left alone without being parsed, so rows of ordinary size cost two comparisons.

import { SCHEMAS, TABLE_NAMES, type TableName } from '../schema/tables.ts';

export interface AttributeLimits {
  /** Attributes an item, resource or scope keeps at most. */
  countLimit: number;
  /** Characters (UTF-16 code units) a string value keeps at most, also inside arrays and maps. */
  valueLengthLimit: number;
}

const INT32_MAX = 2 ** 31 - 1;

/**
 * An attribute column of a table (its index in the row's values), the column counting its drops
 * (-1: none), and the last text limited in it with its result: the rows of a resource or scope
 * share one text.
 */
interface AttributeColumn {
  column: number;
  dropped: number;
  lastText: string;
  lastResult: Limited | null;
}

/** The attribute columns of `table` and the columns counting their drops. */
function attributeColumns(table: TableName): AttributeColumn[] {
  const names = SCHEMAS[table].columns.map((c) => c.name);
  const index = (name: string) => names.indexOf(name);
  const pairs: [string, string | null][] = [
    // A data point's attributes identify its series and OTLP has no count of dropped ones for
    // them: only their long values are cut.
    [
      'attributes',
      table === 'metrics_points' || table === 'metrics_hist' ? null : 'dropped_attributes_count',
    ],
    ['resource_attributes', 'resource_dropped_attributes_count'],
    ['scope_attributes', 'scope_dropped_attributes_count'],
  ];
  return pairs.map(([column, dropped]) => {
    if (index(column) < 0 || (dropped !== null && index(dropped) < 0))
      throw new Error(`table ${table} lacks ${column} or ${dropped}`);
    return {
      column: index(column),
      dropped: dropped === null ? -1 : index(dropped),
      lastText: '',
      lastResult: null,
    };
  });
}

/** Applies the limits to mapped rows (value arrays in a table's column order), in place. */
export class AttributeLimiter {
  private readonly limits: AttributeLimits;
  /**
   * Texts up to this length are within both limits: no value is longer than the text, and n
   * distinct keys take at least 5n+1 characters (`{"":0,"a":0}`).
   */
  private readonly safeLength: number;
  private readonly columns = new Map<TableName, AttributeColumn[]>(
    TABLE_NAMES.map((t) => [t, attributeColumns(t)]),
  );

  constructor(limits: AttributeLimits) {
    this.limits = limits;
    this.safeLength = Math.min(limits.valueLengthLimit, 5 * limits.countLimit + 5);
  }

  /** Limits the attributes of one row of `table` (`values[at]` on); returns how many were dropped. */
  apply(table: TableName, values: unknown[], at = 0): number {
    let dropped = 0;
    for (const c of this.columns.get(table)!) {
      const text = values[at + c.column];
      if (typeof text !== 'string' || text.length <= this.safeLength) continue;
      if (text !== c.lastText) {
        c.lastResult = limitAttributes(text, c.dropped >= 0 ? this.limits.countLimit : Infinity, this.limits);
        c.lastText = text;
      }
      const r = c.lastResult;
      if (r === null) continue;
      values[at + c.column] = r.text;
      if (c.dropped >= 0 && r.dropped > 0) {
        const before = values[at + c.dropped];
        values[at + c.dropped] = Math.min(INT32_MAX, (typeof before === 'number' ? before : 0) + r.dropped);
        dropped += r.dropped;
      }
    }
    return dropped;
  }

  /** Lets go of the last texts (a request's, which may be large). */
  forget(): void {
    for (const columns of this.columns.values()) {
      for (const c of columns) {
        c.lastText = '';
        c.lastResult = null;
      }
    }
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

/**
 * How the attribute text writes numbers JSON has no number for: an int64 beyond 2^53 as its
 * decimal digits, a double that is NaN or infinite by name. They are numbers, not strings to cut.
 */
const NUMBER_TEXT = /^(-?\d{16,19}|NaN|-?Infinity)$/;

/**
 * The value with every string in it cut to `max` characters (the same value when none is longer),
 * but for numbers written as strings (NUMBER_TEXT): OTLP's limit is for string values.
 */
function cutStrings(value: unknown, max: number): unknown {
  if (typeof value === 'string') {
    if (value.length <= max || (value.length <= 20 && NUMBER_TEXT.test(value))) return value;
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
