// The flags each command's action receives, as commander parses them (src/cli/program.ts). Apart
// from the command tree so that the commands' modules need not import it.

import type { Storage } from '../read/filters.ts';
import type { TableName } from '../schema/tables.ts';

export interface InstanceFlags {
  instanceId: string;
  dir: string;
}
export interface StartFlags extends InstanceFlags {
  /** Absent: the instance's saved server_config.host (0.0.0.0 by default). */
  host?: string;
  /** Absent: the instance's saved server_config.port (4318 by default). */
  port?: number;
  reload: boolean;
  foreground: boolean;
  /** false when a --reload supervisor owns the pidfile for its server child (hidden flag). */
  pidfile: boolean;
}
/** Start flags with the bind address settled (src/cli/start.ts). */
export type BoundStartFlags = StartFlags & { host: string; port: number };
export interface StopFlags extends InstanceFlags {
  force: boolean;
}
export interface StatusFlags extends InstanceFlags {
  /** Neither given: the instance's recorded server. Else one not given: the instance's server_config. */
  host?: string;
  port?: number;
  timeout: number;
}
export interface ShipFlags extends InstanceFlags {
  day?: string;
  all: boolean;
}
export interface ViewFlags extends InstanceFlags {
  storage: Storage;
  rows: number;
  /** commander's choices() allows only table names. */
  table?: TableName;
  select?: string[];
  dateFrom?: string;
  dateTo?: string;
  since?: string;
  until?: string;
  follow: boolean;
}
