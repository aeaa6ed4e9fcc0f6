// The walk every request takes, whatever its signal and encoding: request -> resource -> scope ->
// item. It reads resources and scopes through the reader, writes their columns down the rows
// their items made, and hands the rows on at the end of each resource. A signal's mapper
// (map-traces.ts, map-logs.ts, map-metrics.ts) maps the items.

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

export interface Walked {
  /** Spans, log records or metric data points in the request: the rows of the item tables. */
  items: number;
  /** Ids that were present but invalid (bad length or characters, all zero), stored as null. */
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

  /** Maps every item of the request into `sink`. */
  walk(sink: RowSink): Walked {
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
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === F.resource) {
        project = undefined;
        cells.serviceName = null;
        cells.attributes = '{}';
        cells.dropped = 0;
        if (!r.enter(RESOURCE)) continue;
        for (let g = r.next(); g !== END; g = r.next()) {
          if (g === F.attributes) r.attributes();
          else if (g === F.droppedAttributesCount) cells.dropped = r.int32();
          else r.skip();
        }
        cells.attributes = r.attributesJson();
        cells.serviceName = r.serviceName || null;
        project = r.projectId;
      } else if (f === F.schemaUrl) cells.schemaUrl = r.string();
      else if (f !== this.envelopes.scopes) r.skip();
      else if (r.enter(this.envelopes.scope)) this.scope();
    }
    cells.projectId = resourceProjectId(this.ctx, project);
    this.tables.forEach((t, k) => {
      t.fillResource(from[k]!, cells);
    });
  }

  private scope(): void {
    const r = this.r;
    const from = this.rowCounts();
    const cells: ScopeCells = { name: null, version: null, attributes: '{}', dropped: 0, schemaUrl: null };
    const e = this.envelopes;
    for (let f = r.next(); f !== END; f = r.next()) {
      if (f === e.items) {
        if (r.enter(e.item)) this.item();
      } else if (f === F.scope) {
        cells.name = cells.version = null;
        cells.attributes = '{}';
        cells.dropped = 0;
        if (!r.enter(SCOPE)) continue;
        for (let g = r.next(); g !== END; g = r.next()) {
          if (g === F.name) cells.name = r.string();
          else if (g === F.version) cells.version = r.string();
          else if (g === F.attributes) r.attributes();
          else if (g === F.droppedAttributesCount) cells.dropped = r.int32();
          else r.skip();
        }
        cells.attributes = r.attributesJson();
      } else if (f === F.schemaUrl) cells.schemaUrl = r.string();
      else r.skip();
    }
    this.tables.forEach((t, k) => {
      t.fillScope(from[k]!, cells);
    });
  }
}
