/** A request body that is not a valid OTLP message (the server answers 400, not retryable). */
export class OtlpDecodeError extends Error {
  override readonly name = 'OtlpDecodeError';
}

/**
 * Thrown while mapping a JSON request when an int64 field holds a JSON number beyond 2^53, which
 * JSON.parse has already rounded: the body is then parsed again exactly and mapped again.
 */
export class LossyJsonNumber extends Error {
  override readonly name = 'LossyJsonNumber';
}

/**
 * A request of more rows of a table than the server takes at once (MapContext.maxRows, at most
 * MAX_HELD_ROWS): answered 413, as a body beyond the size limit is.
 */
export class TooManyRowsError extends OtlpDecodeError {
  readonly status = 413;
}
