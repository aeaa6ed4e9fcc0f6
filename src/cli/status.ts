// `otelake status`: GET /healthz of a running server (the instance's own, found from -I/-D, unless
// --host/--port name one) and show its process, producer (queue, accepted, rejected and dropped
// rows by reason) and aggregator (pending rows per table, writes, last flush, last error) as tables.

import { TABLE_NAMES } from '../schema/tables.ts';
import { InstanceLayout } from '../storage/layout.ts';
import { describeMissingS3, S3_ENV_ALIASES } from '../storage/s3-config.ts';
import { CliError } from './errors.ts';
import type { StatusFlags } from './flags.ts';
import { baseUrl, getJson, reachableHost } from './http.ts';
import { bytes, grid, outputWidth, panel } from './render.ts';
import { liveServerAddress, savedServerConfig } from './server-address.ts';

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const num = (v: unknown): string =>
  typeof v === 'number' ? v.toLocaleString('en-US') : v == null ? '-' : String(v);

/** `{reason: count}` as "a 3, b 1", or "0" when empty. */
function byReason(v: unknown): string {
  if (!isObject(v)) return num(v);
  const parts = Object.entries(v)
    .filter(([, n]) => typeof n === 'number' && n > 0)
    .map(([reason, n]) => `${reason} ${num(n)}`);
  return parts.length === 0 ? '0' : parts.join(', ');
}

function total(v: unknown): number {
  if (typeof v === 'number') return v;
  if (!isObject(v)) return 0;
  return Object.values(v).reduce<number>((a, n) => a + (typeof n === 'number' ? n : 0), 0);
}

function ago(iso: unknown, now: number): string {
  if (typeof iso !== 'string') return 'never';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  return `${iso} (${duration((now - t) / 1000)} ago)`;
}

export function duration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${s % 60} s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

/** A group of the /healthz answer (`producer`, `aggregator`, `shipper`), if present. */
function group(health: Json, name: string): Json | undefined {
  return isObject(health[name]) ? (health[name] as Json) : undefined;
}

/** The shipper's state: what it does now, what waits, the last day shipped and the last error. */
function shipperRows(s: Json, now: number): [string, string][] {
  const rows: [string, string][] = [];
  let state = String(s.state ?? '-');
  if (s.state === 'shipping' && typeof s.day === 'string') {
    state += ` ${s.day}: ${s.step ?? ''}`;
    if (s.step === 'upload')
      state += `, ${bytes(s.bytes_done)} of ${bytes(s.bytes_total)}, ${num(s.files_done)}/${num(s.files_total)} files`;
  }
  rows.push(['state', state]);
  rows.push(['enabled', s.enabled === false ? 'no (ship with otelake ship)' : 'yes']);
  if (s.configured === false) {
    // Named with their environment variables, as `ship` names them.
    const known = Array.isArray(s.missing)
      ? s.missing.filter((m: unknown) => Object.hasOwn(S3_ENV_ALIASES, String(m)))
      : [];
    const missing = known.length > 0 ? `: missing ${describeMissingS3(known)}` : '';
    rows.push(['configured', `no${missing}`]);
  }
  if (s.days_pending !== undefined) rows.push(['days pending', num(s.days_pending)]);
  if (typeof s.next_retry_at === 'string') rows.push(['next retry', s.next_retry_at]);
  const shipped = s.last_shipped;
  rows.push(['last shipped', isObject(shipped) ? `${shipped.day} (${ago(shipped.at, now)})` : 'none']);
  const err = s.last_error;
  rows.push([
    'last error',
    isObject(err)
      ? `${ago(err.at, now)}: ${err.day} ${err.step}: ${err.message}`
      : err == null
        ? 'none'
        : String(err),
  ]);
  return rows;
}

