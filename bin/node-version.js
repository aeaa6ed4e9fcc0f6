// The Node.js otelake needs, checked before anything else runs: by the CLI's launcher, and by
// `npm test` (Node 20's test runner takes no globs and fails without saying why).
// 22.15 brought the zstd the Parquet writer compresses with: below it every table write fails.
import { fileURLToPath } from 'node:url';

/** One command that gets a current Node from the npm registry, without root or a version manager. */
export const GET_NODE =
  'npm install --prefix ~/.node24 node@24 && export PATH="$HOME/.node24/node_modules/.bin:$PATH"';

/** Exits (1) with how to get a current Node when this one is older than 22.15; else [major, minor]. */
export function requireNode(what) {
  const [major, minor] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 15)) {
    process.stderr.write(
      `${what} needs Node.js >= 22.15 (this is ${process.version}). Get Node 24 from the npm registry with:\n` +
        `  ${GET_NODE}\n` +
        'then run `npm install` again and try again in that shell.\n',
    );
    process.exit(1);
  }
  return [major, minor];
}

// `node bin/node-version.js`: the check alone.
if (process.argv[1] === fileURLToPath(import.meta.url)) requireNode('otelake (and its tests)');
