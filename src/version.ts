// The service version, read from the package manifest (one level up from both src/ and dist/),
// so that it is stated in one place only.

import { readFileSync } from 'node:fs';

export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
