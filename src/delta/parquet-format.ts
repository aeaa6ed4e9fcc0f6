// Field numbers of the Parquet footer structs (parquet.thrift) that this engine reads or rewrites
// (parquet-concat.ts, column-index.ts), and the magic bytes around a file.

export const MAGIC = Buffer.from('PAR1');

// FileMetaData
export const FMD_VERSION = 1;
export const FMD_SCHEMA = 2;
export const FMD_NUM_ROWS = 3;
export const FMD_ROW_GROUPS = 4;
export const FMD_KEY_VALUE = 5;
export const FMD_CREATED_BY = 6;
export const FMD_COLUMN_ORDERS = 7;
export const FMD_ENCRYPTION = 8;
// RowGroup
export const RG_COLUMNS = 1;
export const RG_NUM_ROWS = 3;
export const RG_FILE_OFFSET = 5;
export const RG_ORDINAL = 7;
// ColumnChunk
export const CC_FILE_PATH = 1;
export const CC_FILE_OFFSET = 2;
export const CC_META = 3;
export const CC_OFFSET_INDEX_OFFSET = 4;
export const CC_OFFSET_INDEX_LENGTH = 5;
export const CC_COLUMN_INDEX_OFFSET = 6;
export const CC_COLUMN_INDEX_LENGTH = 7;
export const CC_CRYPTO = 8;
// ColumnMetaData
export const CM_TYPE = 1;
export const CM_NUM_VALUES = 5;
export const CM_TOTAL_UNCOMPRESSED = 6;
export const CM_TOTAL_COMPRESSED = 7;
export const CM_DATA_PAGE_OFFSET = 9;
export const CM_INDEX_PAGE_OFFSET = 10;
export const CM_DICTIONARY_PAGE_OFFSET = 11;
export const CM_BLOOM_OFFSET = 14;
export const CM_STATISTICS = 12;
// Statistics: max and min (deprecated), null_count, max_value and min_value
export const ST_MAX = 1;
export const ST_MIN = 2;
export const ST_NULL_COUNT = 3;
export const ST_MAX_VALUE = 5;
export const ST_MIN_VALUE = 6;
// PageHeader
export const PH_TYPE = 1;
export const PH_COMPRESSED_SIZE = 3;
export const PH_DATA_HEADER = 5;
export const PH_DICTIONARY_HEADER = 7;
// OffsetIndex / PageLocation
export const OI_PAGE_LOCATIONS = 1;
export const PL_OFFSET = 1;
