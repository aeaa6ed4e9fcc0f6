// The one interface the mappers read a request through, whatever its encoding: a walk down the
// request (request -> resource -> scope -> item), message by message, each message's fields by name
// (messages.ts), each value already of the type its column takes. Two readers implement it: the
// protobuf reader (protobuf-reader.ts) over the wire bytes, and the JSON reader (json-reader.ts)
// over the body's bytes, neither building a message tree.
//
// How a mapper reads a message:
//   if (r.enter(SPAN)) {
//     for (let f = r.next(); f !== END; f = r.next()) {
//       switch (f) {
//         case F.name: name = r.string(); break;
//         case F.attributes: r.attributes(); break;   // each run of the list
//         case F.events: if (r.enter(EVENT)) this.event(); break;   // each element of the list
//         default: r.skip();
//       }
//     }
//     const attributes = r.attributesJson();   // after END: the message's whole list
//   }
//
// A field may come more than once: the last value counts (a message field: the last one, whole,
// where protobuf would merge the two).
// The JSON reader throws DECLINED (json-cursor.ts) on what it leaves to the message tree (snake_case
// keys, values of an unexpected type, a list given twice...); the protobuf reader refuses an invalid
// body with OtlpDecodeError.

import type { Int64List } from './columns.ts';
import type { MessageType } from './messages.ts';

/** What `next` returns at the end of a message. */
export const END = -1;

/** What `id` returns for an id that is present but invalid (wrong length or characters). */
export const INVALID_ID: unique symbol = Symbol('invalid id');
export type ReadId = string | null | typeof INVALID_ID;

export interface OtlpReader {
  /** Enters the top-level message of the body. */
  begin(type: MessageType): void;
  /**
   * Enters the message of the field `next` returned (or the next element of a repeated message
   * field); false when there is none (a JSON null). The mapper then reads its fields up to END.
   */
  enter(type: MessageType): boolean;
  /** The id of the next field of the message entered last (F.name...), or END (the message is left). */
  next(): number;
  /** Skips the value of the field `next` returned. */
  skip(): void;
  /**
   * Reads ahead through the rest of the message entered last, if it holds at least `minBytes`:
   * each field's id goes to `own`, which reads the value (true) or leaves it to be skipped (false);
   * then the reader is back where it was. False, having read nothing, for a smaller message, and
   * where reading ahead costs a second scan (JSON); in protobuf a field's length stands before it,
   * so skipping an item is one jump.
   */
  readAhead(own: (field: number) => boolean, minBytes: number): boolean;

  // The value of the field `next` returned, as its column takes it; absent or null: the default.
  /** A string; "" (the proto3 default) is null. */
  string(): string | null;
  /** A trace id (16 bytes) or span id (8) as lowercase hex; null when empty. */
  id(byteLength: 16 | 8): ReadId;
  /** int64, uint64 (its bits, as a signed value), fixed64 and sfixed64. */
  int64(): bigint;
  /** int32, uint32 (refused beyond 2^31 - 1), sint32, and enums (JSON may give `names`). */
  int32(names?: Readonly<Record<string, number>>): number;
  /** fixed32 or uint32 flags, as the long column takes them. */
  flags(): bigint;
  double(): number;
  /** A double that proto3 marks optional: null when JSON gives null. */
  optionalDouble(): number | null;
  bool(): boolean;
  /** False, having read it, when a JSON null stands for the value (an absent oneof member). */
  present(): boolean;
  /**
   * A repeated fixed64 or uint64 field's values: added to `out` in protobuf (a field may come in
   * several runs), replacing what it holds in JSON (a key given twice: the last counts).
   */
  int64s(out: Int64List): void;
  doubles(out: number[]): void;
  /** Takes the KeyValue list of the message being read (one run of it in protobuf, all of it in JSON). */
  attributes(): void;
  /**
   * After END: the list `attributes` took in the message just left, as a JSON object text ('{}'
   * when none). For a message whose type has `names`, also sets `serviceName` and `projectId`.
   */
  attributesJson(): string;
  /** The string value of the service.name attribute (the last one), or null. */
  readonly serviceName: string | null;
  /**
   * The string value of the project.id attribute (the last one): null when its value is not a
   * string, undefined when the list has none (schema/project.ts' resourceProjectId tells them apart).
   */
  readonly projectId: string | null | undefined;
  /** An AnyValue as a log body: a string value as it is, any other value as JSON, null when none. */
  body(): string | null;
  /**
   * A oneof got a member after another one (e.g. a metric's `sum` after its `gauge`): protobuf
   * keeps the last member, as protobufjs does, so the mapper forgets the first; the JSON reader
   * declines the body (JSON.parse's tree orders members by precedence instead).
   */
  otherMember(): void;
}
