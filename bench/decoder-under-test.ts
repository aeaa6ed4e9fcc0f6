// The server's decode step of this checkout, or of another one's src/ (`--src DIR`, for A against
// B), with protobufjs loaded: what the decode benchmarks time, and a decoder of it with the
// default options' settings.

import { resolve } from 'node:path';
import { loadProtobuf } from '../src/otlp/index.ts';
import { validationSettings } from '../src/schema/validate.ts';
import { defaultOptions } from '../src/storage/options.ts';

export async function decoderUnderTest(src: string | undefined) {
  const codec = await loadProtobuf();
  if (!codec) throw new Error('protobufjs is needed for the protobuf cases');
  const srcDir = src === undefined ? new URL('../src/', import.meta.url).pathname : `${resolve(src)}/`;
  const { RequestDecoder } = (await import(
    `${srcDir}server/decode.ts`
  )) as typeof import('../src/server/decode.ts');
  // Before issue 19 the decoder took protobufjs' codec; since then whether protobuf is on (the
  // codec is truthy). The attribute limits (issue 21) are the defaults; a decoder from before
  // ignores them.
  const o = defaultOptions();
  const { server_config: server } = o;
  const decoder = new RequestDecoder(
    codec as unknown as boolean,
    validationSettings(o.producer_config, o.aggregator_config.strict_df),
    { countLimit: server.attribute_count_limit, valueLengthLimit: server.attribute_value_length_limit },
  );
  return { codec, srcDir, RequestDecoder, decoder };
}
