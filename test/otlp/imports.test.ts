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
