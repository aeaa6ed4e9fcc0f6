// The signals that stop a server process (`otelake start --foreground`, and the --reload
// supervisor), listened for from before its pidfile is claimed. Left to Node's default until the
// server ran, a signal in that time ended the process at once: the pidfile left behind, and once
// the server answered (it does before it writes its address beside the pidfile), rows
// acknowledged without the flush; the supervisor's server child left running. So a signal that
// comes while the server starts is kept, and acted on once it runs.

export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export class StopSignals {
  private kept: NodeJS.Signals | null = null;
  private handler: ((signal: NodeJS.Signals) => void) | null = null;
  /**
   * What a second signal does, while the server starts or while it stops: end the process now,
   * leaving nothing behind (for the caller to log first once the server runs).
   */
  readonly exitNow: () => never;
  private readonly listener = (signal: NodeJS.Signals): void => {
    if (this.handler !== null) this.handler(signal);
    else if (this.kept === null) this.kept = signal;
    else {
      process.stderr.write(`${signal} again while the server starts: exiting without it\n`);
      this.exitNow();
    }
  };

  constructor(exitNow: () => never) {
    this.exitNow = exitNow;
    for (const s of STOP_SIGNALS) process.on(s, this.listener);
  }

  /** From now on each signal goes to `handler`, the one kept while the server started first. */
  handle(handler: (signal: NodeJS.Signals) => void): void {
    this.handler = handler;
    const kept = this.kept;
    this.kept = null;
    if (kept !== null) handler(kept);
  }

  /** Stops listening: Node's default applies again. */
  close(): void {
    for (const s of STOP_SIGNALS) process.off(s, this.listener);
  }
}
