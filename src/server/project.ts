// Project ids arrive from clients (X-Project-Id) and configuration; they become part of stored rows
// and filters, so only a conservative set of characters is accepted.

const PROJECT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** The characters allowed, for the OpenAPI document (which cannot say that '..' is refused too). */
export const PROJECT_ID_PATTERN = PROJECT_ID.source;

export function isValidProjectId(value: string): boolean {
  return PROJECT_ID.test(value) && !value.includes('..');
}

export const PROJECT_ID_RULE = "1-128 letters, digits, '.', '_' or '-', starting with a letter or digit";
