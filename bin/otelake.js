#!/usr/bin/env node
// Launcher of the otelake CLI. In a git checkout the TypeScript source runs directly (Node's type
// stripping), so it is never stale; an installed package has no src/ and runs the compiled dist/.
// Node refuses to strip types under node_modules, so there dist/ is always used.
import { existsSync } from 'node:fs';
import module from 'node:module';
import { GET_NODE, requireNode } from './node-version.js';

const [major, minor] = requireNode('otelake');

// Node keeps the compiled (and type-stripped) modules in a cache on disk (os.tmpdir() unless
// NODE_COMPILE_CACHE says otherwise): a command then starts in about half the CPU time.
module.enableCompileCache?.();

const source = new URL('../src/cli/main.ts', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);
const canStrip = Boolean(process.features.typescript) && !import.meta.url.includes('/node_modules/');

let entry;
if (canStrip && existsSync(source)) entry = source;
else if (existsSync(compiled)) entry = compiled;
else {
  process.stderr.write(
    existsSync(source)
      ? `otelake: Node ${major}.${minor} cannot run TypeScript directly; run \`npm run build\` or use Node >= 22.18:\n  ${GET_NODE}\n`
      : 'otelake: dist/ is missing; run `npm run build`\n',
  );
  process.exit(1);
}

const { main } = await import(entry.href);
await main();
