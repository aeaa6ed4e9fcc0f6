// Integer time arithmetic of the tables: OTLP times are nanoseconds, event_ts is microseconds,
// Delta statistics are milliseconds; times before 1970 are negative and must round down too.

/** a / b rounded toward negative infinity (bigint division truncates toward zero). */
export function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
}

/** Nanoseconds since the epoch as whole microseconds (event_ts), floored. */
export function nanosToMicros(n: bigint): bigint {
  return floorDiv(n, 1000n);
}
