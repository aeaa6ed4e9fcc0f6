// The X-Project-Id a request sent, read one way by every hook that needs it (access, ingest, the
// refusal log). No dependencies: ingest, access and refusals all import it.

import type { IncomingHttpHeaders } from 'node:http';

/**
 * The X-Project-Id header as sent, or undefined. Node joins a repeated header's values with ", "
 * (which the project id rule refuses); an array, from a caller that kept them apart, is joined
 * the same way, so a repeat is refused rather than one of its values picked.
 */
export function sentProjectId(headers: IncomingHttpHeaders): string | undefined {
  const value = headers['x-project-id'];
  return Array.isArray(value) ? value.join(', ') : value;
}
