// Project ids: the tenant key of every row. They arrive from clients (X-Project-Id, a resource's
// project.id attribute, read filters), tokens and configuration, and become part of stored rows
// and filters, so one rule, here, decides which are acceptable wherever they come from.

const PROJECT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The characters allowed, for the OpenAPI document (which cannot say that '..' is refused too). */
export const PROJECT_ID_PATTERN = PROJECT_ID.source;

export const PROJECT_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit";

export function isValidProjectId(value: unknown): value is string {
  return typeof value === 'string' && PROJECT_ID.test(value) && !value.includes('..');
}

/**
 * The project of a resource whose project.id attribute is not a valid project id: its items are
 * refused, counted in the response's partial_success with `reason`, and the request's other
 * resources are stored. One service's bad attribute must not cost a gateway Collector's whole
 * batch (400 is final for OTLP clients), nor be filed under the default project.
 */
export class RefusedProject {
  readonly reason: string;
  constructor(value: string | null) {
    const shown = value === null ? '(not a string value)' : JSON.stringify(value);
    this.reason = `invalid resource attribute project.id ${shown}: use ${PROJECT_ID_RULE}`;
  }
}

export interface ProjectContext {
  /** The request's project: its X-Project-Id header, or the project of its auth token. */
  headerProjectId?: string | undefined;
  /** Project of resources with no project.id attribute (server_config.default_project_id). */
  defaultProjectId: string;
}

/**
 * The project of a resource's rows. The request's project wins (a resource's project.id is then
 * ignored: with auth on, the token decides); else the resource's project.id attribute, held to the
 * same rule as the header; else the default. `attribute` is the attribute's string value, null
 * when it is there with a value that is not a string, undefined when the resource has none.
 * A RefusedProject for an attribute that is empty, not a string or not a valid id.
 */
export function resourceProjectId(
  ctx: ProjectContext,
  attribute: string | null | undefined,
): string | RefusedProject {
  const header = ctx.headerProjectId;
  if (header !== undefined && header !== '') return header;
  if (attribute === undefined) return ctx.defaultProjectId;
  if (!isValidProjectId(attribute)) return new RefusedProject(attribute);
  return attribute;
}
