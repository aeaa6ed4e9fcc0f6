// What a request is mapped with: its signal, its encoding, and where its project id comes from.

import type { ProjectContext } from '../schema/project.ts';

export type Signal = 'traces' | 'logs' | 'metrics';
export type BodyFormat = 'json' | 'protobuf';

/** The request's project ids (schema/project.ts' resourceProjectId decides each resource's), and its row cap. */
export interface MapContext extends ProjectContext {
  /**
   * Rows of one table a mapper holds at once, at most (default MAX_HELD_ROWS): the server sets it
   * from its memory limit, as its sink refuses a request of more rows (server/decode.ts).
   */
  maxRows?: number;
}
