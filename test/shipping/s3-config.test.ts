import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { inspect } from 'node:util';
import { describeMissingS3, resolveS3 } from '../../src/storage/s3-config.ts';

const FULL = {
  S3_BUCKET: 'bkt',
  S3_ACCESS_KEY_ID: 'second-key',
  CLOUD_ACCESS_KEY_ID: 'first-key',
  S3_SECRET_KEY: 'second-secret-xxxxxxxx',
  S3_SECRET_ACCESS_KEY: 'third-secret-xxxxxxxx',
  S3_REGION: 'eu-1',
  S3_URL: 'https://s3.example.test',
  S3_PREFIX: '/team/otel/',
};

describe('object-storage settings', () => {
  test('every alias, first match in the specification order; prefix trimmed; region may be empty', () => {
    const s = resolveS3(undefined, FULL).settings!;
    assert.equal(s.bucket, 'bkt');
    assert.equal(s.accessKeyId, 'first-key');
    assert.equal(s.secretAccessKey, 'second-secret-xxxxxxxx');
    assert.equal(s.region, 'eu-1');
    assert.equal(s.endpointUrl, 'https://s3.example.test');
    assert.equal(s.dayKey('inst', '2026-01-02'), 'team/otel/inst/days/2026-01-02/otel/');
    assert.equal(s.allowHttp, false);
    const empty = resolveS3(undefined, { ...FULL, S3_REGION: '', CLOUD_REGION: undefined }).settings!;
    assert.equal(empty.region, '');
    assert.equal(empty.signingRegion, 'us-east-1');
    assert.equal(
      resolveS3(undefined, { ...FULL, S3_PREFIX: undefined }).settings!.dayKey('i', '2026-01-02'),
      'i/days/2026-01-02/otel/',
    );
  });

  test("the Logger's s3 argument overrides the environment field by field", () => {
    const s = resolveS3(
      { bucket: 'mine', endpointUrl: 'http://127.0.0.1:9000', sessionToken: 'token-123456789' },
      FULL,
    ).settings!;
    assert.equal(s.bucket, 'mine');
    assert.equal(s.accessKeyId, 'first-key');
    assert.equal(s.allowHttp, true);
    assert.equal(s.sessionToken, 'token-123456789');
    const o = s.polarsCloudOptions();
    for (const v of Object.values(o))
      assert.equal(typeof v, 'string', 'polars drops every cloud option when one is not a string');
    assert.equal(o['aws_allow_http'], 'true');
    assert.equal(o['aws_session_token'], 'token-123456789');
  });

  test('missing and invalid settings are named; secrets never show in JSON, inspect or messages', () => {
    const r = resolveS3(undefined, { S3_BUCKET: 'b', S3_SECRET_KEY: 'x' });
    assert.equal(r.settings, null);
    assert.deepEqual(r.missing, ['accessKeyId', 'region', 'endpointUrl']);
    assert.match(describeMissingS3(r.missing), /endpointUrl \(CLOUD_ENDPOINT_URL or S3_URL\)/);
    const bad = resolveS3(undefined, { ...FULL, S3_URL: 's3.example.test' });
    assert.equal(bad.settings, null);
    assert.match(bad.invalid!, /must start with https:\/\//);
    const s = resolveS3({ sessionToken: 'session-token-value' }, FULL).settings!;
    for (const text of [JSON.stringify(s), inspect(s), JSON.stringify({ ...s })]) {
      assert.doesNotMatch(text, /second-secret|session-token-value/);
    }
    assert.equal(
      s.redact('got second-secret-xxxxxxxx and session-token-value'),
      'got <redacted> and <redacted>',
    );
  });
});
