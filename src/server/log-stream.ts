// The server's JSON log lines when its stdout is a file (the instance's server.log for a server
// started in the background, on the data disk) or a device: each line written at once, and a line
// that cannot be written (ENOSPC on a full disk) dropped and counted, never an error. pino's
// default stream raised the failed write as an unhandled 'error' and, exiting, retried it every
// 100 ms for ever: a full disk hung the server (no answers, SIGTERM ignored), then crashed it.
// A pipe, a socket or a terminal keeps pino's own stream, asynchronous, as a slow reader needs.

import { fstatSync, writeSync } from 'node:fs';
import { isatty } from 'node:tty';

export interface LogDestination {
  write(line: string): void;
}

/** A destination for fastify's logger on `fd`, or null where pino's own stream suits it better. */
export function droppingLogStream(fd = 1): LogDestination | null {
  let st: ReturnType<typeof fstatSync>;
  try {
    st = fstatSync(fd);
  } catch {
    return null;
  }
  if (!(st.isFile() || (st.isCharacterDevice() && !isatty(fd)))) return null;
  let dropped = 0;
  let reason = '';
  let torn = false; // a line cut short: the next one starts on a line of its own
  const put = (text: string): void => {
    const bytes = Buffer.from(text);
    let at = 0;
    try {
      while (at < bytes.length) at += writeSync(fd, bytes, at);
    } catch (err) {
      if (at > 0) torn = true;
      throw err;
    }
  };
  return {
    write(line: string): void {
      try {
        if (dropped > 0) {
          const msg = `${dropped} log lines could not be written and were dropped: ${reason}`;
          put(`${torn ? '\n' : ''}${JSON.stringify({ level: 40, time: Date.now(), msg })}\n`);
          dropped = 0;
          torn = false;
        }
        put(line);
      } catch (err) {
        dropped++;
        reason = (err as Error).message;
      }
    },
  };
}
