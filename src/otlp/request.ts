// What a request is mapped with: its signal, its encoding, and where its project id comes from.

import type { ProjectContext } from '../schema/project.ts';

export type Signal = 'traces' | 'logs' | 'metrics';
export type BodyFormat = 'json' | 'protobuf';

/** The request's project ids (schema/project.ts' resourceProjectId decides each resource's). */
export type MapContext = ProjectContext;
