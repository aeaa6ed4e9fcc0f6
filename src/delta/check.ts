// Checks one Delta table with otelake's own reader, as strictly as an independent reader would
// need it: every commit parses, the checkpoint readers start from is readable, the log replays into
// a snapshot, and every live data file is there with its logged size and a readable Parquet footer
// whose row count matches the log's statistics. Each finding says what is damaged and how to
// repair it. Read-only: safe while the server writes the table.

import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type Action,
  checkpointFileName,
  commitFileName,
  LAST_CHECKPOINT,
  LOG_DIR,
  parseCommit,
} from './actions.ts';
import { parquetRowCount } from './parquet-footer.ts';
import { type AddFile, DeltaTable, listLog } from './table.ts';

export interface Finding {
  /** `damaged`: readers fail or miss rows; `warning`: only older versions (time travel) are affected. */
  severity: 'damaged' | 'warning';
  /** What is wrong, naming the file. */
  problem: string;
  /** How to repair it. */
  repair: string;
}

export interface TableCheck {
  dir: string;
  /** The snapshot's version, null when the log gives none. */
  version: number | null;
  /** Live data files and their rows (per the log's statistics). */
  files: number;
  rows: number;
  findings: Finding[];
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** What is wrong with a live data file, or null: present, of its logged size, footer and row count right. */
export async function dataFileProblem(dir: string, f: AddFile): Promise<string | null> {
  const path = join(dir, decodeURIComponent(f.path));
  let found: { size: number; rows: number };
  try {
    found = await parquetRowCount(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return `data file ${f.path} (${f.numRecords} rows) is missing`;
    return `data file ${f.path} is unreadable: ${errMessage(err)}`;
  }
  if (found.size !== f.size) return `data file ${f.path} has ${found.size} bytes, the log says ${f.size}`;
  if (f.numRecords >= 0 && found.rows !== f.numRecords)
    return `data file ${f.path} holds ${found.rows} rows, the log says ${f.numRecords}`;
  return null;
}

/** The problems of a table's live data files (see dataFileProblem), by file. */
export async function dataFileProblems(table: DeltaTable): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const f of table.files) {
    const problem = await dataFileProblem(table.dir, f);
    if (problem) out.set(f.path, problem);
  }
  return out;
}

/** Data files in the table folder that no readable commit or checkpoint names. */
async function unreferencedFiles(dir: string, named: ReadonlySet<string>): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => n.endsWith('.parquet') && !named.has(n));
}

/** Records the data files an action names. */
function noteNamed(named: Set<string>, actions: readonly Action[]): void {
  for (const a of actions) {
    const path = a.add?.path ?? a.remove?.path;
    if (path !== undefined) named.add(decodeURIComponent(path));
  }
}

/** Placeholder of a broken commit's repair until the whole log is known. */
const COMMIT_REPAIR = '(commit)';

const FIX_DATA_FILE =
  'restore it from a backup (or from the shipped copy of the day); to give up its rows instead, move ' +
  'it out of the table folder if it is still there, then remove it from the log with an independent ' +
  "Delta tool, e.g. Python deltalake: DeltaTable('<table folder>').repair()";

