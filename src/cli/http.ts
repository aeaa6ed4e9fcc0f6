// Addresses of a server and a small GET helper with a timeout, for `start` (readiness) and `status`.

import { request } from 'node:http';
import { isIPv6 } from 'node:net';

/** The address to reach a server bound to `host`: a wildcard bind is reached over loopback. */
export function reachableHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '::1';
  return host;
}

export function baseUrl(host: string, port: number): string {
  const bare = host.replace(/^\[(.*)\]$/, '$1');
  return `http://${isIPv6(bare) ? `[${bare}]` : bare}:${port}`;
}

export type GetResult =
  | { ok: true; status: number; body: unknown }
  | { ok: false; status?: number; reason: string };

/**
 * GET a JSON document; never throws: a failure is described in words for the user. node:http
 * rather than fetch, which refuses ports on the browsers' "bad ports" list (e.g. 6000).
 */
export function getJson(url: string, timeoutSeconds: number): Promise<GetResult> {
  const ms = Math.max(1, Math.round(timeoutSeconds * 1000));
  return new Promise((done) => {
    const req = request(
      url,
      { headers: { accept: 'application/json' }, agent: false, timeout: ms },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => done({ ok: false, reason: err.message }));
        res.on('end', () => {
          clearTimeout(deadline);
          const status = res.statusCode ?? 0;
          if (status < 200 || status >= 300) {
            done({ ok: false, status, reason: `HTTP ${status} ${res.statusMessage ?? ''}`.trim() });
            return;
          }
          try {
            done({ ok: true, status, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
          } catch {
            done({ ok: false, status, reason: 'the answer is not JSON (is this an otelake server?)' });
          }
        });
      },
    );
    // The socket timeout covers idle time only; this bounds the whole exchange.
    const deadline = setTimeout(() => req.destroy(new TimeoutError()), ms);
    req.on('timeout', () => req.destroy(new TimeoutError()));
    req.on('error', (err) => {
      clearTimeout(deadline);
      done({ ok: false, reason: describeError(err, timeoutSeconds) });
    });
    req.end();
  });
}

class TimeoutError extends Error {
  override name = 'TimeoutError';
}

function describeError(err: NodeJS.ErrnoException, timeoutSeconds: number): string {
  if (err instanceof TimeoutError) return `no answer within ${timeoutSeconds} s`;
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused (is the server running?)';
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return 'unknown host';
    case 'ECONNRESET':
      return 'connection reset';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return 'host unreachable';
    default:
      return err.message;
  }
}
