// Attribute lists to JSON text: the mapper's way (a plain object per list, then JSON.stringify)
// against writing the JSON text directly with string concatenation. Both run interleaved in
// small slices so that a busy machine slows them alike; the ratio is the figure to read.
// Usage: node bench/otlp-attributes.ts [seconds, default 4]

import { attributesJson, type Msg } from '../src/otlp/values.ts';
import { logsRequest, tracesRequest } from './otlp-payloads.ts';

const SECONDS = Number(process.argv[2] ?? 4);
const INT = /^-?\d+$/;

// The alternative: JSON text written directly; a later duplicate key is skipped by a scan.
function valueText(v: Msg): string {
  if (v == null) return 'null';
  let x = v.stringValue ?? v.string_value;
  if (x != null) return JSON.stringify(x);
  x = v.intValue ?? v.int_value;
  if (x != null) {
    if (typeof x === 'number') return String(x);
    return x.length < 16 && INT.test(x) ? String(Number(x)) : `"${x}"`;
  }
  x = v.boolValue ?? v.bool_value;
  if (x != null) return x ? 'true' : 'false';
  x = v.doubleValue ?? v.double_value;
  if (x != null) return Number.isFinite(x) ? String(x) : `"${x}"`;
  x = v.arrayValue ?? v.array_value;
  if (x != null) return `[${(x.values ?? []).map(valueText).join(',')}]`;
  x = v.kvlistValue ?? v.kvlist_value;
  if (x != null) return directWriter(x.values ?? []);
  return 'null';
}

function directWriter(kvs: Msg[]): string {
  const n = kvs.length;
  let out = '{';
  outer: for (let i = 0; i < n; i++) {
    const key = kvs[i].key;
    for (let j = i + 1; j < n; j++) if (kvs[j].key === key) continue outer;
    out += (out.length === 1 ? '' : ',') + JSON.stringify(key) + ':' + valueText(kvs[i].value);
  }
  return out + '}';
}

const parsed = [
  ...JSON.parse(JSON.stringify(tracesRequest(200))).resourceSpans[0].scopeSpans[0].spans,
  ...JSON.parse(JSON.stringify(logsRequest(200))).resourceLogs[0].scopeLogs[0].logRecords,
];
const lists: Msg[][] = parsed.map((x: Msg) => x.attributes);
for (const l of lists) {
  if (attributesJson(l) !== directWriter(l)) throw new Error('outputs differ');
}

const candidates: [string, (kvs: Msg[]) => string][] = [
  ['object + JSON.stringify', attributesJson],
  ['direct string writer', directWriter],
];
const spent = candidates.map(() => 0);
let sink = 0;
const end = performance.now() + SECONDS * 1000;
let rounds = 0;
while (performance.now() < end) {
  for (let c = 0; c < candidates.length; c++) {
    const f = candidates[(c + rounds) % candidates.length]![1];
    const t = performance.now();
    for (const l of lists) sink += f(l).length;
    spent[(c + rounds) % candidates.length]! += performance.now() - t;
  }
  rounds++;
}
const perList = (ms: number) => (ms * 1000) / (rounds * lists.length);
const avgLen = lists.reduce((a, l) => a + l.length, 0) / lists.length;
console.log(`${lists.length} lists of ${avgLen.toFixed(1)} attributes, ${rounds} rounds (sink ${sink % 7})`);
for (let c = 0; c < candidates.length; c++) {
  console.log(
    `${candidates[c]![0].padEnd(26)} ${perList(spent[c]!).toFixed(3)} µs/list  (${(spent[c]! / spent[0]!).toFixed(2)}x)`,
  );
}
