// The service version, read from the package manifest (two levels up from both src/server and
// dist/server), so that it is stated in one place only.

import { readFileSync } from 'node:fs';

export const SERVICE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
