/**
 * Resume benchmark (issue 17, part 4): a compaction killed at 90% of its output and resumed from its last
 * checkpoint, against the same compaction run once without interruption — total CPU and wall time, and
 * what starting over would have cost. Also the cost of checkpointing while nothing fails. Every run
 * writes the same bytes (checked). Local store, one process, one thread per compaction.
 *
 *   npx tsx bench/resume.ts [--files 8] [--entries 100000] [--value-bytes 100] [--compression zstd]
 *                           [--kill-at 0.9] [--checkpoints 20] [--rounds 2] [--json] [--keep]
 *                           [--split 4] [--machines 8]
 *
 * The figure is for 2 GB of input (`--files 10 --entries 2000000`); the default is ~80 MB so that
 * a run takes seconds on a shared machine. `--checkpoints` is how many checkpoints the output gets (the
 * checkpoint interval is the expected output size divided by it): the work lost to a kill is at most one
 * interval.
 *
 * Then the split figures (bench/split-measure.ts): the same job split into `--split` sub-jobs run at once
 * on worker threads, against the whole job on one, and on paper for `--machines` machines (0: skipped).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  compactFiles,
  COMPRESSIONS,
  DEFAULT_COMPRESSION,
  isCompression,
  LocalObjectStore,
  type Checkpoint,
  type CompactFilesArgs,
  type ObjectStore,
} from '../src/storage/index.js';
import { fileName, writeDataSet } from './merge-data.js';
import { bestWithCpu, MB } from './merge-measure.js';
import { measureSplit } from './split-measure.js';

const { values: flags } = parseArgs({
  options: {
    files: { type: 'string', default: '8' },
    entries: { type: 'string', default: '100000' },
    'value-bytes': { type: 'string', default: '100' },
    compression: { type: 'string', default: DEFAULT_COMPRESSION },
    'kill-at': { type: 'string', default: '0.9' },
    checkpoints: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    split: { type: 'string', default: '4' },
    machines: { type: 'string', default: '8' },
  },
});

function positive(name: string, value: string | undefined, int = true): number {
  const n = Number(value);
  if (!(n > 0) || (int && !Number.isSafeInteger(n))) throw new Error(`--${name}: got ${value}`);
  return n;
}

if (!isCompression(flags.compression)) throw new Error(`--compression ${COMPRESSIONS.join('|')}`);
const spec = {
  files: positive('files', flags.files),
  entries: positive('entries', flags.entries),
  valueBytes: positive('value-bytes', flags['value-bytes']),
  compression: flags.compression,
};
const killAt = positive('kill-at', flags['kill-at'], false);
if (killAt >= 1) throw new Error('--kill-at must be below 1');
const checkpoints = positive('checkpoints', flags.checkpoints);
const rounds = positive('rounds', flags.rounds);

/** How long the untimed warm-up compaction runs. */
const WARM_UP_MS = 4_000;

const dir = mkdtempSync(join(tmpdir(), 'exc-bench-resume-'));
const store = new LocalObjectStore(dir);
const log = (msg: string): void => {
  if (!flags.json) console.error(msg);
};

