// What the server lets in, and for how long: the connections open at once, the bytes of request
// bodies held at once (one BodyBudget), the header, request and idle timeouts of every connection
// (node's HTTP server enforces them; fastify passes them on), and the answer to requests that
// arrive while the server stops. A slow, stalled or flooding client costs a bounded amount of
// memory, time and file descriptors. The defaults follow what the process is given: its
// open-file limit and its memory (a container's limit, else the machine's).

import { readFileSync } from 'node:fs';
import { type Server, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { availableParallelism } from 'node:os';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import { MAX_HELD_ROWS } from '../otlp/index.ts';
import { type MemoryLimit, memoryLimit, type ServerConfig } from '../storage/options.ts';
import { BodyBudget } from './body.ts';
import { HTTP2_REASON, http2Refusal, isHttp2Preface } from './http2-refusal.ts';
import { isIngestRoute, refuseWhileStopping } from './ingest.ts';

/** How often node checks its connections against the header and request timeouts (default 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/**
 * Descriptors kept from client connections for everything else (the log's segments, the tables'
 * files, reads, uploads): a quarter of the open-file limit, at least this many, at most half.
 * Without a reserve, clients can hold every descriptor: each write to a table or to the log then
 * fails with EMFILE, and every request is refused with 503 for as long as they stay connected.
 */
const RESERVED_FDS = 256;
const MiB = 1024 * 1024;
/** The default of max_body_bytes_in_flight at most (a memory limit of 2,176 MiB or more). */
const BODY_BYTES_IN_FLIGHT = 256 * MiB;
/**
 * Request bodies hold at most this share of the memory limit beyond SERVER_MEMORY by default. A
 * body's decoding takes several times its size beside it (its rows, the decoder's garbage), and
 * the rest of the server ~100-150 MiB: in a 256 MiB cgroup, eight clients sending the Collector's
 * 8,192-span requests (7.2 MB of JSON each) took the server to 227-259 MiB of anonymous memory
 * with 32 MiB of bodies (the kernel killed it in 2 of 16 runs), 202-230 MiB with 16 (none of 20),
 * though outside a cgroup the two peaked alike (201-249 and 222-239); 256 MiB of them got it
 * killed within 2 s. Measured in docs/benchmarks.md.
 */
const BODY_SHARE_OF_MEMORY = 1 / 8;
/** The memory the server takes without request bodies, which they do not share. */
const SERVER_MEMORY = 128 * MiB;
/** A decoder by default per this much of the memory limit (one takes 60-100 MiB with large requests). */
const MEMORY_PER_DECODER = 256 * MiB;
/** Reads answered at once by default. */
const CONCURRENT_READS = 4;
/**
 * With less memory than this, one read at a time by default: a read of a large day takes 250-450
 * MiB (the newest 100 of 2,000,000 log records in 28 files: 373 MiB of RSS), and four at once got
 * a server in a 512 MiB cgroup killed, where the same four one after the other held.
 */
const CONCURRENT_READS_MEMORY = 1024 * MiB;
/**
 * A request may make one row of a table per this many bytes of the memory limit: a quarter of it
 * at 1 KiB a row. A decoder took 390-920 bytes per empty log record of one request (the cheapest
 * row to send: 2 bytes of protobuf, fewer in gzip), and its packed batch 123 more, held on through
 * the log and the writer; one such request of a million records took a server to 552 MiB.
 */
const MEMORY_PER_REQUEST_ROW = 4096;
/** Rows of one table a request may make by default, at least (a memory limit below 64 MiB). */
const MIN_ROWS_PER_REQUEST = 16_384;
/** The longest between two log lines about refused connections. */
const DROP_LOG_INTERVAL_MS = 60_000;
/** How long a connection refused for speaking HTTP/2 is kept for the client to read why. */
const HTTP2_LINGER_MS = 5_000;

/**
 * This process's open-file limit, from /proc/self/limits (Linux; node raises its soft limit to
 * the hard one when it starts); null where that is unknown or unlimited.
 */
export function openFileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** Connections the server keeps open at once: the configured number, else what the file limit leaves. */
export function connectionLimit(configured: number | null, fileLimit: number | null): number | null {
  if (configured !== null) return configured;
  if (fileLimit === null) return null;
  const reserve = Math.min(Math.floor(fileLimit / 2), Math.max(RESERVED_FDS, Math.floor(fileLimit / 4)));
  return fileLimit - reserve;
}

/** Bytes of request bodies held at once: the configured number, else what the memory limit allows. */
export function bodyBytesInFlight(configured: number | null, memory: number): number {
  if (configured !== null) return configured;
  return Math.min(
    BODY_BYTES_IN_FLIGHT,
    Math.max(MiB, Math.floor((memory - SERVER_MEMORY) * BODY_SHARE_OF_MEMORY)),
  );
}

/** Decode worker threads: the configured number, else one per core, at most one per 256 MiB of memory. */
export function decodeWorkerCount(configured: number | null, cores: number, memory: number): number {
  if (configured !== null) return configured;
  return Math.max(1, Math.min(cores, Math.floor(memory / MEMORY_PER_DECODER)));
}

/**
 * Rows of one table a request may make, from the memory limit (MEMORY_PER_REQUEST_ROW), between
 * MIN_ROWS_PER_REQUEST and MAX_HELD_ROWS: 65,536 in 256 MiB, the most from 4 GiB. A few KB of gzip
 * can inflate to a million empty log records.
 */
export function rowsPerRequest(memory: number): number {
  return Math.min(MAX_HELD_ROWS, Math.max(MIN_ROWS_PER_REQUEST, Math.floor(memory / MEMORY_PER_REQUEST_ROW)));
}

/** /api/* reads answered at once: the configured number, else what the memory limit allows. */
export function concurrentReads(configured: number | null, memory: number): number {
  if (configured !== null) return configured;
  return memory < CONCURRENT_READS_MEMORY ? 1 : CONCURRENT_READS;
}

export interface LimitStats {
  body_bytes_in_flight: number;
  max_body_bytes_in_flight: number;
  /** Requests answered 503 because their body did not fit max_body_bytes_in_flight. */
  bodies_refused: number;
  /** Connections closed because headers or a body did not arrive within their timeout. */
  requests_timed_out: number;
  /** Client connections open at once (null: no limit). */
  max_connections: number | null;
  /** Connections closed as soon as they were accepted, because max_connections were open. */
  connections_refused: number;
}

export class ServerLimits {
  readonly bodies: BodyBudget;
  private readonly cfg: ServerConfig;
  private timedOut = 0;
  private stopping = false;
  private readonly fileLimit: number | null;
  private readonly maxConnections: number | null;
  /** The memory the defaults were planned for. */
  readonly memoryLimit: MemoryLimit;
  /** Decode worker threads. */
  readonly decodeWorkers: number;
  /** /api/* reads answered at once. */
  readonly maxConcurrentReads: number;
  /** Rows of one table a request may make (413 beyond). */
  readonly maxRowsPerRequest: number;
  private connectionsRefused = 0;
  private dropLoggedAt = Number.NEGATIVE_INFINITY;
  /** Connections opened in HTTP/2 (an OTLP/gRPC exporter), and when the log last said so. */
  private http2Refused = 0;
  private http2LoggedAt = Number.NEGATIVE_INFINITY;
  private log: FastifyInstance['log'] | null = null;
  /** Connections whose current request was answered before its body was read to the end. */
  private readonly answeredEarly = new WeakSet<Socket>();

  constructor(cfg: ServerConfig) {
    this.cfg = cfg;
    this.memoryLimit = memoryLimit(cfg.memory_limit_bytes);
    const memory = this.memoryLimit.bytes;
    this.bodies = new BodyBudget(bodyBytesInFlight(cfg.max_body_bytes_in_flight, memory));
    this.decodeWorkers = decodeWorkerCount(cfg.decode_workers, availableParallelism(), memory);
    this.maxConcurrentReads = concurrentReads(cfg.max_concurrent_reads, memory);
    this.maxRowsPerRequest = rowsPerRequest(memory);
    this.fileLimit = openFileLimit();
    this.maxConnections = connectionLimit(cfg.max_connections, this.fileLimit);
  }

  /** What a memory limit (a container's, or configured) set, for the log at start; null on the machine's memory. */
  memoryPlan(): string | null {
    const { bytes, from } = this.memoryLimit;
    if (from === "the machine's") return null;
    const c = this.cfg;
    const set = [
      ...(c.decode_workers === null
        ? [`${this.decodeWorkers} decode worker${this.decodeWorkers === 1 ? '' : 's'}`]
        : []),
      ...(c.max_body_bytes_in_flight === null
        ? [`${mib(this.bodies.limit)} of request bodies in flight`]
        : []),
      ...(c.max_concurrent_reads === null
        ? [`${this.maxConcurrentReads} read${this.maxConcurrentReads === 1 ? '' : 's'} at once`]
        : []),
      `${this.maxRowsPerRequest} rows of a table per request`,
    ];
    return `memory limit ${mib(bytes)} (${from})${set.length > 0 ? `: ${set.join(', ')}` : ''}`;
  }

  /** The fastify options that enforce the timeouts. */
  fastifyOptions(): FastifyHttpOptions<Server> {
    const c = this.cfg;
    return {
      requestTimeout: c.request_timeout_s * 1000,
      keepAliveTimeout: c.idle_timeout_s * 1000,
      http: {
        headersTimeout: c.header_timeout_s * 1000,
        connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
      },
      // Requests during shutdown are answered by the onRequest hook below, in OTLP's terms.
      return503OnClosing: false,
      clientErrorHandler: (err, socket) => this.onClientError(err as NodeJS.ErrnoException, socket),
    };
  }

  /** Installs the hooks: the connection limit, answers while stopping, which connections were answered early. */
  register(app: FastifyInstance): void {
    this.log = app.log;
    if (this.maxConnections !== null) {
      // node closes a connection beyond the limit as soon as it accepts it; clients retry.
      app.server.maxConnections = this.maxConnections;
      app.server.on('drop', () => this.onConnectionRefused(app));
    }
    app.addHook('preClose', (done) => {
      this.stopping = true;
      done();
    });
    app.addHook('onRequest', (request, reply, done) => {
      this.answeredEarly.delete(request.raw.socket);
      if (!this.stopping) return done();
      if (isIngestRoute(request.routeOptions.url)) return refuseWhileStopping(request, reply);
      reply
        .code(503)
        .header('retry-after', '1')
        .header('connection', 'close')
        .send({ error: 'Service Unavailable', message: 'the server is stopping; retry after 1 s' });
    });
    app.addHook('onResponse', (request, _reply, done) => {
      // The rest of the body is read and dropped; should it stall, the request timeout ends the
      // connection without writing a second answer after this one.
      if (!request.raw.complete) this.answeredEarly.add(request.raw.socket);
      done();
    });
  }

  stats(): LimitStats {
    return {
      body_bytes_in_flight: this.bodies.bytes,
      max_body_bytes_in_flight: this.bodies.limit,
      bodies_refused: this.bodies.refused,
      requests_timed_out: this.timedOut,
      max_connections: this.maxConnections,
      connections_refused: this.connectionsRefused,
    };
  }

  /** Counts a connection refused for the limit, and says so in the log once a minute at most. */
  private onConnectionRefused(app: FastifyInstance): void {
    this.connectionsRefused++;
    const now = Date.now();
    if (now - this.dropLoggedAt < DROP_LOG_INTERVAL_MS) return;
    this.dropLoggedAt = now;
    const why =
      this.cfg.max_connections === null
        ? `what the open-file limit of ${this.fileLimit} leaves beside the tables' files; raise it (ulimit -n, ` +
          `LimitNOFILE) or set server_config.max_connections`
        : 'server_config.max_connections';
    app.log.warn(
      `refusing new connections: ${this.maxConnections} are open, ${why} ` +
        `(${this.connectionsRefused} refused so far: /healthz http.connections_refused)`,
    );
  }

  /**
   * A connection opened in HTTP/2 (h2c): told why in its own protocol (http2-refusal.ts) and
   * closed, and the log says so once a minute at most, as the exporter may only log a frame error.
   */
  private onHttp2(socket: Socket): void {
    this.http2Refused++;
    if (socket.writable) {
      // Closed once the client has read the answer and closes its end, or after a few seconds.
      // Its further frames are read and dropped: a socket closed with bytes unread would be reset,
      // and the reset could reach the client before the answer.
      socket.resume();
      socket.end(http2Refusal());
      setTimeout(() => socket.destroy(), HTTP2_LINGER_MS).unref();
    } else socket.destroy();
    const now = Date.now();
    if (now - this.http2LoggedAt < DROP_LOG_INTERVAL_MS) return;
    this.http2LoggedAt = now;
    this.log?.warn(
      `refused a connection from ${socket.remoteAddress ?? 'a client'} that spoke HTTP/2, as an OTLP/gRPC ` +
        `exporter does (the Java SDK's default): ${HTTP2_REASON} (${this.http2Refused} so far)`,
    );
  }

  /** A connection's error (a timeout, a malformed request): answered when possible, then closed. */
  private onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    if (err.code === 'HPE_PAUSED_H2_UPGRADE' && isHttp2Preface((err as { rawPacket?: Buffer }).rawPacket)) {
      this.onHttp2(socket);
      return;
    }
    let status = 400;
    let message = 'malformed HTTP request';
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      this.timedOut++;
      status = 408;
      message =
        `request not received in time: headers within ${this.cfg.header_timeout_s} s and the whole ` +
        `body within ${this.cfg.request_timeout_s} s of its first byte`;
    } else if (err.code === 'HPE_HEADER_OVERFLOW') {
      status = 431;
      message = 'request headers too large';
    }
    if (socket.writable && !this.answeredEarly.has(socket)) {
      const body = JSON.stringify({ error: STATUS_CODES[status], message });
      socket.write(
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy();
  }
}

function mib(bytes: number): string {
  return `${Math.round((bytes / MiB) * 10) / 10} MiB`;
}
