// Decode worker thread: runs RequestDecoder on request bodies posted by the server's Decoders and
// hands the column batches back by transfer.

import { workerData } from 'node:worker_threads';
import { transferables } from '../delta/batch.ts';
import { serveTasks, transferResult } from '../storage/worker-pool.ts';
import { type DecoderInit, type DecodeTask, RequestDecoder, undoAsyncCodings } from './decode.ts';

const init = workerData as DecoderInit;
const decoder = new RequestDecoder(init.protobuf, init.settings, init.limits);

serveTasks({
  async decode(task: DecodeTask) {
    const ready = await undoAsyncCodings(task);
    const result = 'ok' in ready ? ready : decoder.decode(ready);
    if (!result.ok) return result;
    return transferResult(
      result,
      Object.values(result.tables).flatMap((t) => transferables(t.batch)),
    );
  },
});
