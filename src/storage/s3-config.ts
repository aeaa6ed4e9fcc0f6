// The object-storage settings: from the environment with every alias of the specification (first
// match wins, in the specification's order), overridden field by field by the Logger's `s3`
// argument. Secrets live in private fields: they never appear in JSON, logs or messages.

/** The Logger's `s3` argument: each field given overrides the environment. */
export interface S3Config {
  bucket?: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  /** May be empty: some S3-compatible vendors have no regions. */
  region?: string;
  /** `https://...` (the norm) or `http://...`. */
  endpointUrl?: string;
  /** Key prefix before `<instance_id>/days/...`. */
  prefix?: string;
  /** Temporary credentials. */
  sessionToken?: string;
}

/** Each setting and its accepted variable names, in the specification's order (first match wins). */
export const S3_ENV_ALIASES = {
  bucket: ['S3_BUCKET'],
  accessKeyId: ['CLOUD_ACCESS_KEY_ID', 'S3_ACCESS_KEY_ID'],
  secretAccessKey: ['CLOUD_SECRET_ACCESS_KEY', 'S3_SECRET_KEY', 'S3_SECRET_ACCESS_KEY'],
  region: ['CLOUD_REGION', 'S3_REGION'],
  endpointUrl: ['CLOUD_ENDPOINT_URL', 'S3_URL'],
} as const;

/** The optional settings and their variables. */
const OPTIONAL_ALIASES = { prefix: ['S3_PREFIX'], sessionToken: ['CLOUD_SESSION_TOKEN'] } as const;

export type S3Setting = keyof typeof S3_ENV_ALIASES;

/** Every field of S3Config. */
export const S3_CONFIG_KEYS: readonly (keyof S3Config)[] = [
  ...(Object.keys(S3_ENV_ALIASES) as S3Setting[]),
  ...(Object.keys(OPTIONAL_ALIASES) as (keyof typeof OPTIONAL_ALIASES)[]),
];

/** The region used for signing when none is configured (S3-compatible servers ignore it). */
const SIGNING_REGION_WHEN_EMPTY = 'us-east-1';

/** A complete object-storage configuration. */
export class S3Settings {
  readonly bucket: string;
  readonly accessKeyId: string;
  readonly region: string;
  readonly endpointUrl: string;
  /** Without leading or trailing slashes; may be empty. */
  readonly prefix: string;
  readonly #secretAccessKey: string;
  readonly #sessionToken: string | null;

  constructor(c: Required<Omit<S3Config, 'prefix' | 'sessionToken'>> & S3Config) {
    this.bucket = c.bucket;
    this.accessKeyId = c.accessKeyId;
    this.region = c.region;
    this.endpointUrl = c.endpointUrl;
    this.prefix = (c.prefix ?? '').replace(/^\/+|\/+$/g, '');
    this.#secretAccessKey = c.secretAccessKey;
    this.#sessionToken = c.sessionToken ? c.sessionToken : null;
  }

  get secretAccessKey(): string {
    return this.#secretAccessKey;
  }
  get sessionToken(): string | null {
    return this.#sessionToken;
  }
  get signingRegion(): string {
    return this.region === '' ? SIGNING_REGION_WHEN_EMPTY : this.region;
  }
  get allowHttp(): boolean {
    return this.endpointUrl.startsWith('http://');
  }

