// Kills a loaded server with SIGKILL again and again: each cycle starts `otelake start
// --foreground`'s runServer in a child process on one instance, sends uniquely numbered log rows
// from several clients, and kills it at a random moment. Returns the rows whose requests were
// answered 200: after a restart every one of them must be stored exactly once. Used by
// test/server/crash.test.ts and by the conformance suite (which reads the tables in Python).

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const CHILD = new URL('./run-server.ts', import.meta.url).pathname;

export interface CrashLoopOptions {
  dir: string;
  instanceId: string;
  cycles: number;
  /**
   * Cycles go on past `cycles` (up to four times as many) until this many requests were answered
   * 200: a machine busy with other work answers fewer in each cycle.
   */
  minOk?: number;
  /** Kill after a random time in [minMs, maxMs) of load. */
  minMs?: number;
  maxMs?: number;
  clients?: number;
  /** Logger options of the server. */
  options?: object;
}

export interface CrashLoopResult {
  /** Bodies of the rows of every request answered 200. */
  acknowledged: string[];
  /** Requests sent, answered 200, and killed in flight (no answer). */
  sent: number;
  ok: number;
  unanswered: number;
  /** Cycles run (see `minOk`). */
  cycles: number;
}

/** A log export request of `size` rows whose bodies are `c<cycle>-b<batch>-r<i>`. */
export function logsBody(tag: string, size: number): string {
  return JSON.stringify({
    resourceLogs: [
      {
        resource: { attributes: [{ key: 'service.name', value: { stringValue: 'crash-test' } }] },
        scopeLogs: [
          {
            logRecords: Array.from({ length: size }, (_, i) => ({
              timeUnixNano: String(1_700_000_000_000_000_000n + BigInt(i)),
              severityNumber: 9,
              body: { stringValue: `${tag}-r${i}` },
            })),
          },
        ],
      },
    ],
  });
}

/** Starts the server child and resolves its URL once it listens. */
export async function startChild(
  dir: string,
  instanceId: string,
  options: object,
): Promise<{ url: string; child: ReturnType<typeof spawn>; exited: Promise<number | null>; log: string[] }> {
  const child = spawn(process.execPath, [CHILD, dir, instanceId, JSON.stringify(options)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const log: string[] = [];
  child.stderr!.on('data', (d: Buffer) => log.push(d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      log.push(line);
      const m = /listening on (http:\/\/[^\s"]+)/.exec(line);
      if (m) resolve(m[1]!);
    });
    child.on('exit', (code) => reject(new Error(`server exited early (${code}): ${log.join('\n')}`)));
  });
  return { url, child, exited, log };
}

export async function crashLoop(o: CrashLoopOptions): Promise<CrashLoopResult> {
  const result: CrashLoopResult = { acknowledged: [], sent: 0, ok: 0, unanswered: 0, cycles: 0 };
  const minMs = o.minMs ?? 300;
  const maxMs = o.maxMs ?? 1500;
  const enough = (cycle: number) =>
    cycle >= o.cycles && (result.ok >= (o.minOk ?? 0) || cycle >= 4 * o.cycles);
  for (let cycle = 0; !enough(cycle); cycle++) {
    result.cycles++;
    const { url, child, exited } = await startChild(o.dir, o.instanceId, o.options ?? {});
    let stop = false;
    let batch = 0;
    const client = async () => {
      while (!stop) {
        const tag = `c${cycle}-b${batch++}`;
        const size = 1 + Math.floor(Math.random() * 200);
        result.sent++;
        try {
          const res = await fetch(`${url}/v1/logs`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-project-id': 'crash' },
            body: logsBody(tag, size),
          });
          await res.arrayBuffer();
          if (res.status === 200) {
            result.ok++;
            for (let i = 0; i < size; i++) result.acknowledged.push(`${tag}-r${i}`);
          }
        } catch {
          result.unanswered++; // killed before it answered: not acknowledged
        }
      }
    };
    const clients = Array.from({ length: o.clients ?? 4 }, client);
    await new Promise((r) => setTimeout(r, minMs + Math.random() * (maxMs - minMs)));
    child.kill('SIGKILL');
    await exited;
    stop = true;
    await Promise.all(clients);
  }
  return result;
}
