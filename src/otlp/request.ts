// What a request is mapped with: its signal, its encoding, and where its project id comes from.

export type Signal = 'traces' | 'logs' | 'metrics';
export type BodyFormat = 'json' | 'protobuf';

export interface MapContext {
  /** Project id from the request header (or the auth token); wins over the resource attribute. */
  headerProjectId?: string;
  defaultProjectId: string;
}
