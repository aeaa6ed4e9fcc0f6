// `otelake check` as a user runs it: a sound instance passes (exit 0); a truncated commit, a
// missing data file, a data file cut short and an unreadable checkpoint are each named with a
// repair (exit 1); the repairs it gives for the commit and the checkpoint make those tables sound.

import assert from 'node:assert/strict';
import { rename, rm, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { LAST_CHECKPOINT, LOG_DIR } from '../../src/delta/actions.ts';
import { closeDeltaWorkers, DeltaTable } from '../../src/delta/table.ts';
import { InstanceLayout } from '../../src/storage/layout.ts';
import {
  corruptNewestCheckpoint,
  days,
  moveDataFileAway,
  truncateNewestCommit,
  writeInstance,
} from '../fixtures/damage.ts';
import { otelake, tempDir } from './helpers.ts';

after(() => closeDeltaWorkers());

test('otelake check: sound tables pass; each kind of damage is named with its repair', async () => {
  const tmp = await tempDir('check');
  try {
    await writeInstance(tmp.path, 'c');
    const layout = new InstanceLayout(tmp.path, 'c');
    const { today, yesterday } = days();
    const args = ['check', '-D', tmp.path, '-I', 'c'];

    const sound = await otelake(args);
    assert.equal(sound.code, 0, sound.stderr);
    assert.match(sound.stdout, /12 tables checked in instance 'c': 0 damaged, 0 warnings/);
    assert.match(sound.stdout, new RegExp(`ok +${today} logs +version 3, 3 files, 15 rows`));

    const commit = await truncateNewestCommit(layout.tableDir(today, 'logs'));
    await moveDataFileAway(layout.tableDir(yesterday, 'spans'));
    const checkpoint = await corruptNewestCheckpoint(layout.tableDir(yesterday, 'logs'));
    const spansToday = await DeltaTable.open(layout.tableDir(today, 'spans'));
    const cut = spansToday.liveFilePaths()[0]!;
    await truncate(cut, 100);

    const broken = await otelake(args);
    assert.equal(broken.code, 1);
    assert.match(broken.stderr, /4 damaged tables: see the repairs above/);
    const out = broken.stdout;
    assert.match(out, /4 damaged, 0 warnings/);
    assert.match(out, new RegExp(`DAMAGED ${today} logs +no snapshot`));
    assert.match(out, /commit _delta_log\/00000000000000000003\.json is unreadable: corrupt Delta commit 3/);
    assert.match(
      out,
      /move _delta_log\/00000000000000000003\.json out of the table folder: the table then ends at version 2/,
    );
    assert.match(out, /Data files no readable commit names, which may hold those rows.*part-/);
    assert.match(out, new RegExp(`DAMAGED ${yesterday} spans +version 3, 3 files, 15 rows`));
    assert.match(out, /data file part-\S+ \(5 rows\) is missing/);
    assert.match(out, /repair: restore it from a backup .*DeltaTable\('<table folder>'\)\.repair\(\)/);
    assert.match(out, /data file part-\S+ is unreadable: not a Parquet file/);
    assert.match(out, /checkpoint _delta_log\/00000000000000000002\.checkpoint\.parquet is unreadable/);
    assert.match(
      out,
      /delete _delta_log\/00000000000000000002\.checkpoint\.parquet and _delta_log\/_last_checkpoint/,
    );

    // The repairs given for the commit and the checkpoint.
    await rename(commit, join(tmp.path, 'commit-3.json'));
    await rm(checkpoint);
    await rm(join(layout.tableDir(yesterday, 'logs'), LOG_DIR, LAST_CHECKPOINT));
    const repaired = await otelake(args);
    assert.equal(repaired.code, 1, 'the two data files are still damaged');
    assert.match(repaired.stdout, /2 damaged, 0 warnings/);
    assert.match(repaired.stdout, new RegExp(`ok +${today} logs +version 2, 2 files, 10 rows`));
    assert.match(repaired.stdout, new RegExp(`ok +${yesterday} logs +version 3, 3 files, 15 rows`));
  } finally {
    await tmp.remove();
  }
});

test('otelake check on a missing instance is an error naming it', async () => {
  const tmp = await tempDir('check-none');
  try {
    const r = await otelake(['check', '-D', tmp.path, '-I', 'nope']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no instance 'nope'/);
  } finally {
    await tmp.remove();
  }
});
