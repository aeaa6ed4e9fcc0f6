// The walk every request takes, whatever its signal and encoding: request -> resource -> scope ->
// item. It reads resources and scopes through the reader, writes their columns down the rows
// their items made, and hands the rows on. A signal's mapper (map-traces.ts, map-logs.ts,
// map-metrics.ts) maps the items.
//
// A resource's or scope's own fields may come after its items (`schemaUrl` does, as SDKs and the
// Collector write it), so in JSON a resource's rows wait, as cells, for its end. In protobuf a
// resource of READ_AHEAD_BYTES or more has them read ahead (readAhead: an item is skipped in one
// jump) and hands rows on every HAND_ON_ROWS: with the Collector's 8,192-item requests a scope's
// rows had outlived the decoders' young generation (5.8 MiB of a request promoted), and handing
// them on early took 11-31% less CPU in the decode step, and at the server 4-58 MiB less peak RSS
// with log records and metric points (docs/benchmarks.md).

import { resourceProjectId } from '../schema/project.ts';
import type { ResourceCells, RowSink, ScopeCells, TableRows } from './columns.ts';
import { F, type MessageType, RESOURCE, SCOPE } from './messages.ts';
import { END, INVALID_ID, type OtlpReader, type ReadId } from './reader.ts';
import type { MapContext } from './request.ts';

/** A signal's envelopes: the request's list of resources, each's list of scopes, each's items. */
export interface Envelopes {
  request: MessageType;
  /** The field of the request that lists resources (F.resourceSpans...), and its message. */
  resources: number;
  resource: MessageType;
  scopes: number;
  scope: MessageType;
  items: number;
  item: MessageType;
}

/** Rows a scope holds before handing them on, when its cells and its resource's were read ahead. */
export const HAND_ON_ROWS = 256;
/**
 * Resources smaller than this are read once, their rows held to the end: for requests of 100 items
 * reading ahead cost 0-7% more of the decode step's CPU and saved nothing (their rows die young).
 */
export const READ_AHEAD_BYTES = 256 * 1024;

export interface Walked {
  /** Spans, log records or metric data points in the request: the rows of the item tables. */
  items: number;
  /** Ids present but invalid (bad length or characters), stored as null; all-zero ids: null, not counted. */
  invalidIds: number;
}

export abstract class RequestWalker {
  protected readonly r: OtlpReader;
  private readonly ctx: MapContext;
  private readonly envelopes: Envelopes;
  /** Every table the signal fills. */
  private readonly tables: readonly TableRows[];
  protected invalidIds = 0;

  constructor(r: OtlpReader, ctx: MapContext, envelopes: Envelopes, tables: readonly TableRows[]) {
    this.r = r;
    this.ctx = ctx;
    this.envelopes = envelopes;
    this.tables = tables;
  }

  /** Maps the item the reader has just entered (a span, a log record, a metric), up to its END. */
  protected abstract item(): void;
  /** Items mapped so far, rows handed on included. */
  protected abstract items(): number;

  /** Where rows go; set by `walk`. */
  private sink!: RowSink;

  /** Maps every item of the request into `sink`. */
  walk(sink: RowSink): Walked {
    this.sink = sink;
    const r = this.r;
    const e = this.envelopes;
    r.begin(e.request);
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f !== e.resources) r.skip();
      else if (r.enter(e.resource)) {
        this.resource();
        for (const t of this.tables) t.flush(sink);
      }
    }
    return { items: this.items(), invalidIds: this.invalidIds };
  }

  /** An id as its column takes it: an invalid one is null, and counted. */
  protected checkId(id: ReadId): string | null {
    if (id !== INVALID_ID) return id;
    this.invalidIds++;
    return null;
  }

  private rowCounts(): number[] {
    return this.tables.map((t) => t.n);
  }

  private resource(): void {
    const r = this.r;
    const from = this.rowCounts();
    const cells: ResourceCells = {
      projectId: '',
      serviceName: null,
      attributes: '{}',
      dropped: 0,
      schemaUrl: null,
    };
    let project: string | null | undefined;
    const own = (f: number): boolean => {
      if (f === F.resource) {
        project = undefined;
        cells.serviceName = null;
        cells.attributes = '{}';
        cells.dropped = 0;
        if (!r.enter(RESOURCE)) return true;
        for (let g = r.next(); g !== END; g = r.next()) {
          if (g === F.attributes) r.attributes();
          else if (g === F.droppedAttributesCount) cells.dropped = r.int32();
          else r.skip();
        }
        cells.attributes = r.attributesJson();
        cells.serviceName = r.serviceName || null;
        project = r.projectId;
        return true;
      }
      if (f === F.schemaUrl) {
        cells.schemaUrl = r.string();
        return true;
      }
      return false;
    };
    const ahead = r.readAhead(own, READ_AHEAD_BYTES);
    if (ahead) cells.projectId = resourceProjectId(this.ctx, project);
    const e = this.envelopes;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === e.scopes) {
        if (r.enter(e.scope)) this.scope(ahead ? cells : null);
      } else if (ahead || !own(f)) r.skip();
    }
    if (ahead) return; // every row was handed on by its scope
    cells.projectId = resourceProjectId(this.ctx, project);
    this.tables.forEach((t, k) => {
      t.fillResource(from[k]!, cells);
    });
  }

  /** A scope: with `resource` (its cells read ahead), rows are handed on as they are made. */
  private scope(resource: ResourceCells | null): void {
    const r = this.r;
    let from = this.rowCounts();
    const cells: ScopeCells = { name: null, version: null, attributes: '{}', dropped: 0, schemaUrl: null };
    const own = (f: number): boolean => {
      if (f === F.scope) {
        cells.name = cells.version = null;
        cells.attributes = '{}';
        cells.dropped = 0;
        if (!r.enter(SCOPE)) return true;
        for (let g = r.next(); g !== END; g = r.next()) {
          if (g === F.name) cells.name = r.string();
          else if (g === F.version) cells.version = r.string();
          else if (g === F.attributes) r.attributes();
          else if (g === F.droppedAttributesCount) cells.dropped = r.int32();
          else r.skip();
        }
        cells.attributes = r.attributesJson();
        return true;
      }
      if (f === F.schemaUrl) {
        cells.schemaUrl = r.string();
        return true;
      }
      return false;
    };
    const e = this.envelopes;
    const ahead = resource !== null && r.readAhead(own, 0);
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === e.items) {
        if (!r.enter(e.item)) continue;
        this.item();
        if (ahead && this.holdsEnough()) {
          this.handOn(from, cells, resource);
          from = this.rowCounts();
        }
      } else if (ahead || !own(f)) r.skip();
    }
    if (ahead) this.handOn(from, cells, resource);
    else {
      this.tables.forEach((t, k) => {
        t.fillScope(from[k]!, cells);
      });
    }
  }

  private holdsEnough(): boolean {
    const tables = this.tables;
    for (let k = 0; k < tables.length; k++) if (tables[k]!.n >= HAND_ON_ROWS) return true;
    return false;
  }

  /** Writes the scope's and the resource's cells down the rows made since `from`; hands every row on. */
  private handOn(from: number[], scope: ScopeCells, resource: ResourceCells): void {
    this.tables.forEach((t, k) => {
      t.fillScope(from[k]!, scope);
      t.fillResource(from[k]!, resource);
      t.flush(this.sink);
    });
  }
}
