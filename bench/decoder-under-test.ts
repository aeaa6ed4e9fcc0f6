// The server's decode step of this checkout, or of another one's src/ (`--src DIR`, for A against
// B), with protobufjs loaded: what the decode benchmarks time.

import { resolve } from 'node:path';
import { loadProtobuf } from '../src/otlp/index.ts';

export async function decoderUnderTest(src: string | undefined) {
  const codec = await loadProtobuf();
  if (!codec) throw new Error('protobufjs is needed for the protobuf cases');
  const srcDir = src === undefined ? new URL('../src/', import.meta.url).pathname : `${resolve(src)}/`;
  const { RequestDecoder } = (await import(
    `${srcDir}server/decode.ts`
  )) as typeof import('../src/server/decode.ts');
  return { codec, srcDir, RequestDecoder };
}
