// Tables for the terminal: key/value panels (status) and row tables (view) that fit the width of
// the terminal, truncating long cells, or switching to one panel per row when columns cannot fit.

import Table from 'cli-table3';
import stringWidth from 'string-width';

// No colours (output is often piped) and no rule between rows: denser, still aligned.
const PLAIN = { head: [] as string[], border: [] as string[], compact: true };
const ELLIPSIS = '…';
/** A column narrower than this is unreadable: switch to one panel per row instead. */
const MIN_COLUMN = 6;

/** The width to fit: the terminal's, else $COLUMNS, else 160 (a pipe or a file). */
export function outputWidth(stream: NodeJS.WriteStream = process.stdout): number {
  if (stream.isTTY && stream.columns > 0) return stream.columns;
  const fromEnv = Number(process.env.COLUMNS);
  return Number.isInteger(fromEnv) && fromEnv >= 20 ? fromEnv : 160;
}

/**
 * One visual line: control characters (newlines, tabs, escapes; C1 too, which some terminals
 * obey: U+009B is CSI) and the bidirectional overrides and isolates that reorder what follows them
 * on the line, shown as visible escapes. Anyone who may ingest writes these texts.
 */
export function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    if (c === '\r') return '\\r';
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16)}`;
  });
}

/**
 * The text cut to `width` terminal columns, an ellipsis in the last. Widths as cli-table3 measures
 * them (string-width): CJK and emoji take two columns, combining marks none.
 */
export function truncate(text: string, width: number): string {
  if (stringWidth(text) <= width) return text;
  if (width <= 1) return ELLIPSIS.slice(0, width);
  let kept = '';
  let used = 0;
  for (const ch of text) {
    const w = stringWidth(ch);
    if (used + w > width - 1) break;
    kept += ch;
    used += w;
  }
  return kept + ELLIPSIS;
}

const length = (s: string) => stringWidth(s);

/** A titled two-column panel of labels and values. */
export function panel(
  title: string,
  rows: readonly (readonly [string, string])[],
  width = outputWidth(),
): string {
  const labelWidth = Math.max(...rows.map(([k]) => length(k)), 1);
  const valueWidth = Math.max(
    8,
    Math.min(Math.max(...rows.map(([, v]) => length(v)), 1), width - labelWidth - 7),
  );
  const table = new Table({
    head: [{ content: title, colSpan: 2 }] as unknown as string[],
    style: PLAIN,
    colWidths: [labelWidth + 2, valueWidth + 2],
  });
  for (const [k, v] of rows) table.push([k, truncate(oneLine(v), valueWidth)]);
  return table.toString();
}

/** A plain grid with a header row; columns share the width, long cells are truncated. */
export function grid(
  head: readonly string[],
  rows: readonly (readonly string[])[],
  width = outputWidth(),
  align: readonly ('left' | 'right')[] = [],
  keep: readonly boolean[] = [],
): string | null {
  const widths = fitColumns(
    head.map((h, i) => Math.max(length(h), ...rows.map((r) => length(oneLine(r[i] ?? ''))))),
    head.map((h) => length(h)),
    width,
    keep,
  );
  if (widths === null) return null;
  const table = new Table({
    head: head.map((h, i) => truncate(h, widths[i]!)),
    style: PLAIN,
    colWidths: widths.map((w) => w + 2),
    colAligns: head.map((_, i) => align[i] ?? 'left'),
  });
  for (const r of rows) table.push(r.map((cell, i) => truncate(oneLine(cell), widths[i]!)));
  return table.toString();
}

const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);

/**
 * Content widths for columns whose natural (widest cell) widths are `natural`, within a table of
 * `total` characters (borders and padding take 3 per column + 1). Narrow columns keep their
 * width; the widest are cut down to a common cap. Columns marked in `keep` (e.g. timestamps)
 * are cut only when cutting the others is not enough. Null when the columns cannot all get a
 * readable minimum width.
 */
export function fitColumns(
  natural: readonly number[],
  header: readonly number[],
  total: number,
  keep: readonly boolean[] = [],
): number[] | null {
  const budget = total - (3 * natural.length + 1);
  const want = natural.map((w) => Math.max(1, w));
  if (sum(want) <= budget) return want;
  const minimum = want.map((w, i) => Math.min(w, Math.max(MIN_COLUMN, Math.min(header[i] ?? 0, 12))));
  return (
    capToFit(
      want,
      minimum,
      budget,
      want.map((_, i) => !keep[i]),
    ) ??
    capToFit(
      want,
      minimum,
      budget,
      want.map(() => true),
    )
  );
}

/** Cuts the flexible columns down to the largest common cap that fits; null if none does. */
function capToFit(
  want: readonly number[],
  minimum: readonly number[],
  budget: number,
  flexible: readonly boolean[],
): number[] | null {
  const room = budget - sum(want.filter((_, i) => !flexible[i]));
  const width = (i: number, cap: number) =>
    flexible[i] ? Math.max(minimum[i]!, Math.min(want[i]!, cap)) : want[i]!;
  const used = (cap: number) => sum(want.map((_, i) => (flexible[i] ? width(i, cap) : 0)));
  if (used(0) > room) return null;
  // used() grows with the cap: binary search the largest cap that fits.
  let lo = 0;
  let hi = Math.max(...want);
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (used(mid) <= room) lo = mid;
    else hi = mid - 1;
  }
  const out = want.map((_, i) => width(i, lo));
  // Hand out what the cap left over, one character each, to the columns it cut.
  let spare = room - used(lo);
  for (let i = 0; i < out.length && spare > 0; i++) {
    if (flexible[i] && out[i]! < want[i]!) {
      out[i]!++;
      spare--;
    }
  }
  return out;
}

/** A byte count in B, KiB, MiB... (one decimal). */
export function bytes(v: unknown): string {
  if (typeof v !== 'number') return v == null ? '-' : String(v);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let x = v;
  let u = 0;
  while (x >= 1024 && u < units.length - 1) {
    x /= 1024;
    u++;
  }
  return `${x.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}
