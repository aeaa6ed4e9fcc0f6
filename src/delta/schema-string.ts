// The Delta `schemaString` of a table, derived from its TableSchema (the single source of truth).

import {
  type ColumnDef,
  type ColumnType,
  isListType,
  type TableName,
  type TableSchema,
} from '../schema/tables.ts';

type DeltaFieldType = string | { type: 'array'; elementType: string; containsNull: boolean };

export function deltaType(type: ColumnType): DeltaFieldType {
  // Lists never hold null elements (see ListType), so containsNull is false.
  if (isListType(type)) return { type: 'array', elementType: type.list, containsNull: false };
  return type;
}

/** Spark JSON schema of the table (nullability from ColumnDef.nullable). */
export function deltaSchemaString(schema: TableSchema): string {
  return JSON.stringify({
    type: 'struct',
    fields: schema.columns.map((c) => ({
      name: c.name,
      type: deltaType(c.type),
      nullable: c.nullable,
      metadata: {},
    })),
  });
}

const SCALARS = new Set(['string', 'long', 'integer', 'double', 'boolean', 'timestamp']);

/** The TableSchema of an existing table's schemaString (for readers opening a table by path). */
export function schemaFromDelta(schemaString: string, name: string): TableSchema {
  const parsed = JSON.parse(schemaString) as {
    fields?: { name: string; type: unknown; nullable: boolean }[];
  };
  const columns: ColumnDef[] = (parsed.fields ?? []).map((f) => {
    let type: ColumnType;
    if (typeof f.type === 'string' && SCALARS.has(f.type)) type = f.type as ColumnType;
    else if (
      typeof f.type === 'object' &&
      f.type !== null &&
      (f.type as { type?: string }).type === 'array' &&
      ['long', 'double'].includes((f.type as { elementType?: string }).elementType ?? '')
    )
      type = { list: (f.type as { elementType: 'long' | 'double' }).elementType };
    else throw new Error(`unsupported Delta column type of ${f.name}: ${JSON.stringify(f.type)}`);
    return { name: f.name, type, required: f.nullable === false, nullable: f.nullable !== false };
  });
  return { name: name as TableName, columns, byName: new Map(columns.map((c) => [c.name, c])) };
}