/** The status report as text (exported for tests). */
export function renderHealth(health: Json, url: string, now = Date.now(), width = outputWidth()): string {
  const out: string[] = [];
  const state = typeof health.status === 'string' ? health.status : 'ok';
  out.push(`otelake ${health.version ?? ''} at ${url}: ${state}`.replace(/ {2}/g, ' '));
  if (Array.isArray(health.problems)) for (const p of health.problems) out.push(`  problem: ${String(p)}`);

  // The field names of src/server/app.ts's /healthz; each is optional, so that an older or newer
  // server's answer still renders what it has.
  const server: [string, string][] = [];
  if (health.instance_id !== undefined) server.push(['instance', String(health.instance_id)]);
  if (health.pid !== undefined) server.push(['pid', String(health.pid)]);
  if (typeof health.uptime_s === 'number') server.push(['uptime', duration(health.uptime_s)]);
  const rss = group(health, 'memory')?.rss;
  if (rss !== undefined) server.push(['memory (rss)', bytes(rss)]);
  if (typeof health.protobuf === 'boolean') {
    server.push(['protobuf bodies', health.protobuf ? 'accepted' : 'not available (JSON only)']);
  }
  const auth = group(health, 'auth');
  if (typeof auth?.enabled === 'boolean') {
    server.push(['auth', auth.enabled ? `on (tokens)${auth.required ? ', required' : ''}` : 'off']);
  }
  if (server.length > 0) out.push(panel('server', server, width));

  const p = group(health, 'producer');
  if (p) {
    const capacity = p.queue_capacity;
    const depth = p.queue_depth;
    const queue =
      typeof depth === 'number' && typeof capacity === 'number' && capacity > 0
        ? `${num(depth)} / ${num(capacity)} (${Math.round((100 * depth) / capacity)} %)`
        : `${num(depth)} / ${num(capacity)}`;
    const rows: [string, string][] = [['queue', queue]];
    if (p.drop_policy !== undefined) rows.push(['drop policy', String(p.drop_policy)]);
    if (p.blocked_producers !== undefined) rows.push(['blocked producers', num(p.blocked_producers)]);
    rows.push(['accepted', num(p.accepted)]);
    rows.push([
      'rejected',
      total(p.rejected) === 0 ? '0' : `${num(total(p.rejected))}: ${byReason(p.rejected)}`,
    ]);
    rows.push(['dropped', total(p.dropped) === 0 ? '0' : `${num(total(p.dropped))}: ${byReason(p.dropped)}`]);
    out.push(panel('producer', rows, width));
  }

  const a = group(health, 'aggregator');
  if (a) {
    const rows: [string, string][] = [
      ['batches written', num(a.batches_written)],
      ['rows written', num(a.rows_written)],
    ];
    if (a.rows_failed !== undefined) rows.push(['rows failed', num(a.rows_failed)]);
    if (a.writes_in_flight !== undefined) rows.push(['writes in flight', num(a.writes_in_flight)]);
    rows.push(['last flush', ago(a.last_flush_at, now)]);
    const err = a.last_error;
    rows.push([
      'last error',
      err == null ? 'none' : isObject(err) ? `${ago(err.at, now)}: ${err.message}` : String(err),
    ]);
    out.push(panel('aggregator', rows, width));
    if (isObject(a.pending_rows)) {
      const pending = a.pending_rows as Json;
      const names = [
        ...TABLE_NAMES,
        ...Object.keys(pending).filter((t) => !(TABLE_NAMES as readonly string[]).includes(t)),
      ];
      const table = grid(
        ['table', 'pending rows'],
        names.map((t) => [t, num(pending[t] ?? 0)]),
        width,
        ['left', 'right'],
      );
      if (table) out.push(table);
    }
  }

  const wal = group(health, 'wal');
  if (typeof health.durability === 'string') {
    const rows: [string, string][] = [['durability', health.durability]];
    if (wal) {
      rows.push(
        ['pending rows', num(wal.pending_rows)],
        ['segments', `${num(wal.segments)} (${bytes(wal.bytes)})`],
      );
    }
    out.push(panel('write-ahead log', rows, width));
  }

  const shipper = group(health, 'shipper');
  if (shipper) out.push(panel('shipper', shipperRows(shipper, now), width));
  return out.join('\n') + '\n';
}

/**
 * The server to probe: the instance's (-I/-D) where `start` recorded it, unless --host or --port
 * is given; a flag not given takes the instance's server_config (defaults 127.0.0.1 and 4318, as
 * specified), with a note for the error when no server of the instance was recorded.
 */
async function target(flags: StatusFlags): Promise<{ url: string; unrecorded?: string }> {
  if (flags.host !== undefined && flags.port !== undefined) return { url: baseUrl(flags.host, flags.port) };
  const layout = new InstanceLayout(flags.dir, flags.instanceId);
  if (flags.host === undefined && flags.port === undefined) {
    const recorded = await liveServerAddress(layout.addressFile);
    if (recorded) return { url: recorded.url };
  }
  const config = await savedServerConfig(layout);
  const url = baseUrl(flags.host ?? reachableHost(config.host), flags.port ?? config.port);
  if (flags.host !== undefined || flags.port !== undefined) return { url };
  return {
    url,
    unrecorded: `no server of instance '${layout.instanceId}' runs from ${layout.root}; give --host/--port for one started otherwise`,
  };
}

export async function statusCommand(flags: StatusFlags): Promise<void> {
  const { url, unrecorded } = await target(flags);
  const res = await getJson(`${url}/healthz`, flags.timeout);
  if (!res.ok) {
    throw new CliError(
      `cannot get the status of otelake at ${url}: ${res.reason}${unrecorded ? ` (${unrecorded})` : ''}`,
    );
  }
  if (!isObject(res.body)) throw new CliError(`unexpected answer from ${url}/healthz (not a JSON object)`);
  process.stdout.write(renderHealth(res.body, url));
  // Reachable but unwell (any state other than ok): scripts and probes see a failure.
  const state = res.body.status;
  if (typeof state === 'string' && state !== 'ok') process.exitCode = 1;
}