/** Checks the table in `dir` (see the file comment). */
export async function checkTable(dir: string): Promise<TableCheck> {
  const logDir = join(dir, LOG_DIR);
  const report: TableCheck = { dir, version: null, files: 0, rows: 0, findings: [] };
  const damaged = (problem: string, repair: string) =>
    report.findings.push({ severity: 'damaged', problem, repair });
  const warning = (problem: string, repair: string) =>
    report.findings.push({ severity: 'warning', problem, repair });

  const listing = await listLog(logDir);
  if (listing.commits.length === 0 && listing.checkpoints.length === 0) {
    damaged(
      `${LOG_DIR} holds no commit and no checkpoint: this is not a Delta table`,
      `restore ${LOG_DIR} from a backup; a folder holding no data files can be deleted (otelake creates the table again when it needs it)`,
    );
    return report;
  }

  // _last_checkpoint: readers start from the checkpoint it names.
  let hinted: number | null = null;
  if (listing.lastCheckpoint) {
    const fix = `delete ${LOG_DIR}/${LAST_CHECKPOINT}: readers then find the newest checkpoint by listing the log`;
    try {
      const v = (JSON.parse(await readFile(join(logDir, LAST_CHECKPOINT), 'utf8')) as { version?: unknown })
        .version;
      if (!(typeof v === 'number' && Number.isSafeInteger(v) && v >= 0)) throw new Error('no valid version');
      hinted = v;
      if (!listing.checkpoints.includes(v))
        damaged(`${LAST_CHECKPOINT} names checkpoint ${v}, which is missing`, fix);
    } catch (err) {
      damaged(`${LAST_CHECKPOINT} is unreadable: ${errMessage(err)}`, fix);
    }
  }

  // Checkpoints, newest first: the newest readable one is where the snapshot starts.
  const named = new Set<string>();
  let base = -1;
  const brokenCheckpoints: { name: string; finding: Finding; last: boolean }[] = [];
  for (const cp of listing.checkpoints) {
    const name = `${LOG_DIR}/${checkpointFileName(cp)}`;
    try {
      const { decodeCheckpoint } = await import('./checkpoint.ts');
      const actions = decodeCheckpoint(await readFile(join(dir, name)));
      if (!actions.some((a) => a.metaData) || !actions.some((a) => a.protocol))
        throw new Error('no protocol or metaData action');
      noteNamed(named, actions);
      if (base < 0) base = cp;
    } catch (err) {
      const problem = `checkpoint ${name} is unreadable: ${errMessage(err)}`;
      if (base >= 0) warning(problem, `delete ${name}: only versions before ${base} read from it`);
      else {
        damaged(problem, '');
        brokenCheckpoints.push({ name, finding: report.findings.at(-1)!, last: hinted === cp });
      }
    }
  }

  // Commits: each must parse; the ones after the base checkpoint make the snapshot.
  const newest = listing.commits.at(-1) ?? base;
  const present = new Set(listing.commits);
  let firstBroken: number | null = null;
  for (const v of listing.commits) {
    const name = `${LOG_DIR}/${commitFileName(v)}`;
    let problem: string | null = null;
    try {
      const actions = parseCommit(await readFile(join(dir, name), 'utf8'), v);
      if (actions.length === 0) problem = `commit ${name} is empty`;
      noteNamed(named, actions);
    } catch (err) {
      problem = `commit ${name} is unreadable: ${errMessage(err)}`;
    }
    if (problem === null) continue;
    if (v <= base) {
      warning(
        problem,
        `only reading versions before ${base} (time travel) needs it: restore it from a backup, or leave it`,
      );
    } else {
      firstBroken ??= v;
      damaged(problem, COMMIT_REPAIR);
    }
  }
  for (let v = Math.max(base + 1, listing.commits[0] ?? 0); v <= newest; v++) {
    if (present.has(v)) continue;
    firstBroken = firstBroken === null ? v : Math.min(firstBroken, v);
    damaged(
      `commit ${LOG_DIR}/${commitFileName(v)} is missing (the log goes up to ${newest})`,
      COMMIT_REPAIR,
    );
  }
  if (base < 0 && !present.has(0) && listing.commits.length > 0) {
    damaged(
      `no readable checkpoint, and the commits start at ${listing.commits[0]}, not 0: there is nothing to build the table from`,
      'restore the checkpoint or the first commits from a backup',
    );
  }

  let table: DeltaTable | null = null;
  try {
    table = await DeltaTable.open(dir);
  } catch (err) {
    if (!report.findings.some((f) => f.severity === 'damaged'))
      damaged(`the log gives no snapshot: ${errMessage(err)}`, 'restore the table from a backup');
  }

  for (const b of brokenCheckpoints) {
    b.finding.repair =
      table === null || firstBroken !== null
        ? 'restore it from a backup: the log cannot be read without it'
        : `delete ${b.name}${b.last ? ` and ${LOG_DIR}/${LAST_CHECKPOINT}` : ''}: readers then build the ` +
          'table from an older checkpoint or the commits, which are all there (otelake also writes a new ' +
          'checkpoint when it opens the table to write into it)';
  }

  if (firstBroken !== null) {
    const orphans = await unreferencedFiles(dir, named);
    const fix =
      firstBroken === newest
        ? `restore it from a backup; without one, move ${LOG_DIR}/${commitFileName(newest)} out of the table folder: ` +
          `the table then ends at version ${newest - 1}, without what this commit added`
        : `restore the commit from a backup; without one, move commits ${firstBroken} to ${newest} out of ` +
          `${LOG_DIR}: the table then ends at version ${firstBroken - 1}, without what they added`;
    const kept =
      orphans.length === 0
        ? ''
        : `. Data files no readable commit names, which may hold those rows (copy them elsewhere before ` +
          `the day is sealed: sealing deletes unreferenced files): ${orphans.join(', ')}`;
    for (const f of report.findings) if (f.repair === COMMIT_REPAIR) f.repair = fix + kept;
  }

  if (table) {
    report.version = table.version;
    report.files = table.files.length;
    report.rows = table.files.reduce((n, f) => n + Math.max(0, f.numRecords), 0);
    let problems = await dataFileProblems(table);
    if (problems.size > 0) {
      // A file compacted away and vacuumed while we looked is not damage: look again at the log.
      const again = await DeltaTable.open(dir).catch(() => table!);
      const live = new Set(again.files.map((f) => f.path));
      problems = new Map([...problems].filter(([path]) => live.has(path)));
    }
    for (const problem of problems.values()) damaged(problem, FIX_DATA_FILE);
  }
  return report;
}