  /** The key of the folder holding a day's six tables: `<prefix>/<instance>/days/<day>/otel/`. */
  dayKey(instanceId: string, day: string): string {
    return `${this.daysKey(instanceId)}${day}/otel/`;
  }
  /** The key of the folder holding an instance's days: `<prefix>/<instance>/days/`. */
  daysKey(instanceId: string): string {
    return `${this.prefix === '' ? '' : `${this.prefix}/`}${instanceId}/days/`;
  }
  uri(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  /** Options for polars' object store: ALL strings, or polars silently drops them and calls AWS. */
  polarsCloudOptions(): Record<string, string> {
    const o: Record<string, string> = {
      aws_endpoint_url: this.endpointUrl,
      aws_access_key_id: this.accessKeyId,
      aws_secret_access_key: this.#secretAccessKey,
      aws_region: this.signingRegion,
      aws_virtual_hosted_style_request: 'false',
      aws_allow_http: this.allowHttp ? 'true' : 'false',
    };
    if (this.#sessionToken !== null) o['aws_session_token'] = this.#sessionToken;
    return o;
  }

  /**
   * `text` with the secret and the session token replaced: a defence for messages of libraries,
   * as otelake's own never contain them. Values too short to be real secrets are left alone (they
   * would blank out ordinary words).
   */
  redact(text: string): string {
    let out = text;
    for (const secret of [this.#secretAccessKey, this.#sessionToken]) {
      if (secret && secret.length >= 8) out = out.split(secret).join('<redacted>');
    }
    return out;
  }

  /** What is safe to show: where, not who. */
  toJSON(): Record<string, string> {
    return { endpoint: this.endpointUrl, bucket: this.bucket, prefix: this.prefix, region: this.region };
  }
}

export interface ResolvedS3 {
  /** Null when a required setting is missing or invalid. */
  settings: S3Settings | null;
  /** Required settings with no value. */
  missing: S3Setting[];
  /** Why a given value cannot be used (e.g. an endpoint that is not an http(s) URL). */
  invalid: string | null;
}

function fromEnv(names: readonly string[], env: NodeJS.ProcessEnv, allowEmpty: boolean): string | undefined {
  for (const n of names) {
    const v = env[n];
    if (v !== undefined && (allowEmpty || v !== '')) return v;
  }
  return undefined;
}

/**
 * The settings from the environment, each overridden by `given` when it has the field. The
 * region may be empty (some S3-compatible vendors have none); every other required setting must
 * be non-empty.
 */
export function resolveS3(
  given: S3Config | undefined = undefined,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedS3 {
  const values: Record<string, string | undefined> = {};
  const missing: S3Setting[] = [];
  for (const [setting, names] of Object.entries(S3_ENV_ALIASES) as [S3Setting, readonly string[]][]) {
    const allowEmpty = setting === 'region';
    const own = given?.[setting];
    const v = own !== undefined && (allowEmpty || own !== '') ? own : fromEnv(names, env, allowEmpty);
    if (v === undefined) missing.push(setting);
    values[setting] = v;
  }
  for (const [setting, names] of Object.entries(OPTIONAL_ALIASES)) {
    values[setting] = given?.[setting as keyof S3Config] ?? fromEnv(names, env, false);
  }
  if (missing.length > 0) return { settings: null, missing, invalid: null };
  const endpoint = values['endpointUrl']!;
  if (!/^https?:\/\/[^/\s]+/i.test(endpoint)) {
    return {
      settings: null,
      missing,
      invalid: `the endpoint URL must start with https:// (or http://), got ${JSON.stringify(endpoint)}`,
    };
  }
  return {
    settings: new S3Settings(values as unknown as ConstructorParameters<typeof S3Settings>[0]),
    missing,
    invalid: null,
  };
}

/** Settings whose variables are all absent (see resolveS3). */
export function missingS3Settings(env: NodeJS.ProcessEnv = process.env): S3Setting[] {
  return resolveS3(undefined, env).missing;
}

/** Human-readable list of what is missing, naming every accepted variable. */
export function describeMissingS3(missing: readonly S3Setting[]): string {
  return missing.map((s) => `${s} (${S3_ENV_ALIASES[s].join(' or ')})`).join(', ');
}

/** Why shipping and S3 reads are unavailable, in one sentence; null when they are configured. */
export function s3Problem(r: ResolvedS3): string | null {
  if (r.settings) return null;
  if (r.invalid) return `the object-storage configuration is invalid: ${r.invalid}`;
  return `the object-storage configuration is incomplete; missing: ${describeMissingS3(r.missing)}`;
}
