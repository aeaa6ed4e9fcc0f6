// A lean HTTP/1.1 keep-alive client for load generation: each request is written as one buffer
// prepared in advance (head and body), and only the status line and Content-Length of the answer
// are read. It spends a fraction of node:http's CPU per request, which matters when the load
// generator shares the machine's cores with the server it measures.

import { connect, type Socket } from 'node:net';

const HEAD_END = Buffer.from('\r\n\r\n');
const CONTENT_LENGTH = /\r\ncontent-length:\s*(\d+)/i;

/** The bytes of a whole request, built once and sent many times. */
export function rawRequest(
  host: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer,
): Buffer {
  let head = `POST ${path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (const [k, v] of Object.entries(headers)) if (k !== 'content-length') head += `${k}: ${v}\r\n`;
  head += `content-length: ${body.length}\r\n\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), body]);
}

/** One connection; requests sent while one is in flight wait their turn. */
export class RawConnection {
  private readonly socket: Socket;
  private readonly waiting: {
    bytes: Buffer;
    resolve: (status: number) => void;
    reject: (e: Error) => void;
    onWrite: ((at: number) => void) | undefined;
  }[] = [];
  private current: { resolve: (status: number) => void; reject: (e: Error) => void } | null = null;
  private buffered: Buffer = Buffer.alloc(0);
  private readonly ready: Promise<void>;
  /** Why the connection ended; a request sent after that fails with it at once. */
  private ended: Error | null = null;
  /** Requests sent and not yet answered (counted from the call, before the connection is up). */
  private unanswered = 0;

  constructor(host: string, port: number) {
    this.socket = connect({ host, port, noDelay: true });
    this.ready = new Promise((resolve, reject) => {
      this.socket.once('connect', () => resolve());
      this.socket.once('error', reject);
    });
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('error', (err) => this.failAll(err));
    this.socket.on('close', () => this.failAll(this.ended ?? new Error('connection closed by the server')));
  }

  /** The answer's status; `onWrite` gets the time (performance.now()) the request is written. */
  async send(bytes: Buffer, onWrite?: (at: number) => void): Promise<number> {
    this.unanswered++;
    try {
      await this.ready;
      // A server may close the connection after an answer (a refusal with Connection: close).
      if (this.ended) throw this.ended;
      return await new Promise((resolve, reject) => {
        this.waiting.push({ bytes, resolve, reject, onWrite });
        this.next();
      });
    } finally {
      this.unanswered--;
    }
  }

  /** Up, and with no request in flight or waiting: a request sent now is written at once. */
  get idle(): boolean {
    return this.unanswered === 0 && this.ended === null;
  }

  private next(): void {
    if (this.current || this.waiting.length === 0) return;
    const job = this.waiting.shift()!;
    this.current = job;
    job.onWrite?.(performance.now());
    this.socket.write(job.bytes);
  }

  private onData(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    for (;;) {
      const end = this.buffered.indexOf(HEAD_END);
      if (end < 0 || !this.current) return;
      const head = this.buffered.toString('latin1', 0, end);
      const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
      const total = end + HEAD_END.length + length;
      if (this.buffered.length < total) return;
      const status = Number(head.slice(9, 12));
      this.buffered = this.buffered.subarray(total);
      const done = this.current;
      this.current = null;
      done.resolve(status);
      this.next();
    }
  }

  private failAll(err: Error): void {
    this.ended ??= err;
    const jobs = [...(this.current ? [this.current] : []), ...this.waiting.splice(0)];
    this.current = null;
    for (const j of jobs) j.reject(err);
  }

  close(): void {
    this.socket.destroy();
  }
}

/** What an open-loop phase measured. */
export interface RateResult {
  requests: number;
  statuses: Record<number, number>;
  /** Each request's latency from its scheduled send time (a stall is not hidden), ms. */
  latencies: number[];
  /** Each request's latency from when it was written (the load tool's own lateness left out). */
  fromWrite: number[];
  /** Connections used: the ones given and those opened because all were busy. */
  connections: number;
}

/** At most this many connections in an open-loop phase; beyond it a request waits for a busy one. */
const MAX_CONNECTIONS = 64;

/**
 * Sends `rps` requests a second for `ms` (open loop: the schedule does not wait for answers), each
 * one of the prepared `raw` requests in turn. A request goes out on an idle connection; when every
 * one is busy, `open` makes another (appended to `conns`, for the caller to close), up to 64, as
 * an HTTP client's pool does (Go's, under the Collector's exporters, opens one per concurrent
 * request). Without `open`, or past 64, requests take the connections in turn and wait for a busy
 * one, and that wait counts in their latency.
 */
export async function sendAtRate(
  conns: RawConnection[],
  raw: readonly Buffer[],
  ms: number,
  rps: number,
  open?: () => RawConnection,
): Promise<RateResult> {
  const out: RateResult = { requests: 0, statuses: {}, latencies: [], fromWrite: [], connections: 0 };
  const interval = 1000 / rps;
  const start = performance.now();
  const total = Math.floor((ms / 1000) * rps);
  const inflight: Promise<void>[] = [];
  // A failed request (the server gone) is kept, not left unhandled while the loop waits to send.
  let failure: Error | null = null;
  for (let i = 0; i < total && failure === null; i++) {
    const scheduled = start + i * interval;
    const wait = scheduled - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    // Sent up to 1 ms early rather than late (timers are not finer): then timed from the send.
    const from = Math.min(scheduled, performance.now());
    let written = from;
    let conn = conns.find((c) => c.idle);
    if (conn === undefined && open !== undefined && conns.length < MAX_CONNECTIONS) {
      conn = open();
      conns.push(conn);
    }
    conn ??= conns[i % conns.length]!;
    inflight.push(
      conn
        .send(raw[i % raw.length]!, (at) => {
          written = at;
        })
        .then(
          (status) => {
            const now = performance.now();
            out.latencies.push(now - from);
            out.fromWrite.push(now - written);
            out.statuses[status] = (out.statuses[status] ?? 0) + 1;
            out.requests++;
          },
          (err: Error) => {
            failure ??= err;
          },
        ),
    );
  }
  await Promise.all(inflight);
  if (failure !== null) throw failure;
  out.connections = conns.length;
  return out;
}
