// Tables for the terminal: key/value panels (status) and row tables (view) that fit the width of
// the terminal, truncating long cells, or switching to one panel per row when columns cannot fit.

import Table from 'cli-table3';

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

/** One visual line: control characters (newlines, tabs, escapes) shown as visible escapes. */
export function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: replacing control characters is the point
  return text.replace(/[\u0000-\u001f\u007f]/g, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\t') return '\\t';
    if (c === '\r') return '\\r';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}

export function truncate(text: string, width: number): string {
  const chars = [...text];
  if (chars.length <= width) return text;
  return width <= 1 ? ELLIPSIS.slice(0, width) : chars.slice(0, width - 1).join('') + ELLIPSIS;
}

const length = (s: string) => [...s].length;

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
): string | null {
  const widths = fitColumns(
    head.map((h, i) => Math.max(length(h), ...rows.map((r) => length(oneLine(r[i] ?? ''))))),
    head.map((h) => length(h)),
    width,
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

/**
 * Content widths for columns whose natural (widest cell) widths are `natural`, within a table of
 * `total` characters (borders and padding take 3 per column + 1). Narrow columns keep their
 * width; wide ones share what is left equally. Null when the columns cannot all get MIN_COLUMN.
 */
export function fitColumns(
  natural: readonly number[],
  header: readonly number[],
  total: number,
): number[] | null {
  const n = natural.length;
  let budget = total - (3 * n + 1);
  const out = natural.map((w) => Math.max(1, w));
  if (out.reduce((a, b) => a + b, 0) <= budget) return out;
  const minimum = out.map((w, i) => Math.min(w, Math.max(MIN_COLUMN, Math.min(header[i] ?? 0, 12))));
  if (minimum.reduce((a, b) => a + b, 0) > budget) return null;
  // Water-filling: settle every column narrower than the fair share, split the rest equally.
  const open = new Set(out.keys());
  for (;;) {
    const share = Math.floor(budget / open.size);
    const settled = [...open].filter((i) => out[i]! <= share);
    if (settled.length === 0) {
      let extra = budget - share * open.size;
      for (const i of open) {
        out[i] = Math.max(minimum[i]!, share + (extra-- > 0 ? 1 : 0));
      }
      // A minimum above the share overshoots: take it back from the widest columns.
      let over = out.reduce((a, b) => a + b, 0) - total + (3 * n + 1);
      while (over > 0) {
        const widest = out.reduce(
          (best, w, i) => (w - minimum[i]! > out[best]! - minimum[best]! ? i : best),
          0,
        );
        out[widest]!--;
        over--;
      }
      return out;
    }
    for (const i of settled) {
      budget -= out[i]!;
      open.delete(i);
    }
    if (open.size === 0) return out;
  }
}