try {
  log(`writing ${spec.files} files of ${spec.entries} entries (${spec.compression})…`);
  const inputs = await writeDataSet(store, spec);
  const inputBytes = inputs.reduce((n, f) => n + f.size, 0);
  const args: Omit<CompactFilesArgs, 'output'> = {
    store,
    inputs: inputs.map((_, f) => fileName(f)),
    settings: { versions: 1, nowMs: 0, filters: [], dropDeletes: true },
    compression: spec.compression,
  };

  // A compaction of the whole job stopped after a few seconds, untimed: V8 compiles the merge and the
  // writer well only after about a second of running them, which a compactor's threads have long done.
  log('warming up…');
  const warm = new AbortController();
  const stop = setTimeout(() => warm.abort(new Error('warmed up')), WARM_UP_MS);
  await compactFiles({ ...args, output: 'out/warm.rf', signal: warm.signal }).catch((err: unknown) => {
    if (!warm.signal.aborted) throw err;
  });
  clearTimeout(stop);

  // The four runs alternate, round after round, so that all meet the same moments of a shared machine;
  // each figure is the best of its rounds.
  let outputBytes = 0;
  let everyBytes = 0;
  let n = 0;
  let kept: Checkpoint | undefined;
  let plain = { ms: Infinity, cpuMs: Infinity };
  let checkpointed = { ms: Infinity, cpuMs: Infinity };
  let killed = { ms: Infinity, cpuMs: Infinity };
  let resumed = { ms: Infinity, cpuMs: Infinity };
  const faster = <T extends { ms: number }>(a: T, b: T): T => (b.ms < a.ms ? b : a);
  for (let r = 0; r < rounds; r++) {
    log(`uninterrupted (round ${r + 1} of ${rounds})…`);
    plain = faster(
      plain,
      await bestWithCpu(1, async () => {
        outputBytes = (await compactFiles({ ...args, output: 'out/plain.rf' })).output!.size;
      }),
    );
    everyBytes ||= Math.max(64 * 1024, Math.floor(outputBytes / checkpoints));
    log('uninterrupted, checkpointed…');
    checkpointed = faster(
      checkpointed,
      await bestWithCpu(1, () =>
        compactFiles({
          ...args,
          output: 'out/checkpointed.rf',
          checkpoints: { everyBytes, everyMs: 3_600_000 },
        }),
      ),
    );
    log(`killed at ${killAt * 100}% and resumed…`);
    kept = undefined;
    killed = faster(
      killed,
      await bestWithCpu(1, async () => {
        const abort = new AbortController();
        await compactFiles({
          ...args,
          output: `out/killed-${n++}.rf`,
          signal: abort.signal,
          checkpoints: {
            everyBytes,
            everyMs: 3_600_000,
            onCheckpoint: (cp) => {
              kept = cp;
              // The kill lands at `killAt` of the output: everything since the last checkpoint is lost.
              if (cp.bytes + everyBytes > killAt * outputBytes) abort.abort(new Error('killed'));
            },
          },
        }).catch((err: unknown) => {
          if (!abort.signal.aborted) throw err;
        });
      }),
    );
    if (!kept) throw new Error('no checkpoint before the kill: use more --entries or --checkpoints');
    const from: Checkpoint = kept;
    resumed = faster(
      resumed,
      await bestWithCpu(1, () =>
        compactFiles({
          ...args,
          output: 'out/resumed.rf',
          resume: from,
          checkpoints: { everyBytes, everyMs: 3_600_000 },
        }),
      ),
    );
  }
  const checkpoint: Checkpoint = kept!;
  const same =
    (await bytes(store, 'out/plain.rf')).equals(await bytes(store, 'out/resumed.rf')) &&
    (await bytes(store, 'out/plain.rf')).equals(await bytes(store, 'out/checkpointed.rf'));
  if (!same) throw new Error('the resumed output differs from the uninterrupted one');

  const ratio = (a: number, b: number): number => Math.round((a / b) * 1000) / 1000;
  const report = {
    inputMB: Math.round(inputBytes / MB),
    outputMB: Math.round(outputBytes / MB),
    compression: spec.compression,
    checkpointMB: Math.round((everyBytes / MB) * 100) / 100,
    killedAtFraction: Math.round((checkpoint.bytes / outputBytes) * 1000) / 1000,
    uninterrupted: { wallMs: Math.round(plain.ms), cpuMs: Math.round(plain.cpuMs) },
    checkpointed: { wallMs: Math.round(checkpointed.ms), cpuMs: Math.round(checkpointed.cpuMs) },
    killed: { wallMs: Math.round(killed.ms), cpuMs: Math.round(killed.cpuMs) },
    resumed: { wallMs: Math.round(resumed.ms), cpuMs: Math.round(resumed.cpuMs) },
    // Killed then resumed, against one uninterrupted run (target: <= 1.15).
    resumeWallRatio: ratio(killed.ms + resumed.ms, plain.ms),
    resumeCpuRatio: ratio(killed.cpuMs + resumed.cpuMs, plain.cpuMs),
    // Killed then started over, for comparison (what excompact did before).
    startOverWallRatio: ratio(killed.ms + plain.ms, plain.ms),
    startOverCpuRatio: ratio(killed.cpuMs + plain.cpuMs, plain.cpuMs),
    // Checkpointing while nothing fails (target: <= 1.03).
    checkpointWallRatio: ratio(checkpointed.ms, plain.ms),
    checkpointCpuRatio: ratio(checkpointed.cpuMs, plain.cpuMs),
    sameBytes: same,
    split:
      flags.split === '0'
        ? undefined
        : await measureSplit(dir, args, {
            parts: positive('split', flags.split),
            machines: positive('machines', flags.machines),
            rounds,
            log,
          }),
  };
  if (flags.json) console.log(JSON.stringify(report));
  else console.log(report);
} finally {
  await store.close();
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
}

async function bytes(s: ObjectStore, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s.readStream(name)) chunks.push(c);
  return Buffer.concat(chunks);
}
