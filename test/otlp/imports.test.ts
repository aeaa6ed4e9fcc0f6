// src/otlp reads top-down: no file imports, directly or not, a file that imports it.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

const DIR = new URL('../../src/otlp/', import.meta.url);

test('src/otlp has no import cycle', () => {
  const files = readdirSync(DIR).filter((f) => f.endsWith('.ts'));
  const imports = new Map(
    files.map((f) => [
      f,
      [...readFileSync(new URL(f, DIR), 'utf8').matchAll(/from '\.\/([\w-]+\.ts)'/g)].map((m) => m[1]!),
    ]),
  );
  assert.ok((imports.get('map.ts') ?? []).length > 5, 'the imports were found');
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (f: string): void => {
    const at = path.indexOf(f);
    assert.equal(at, -1, `import cycle: ${[...path.slice(at), f].join(' -> ')}`);
    if (done.has(f)) return;
    path.push(f);
    for (const g of imports.get(f) ?? []) visit(g);
    path.pop();
    done.add(f);
  };
  for (const f of files) visit(f);
});

test("every file of src/otlp is in its README's table, and imports only files listed below it", () => {
  const readme = readFileSync(new URL('README.md', DIR), 'utf8');
  // Each table row's files, in order: | `a.ts`, `b.ts` | role |
  const order = [...readme.matchAll(/^\| (`[\w-]+\.ts`(?:, `[\w-]+\.ts`)*) \|/gm)].map((m) =>
    [...m[1]!.matchAll(/`([\w-]+\.ts)`/g)].map((f) => f[1]!),
  );
  const rank = new Map(order.flatMap((files, i) => files.map((f) => [f, i] as const)));
  const files = readdirSync(DIR).filter((f) => f.endsWith('.ts'));
  assert.deepEqual(
    files.filter((f) => !rank.has(f)),
    [],
    'files missing from the README table',
  );
  for (const f of files) {
    for (const m of readFileSync(new URL(f, DIR), 'utf8').matchAll(/from '\.\/([\w-]+\.ts)'/g)) {
      const g = m[1]!;
      // A row's files may import each other (json-reader and its cursor); none one above.
      assert.ok(rank.get(g)! >= rank.get(f)!, `${f} imports ${g}, listed above it`);
    }
  }
});
