// The event-time window of a read (`since`/`until`): its bounds as exact microseconds since the
// epoch, from an RFC 3339 instant, a UTC day, a Date, or a duration back from now (`15m`, `1h30m`).

const US_PER: Readonly<Record<string, bigint>> = {
  us: 1n,
  ms: 1000n,
  s: 1_000_000n,
  m: 60_000_000n,
  h: 3_600_000_000n,
  d: 86_400_000_000n,
  w: 604_800_000_000n,
};

const DURATION = /^(?:\d+(?:us|ms|s|m|h|d|w))+$/;
const DURATION_PART = /(\d+)(us|ms|s|m|h|d|w)/g;
const INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?([Zz]|[+-]\d{2}:\d{2}))?$/;

/** Largest value of an int64 (what event_ts holds). */
const I64_MAX = 2n ** 63n - 1n;

/** The formats a bound may take, for error messages. */
export const TIME_BOUND_FORMATS =
  'an RFC 3339 instant (2026-11-20T08:00:00Z, 2026-11-20T10:00:00.5+02:00), a UTC day (2026-11-20), or a duration back from now (90s, 15m, 2h, 1d, 1h30m)';

/** Microseconds of a duration such as `15m` or `1h30m`; null when the text is not one. */
export function parseDurationUs(text: string): bigint | null {
  if (!DURATION.test(text)) return null;
  let us = 0n;
  for (const [, n, unit] of text.matchAll(DURATION_PART)) us += BigInt(n!) * US_PER[unit!]!;
  return us;
}

/** Microseconds since the epoch of an RFC 3339 instant or a UTC day; null when it is neither. */
export function parseInstantUs(text: string): bigint | null {
  const m = INSTANT.exec(text);
  if (!m) return null;
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  if (h !== undefined && zone === undefined) return null; // a time needs its offset
  // setUTCFullYear, not Date.UTC, which reads the years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  date.setUTCHours(Number(h ?? 0), Number(mi ?? 0), Number(s ?? 0));
  const ms = date.getTime();
  // Date.UTC rolls over (Feb 30 -> Mar 2): such a date is not valid.
  if (
    date.getUTCFullYear() !== Number(y) ||
    date.getUTCMonth() !== Number(mo) - 1 ||
    date.getUTCDate() !== Number(d) ||
    Number(h ?? 0) > 23 ||
    Number(mi ?? 0) > 59 ||
    Number(s ?? 0) > 59
  )
    return null;
  let us = BigInt(ms) * 1000n + BigInt((frac ?? '').padEnd(6, '0').slice(0, 6));
  if (zone !== undefined && zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1n : 1n;
    const [oh, om] = zone.slice(1).split(':').map(Number) as [number, number];
    if (oh > 23 || om > 59) return null;
    us -= sign * BigInt(oh * 60 + om) * 60_000_000n;
  }
  return us;
}

/**
 * A window bound as microseconds since the epoch. `nowUs` anchors durations (`15m` = 15 minutes
 * before now). Throws a TypeError naming `param`.
 */
export function parseTimeBound(param: string, value: unknown, nowUs: bigint): bigint {
  if (value instanceof Date) {
    const ms = value.getTime();
    if (Number.isNaN(ms)) throw new TypeError(`invalid ${param}: an invalid Date`);
    return BigInt(ms) * 1000n;
  }
  if (typeof value !== 'string')
    throw new TypeError(`invalid ${param} ${String(value)}: expected ${TIME_BOUND_FORMATS}`);
  const text = value.trim();
  const back = parseDurationUs(text);
  const us = back !== null ? nowUs - back : parseInstantUs(text);
  if (us === null || us > I64_MAX || us < -I64_MAX)
    throw new TypeError(`invalid ${param} ${JSON.stringify(value)}: expected ${TIME_BOUND_FORMATS}`);
  return us;
}

/** Now, in microseconds since the epoch. */
export function nowUs(): bigint {
  return BigInt(Date.now()) * 1000n;
}
