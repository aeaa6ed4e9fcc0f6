// Child process for the shutdown test: `runServer` exactly as `otelake start --foreground` runs it,
// with its own SIGTERM/SIGINT handling and its log on stdout.
//   node run-server.ts <dir> <instanceId> '<options JSON>'

import { runServer } from '../../../src/server/index.ts';

const [dir, instanceId, options] = process.argv.slice(2);
await runServer({
  dir: dir!,
  instanceId: instanceId!,
  host: '127.0.0.1',
  port: 0,
  options: JSON.parse(options ?? '{}'),
});
