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

/** A resource's project.id attribute that is not a valid project id: the request is refused (400). */
export class InvalidProjectIdError extends Error {
  constructor(value: string | null) {
    super(
      `invalid resource attribute project.id ${value === null ? '(not a string value)' : JSON.stringify(value)}: ` +
        `use ${PROJECT_ID_RULE}`,
    );
    this.name = 'InvalidProjectIdError';
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
 * Throws InvalidProjectIdError for an attribute that is empty, not a string or not a valid id.
 */
export function resourceProjectId(ctx: ProjectContext, attribute: string | null | undefined): string {
  const header = ctx.headerProjectId;
  if (header !== undefined && header !== '') return header;
  if (attribute === undefined) return ctx.defaultProjectId;
  if (!isValidProjectId(attribute)) throw new InvalidProjectIdError(attribute);
  return attribute;
}
