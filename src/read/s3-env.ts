// Which object-storage variables of the specification are set. Reads only need to know whether the
// configuration is complete (to refuse `storage: 's3'` clearly); shipping owns the full client setup.

/** Each setting and its accepted variable names, in the specification's order (first match wins). */
export const S3_ENV_ALIASES = {
  bucket: ['S3_BUCKET'],
  accessKeyId: ['CLOUD_ACCESS_KEY_ID', 'S3_ACCESS_KEY_ID'],
  secretAccessKey: ['CLOUD_SECRET_ACCESS_KEY', 'S3_SECRET_KEY', 'S3_SECRET_ACCESS_KEY'],
  region: ['CLOUD_REGION', 'S3_REGION'],
  endpointUrl: ['CLOUD_ENDPOINT_URL', 'S3_URL'],
} as const;

export type S3Setting = keyof typeof S3_ENV_ALIASES;

/**
 * Settings whose variables are all absent. The region may be set to an empty string (some
 * S3-compatible vendors have none); every other setting must be non-empty.
 */
export function missingS3Settings(env: NodeJS.ProcessEnv = process.env): S3Setting[] {
  const missing: S3Setting[] = [];
  for (const [setting, names] of Object.entries(S3_ENV_ALIASES) as [S3Setting, readonly string[]][]) {
    const allowEmpty = setting === 'region';
    const found = names.some((n) => env[n] !== undefined && (allowEmpty || env[n] !== ''));
    if (!found) missing.push(setting);
  }
  return missing;
}

/** Human-readable list of what is missing, naming every accepted variable. */
export function describeMissingS3(missing: readonly S3Setting[]): string {
  return missing.map((s) => `${s} (${S3_ENV_ALIASES[s].join(' or ')})`).join(', ');
}
