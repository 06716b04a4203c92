/**
 * A checkpointed output on a store that writes parts (S3) is composed from them after the merge: every
 * part read back and written as one object. The merge's figures stand still meanwhile, and the tablet
 * server cancels a job whose figures stand still for the stall timeout (tserver/progress-rules.ts); the
 * compose must keep reporting figures that move, or a large job is cancelled at its very end, every
 * attempt, its checkpoint dropped with it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  compactFiles,
  makeEntry,
  MemoryObjectStore,
  writeRFile,
  type CompactionProgress,
} from '../../src/storage/index.js';
import type { StreamOptions } from '../../src/storage/object-store.js';
import { progressMoved } from '../../src/tserver/progress-rules.js';

/** A store whose parts are slow to read back, as a large part from S3 is. */
class SlowPartsStore extends MemoryObjectStore {
  override async *readStream(name: string, options: StreamOptions = {}): AsyncGenerator<Buffer> {
    if (/\.part\d+$/.test(name)) await sleep(150);
    yield* super.readStream(name, options);
  }
}

describe('composing an output from its parts', () => {
  it('reports progress that moves while it composes, so the stall detector leaves the job alone', async () => {
    const store = new SlowPartsStore();
    const entries = Array.from({ length: 4_000 }, (_, i) =>
      makeEntry(`row${String(i).padStart(8, '0')}`, 'cf', 'cq', 1, `value-${i}`.repeat(8)),
    );
    await writeRFile(store, 'in/a.rf', entries, { blockSize: 1024 });

    const reports: { at: number; p: CompactionProgress }[] = [];
    const started = Date.now();
    const result = await compactFiles({
      store,
      inputs: ['in/a.rf'],
      output: 'out/c.rf',
      settings: { versions: 1, nowMs: 1_000, filters: [], dropDeletes: true },
      blockSize: 1024,
      compression: 'none',
      // Small parts, so that there are many to read back: the compose takes about 150 ms a part.
      checkpoints: { everyBytes: 16 * 1024, everyMs: 60_000 },
      progressEveryMs: 50,
      onProgress: (p) => reports.push({ at: Date.now(), p: { ...p } }),
    });
    const ended = Date.now();
    expect(result.parts.length).toBeGreaterThanOrEqual(10);
    expect(result.entriesWritten).toBe(entries.length);

    // What the stall detector sees: the longest time without a report that moved (from the start).
    let seen: CompactionProgress | undefined;
    let lastMoved = started;
    let longest = 0;
    for (const r of reports) {
      if (!progressMoved(seen, r.p)) continue;
      longest = Math.max(longest, r.at - lastMoved);
      lastMoved = r.at;
      seen = r.p;
    }
    longest = Math.max(longest, ended - lastMoved);
    // The compose alone took parts × 150 ms; reports that move came at least every few hundred ms.
    expect(result.parts.length * 150).toBeGreaterThan(1_400);
    expect(longest).toBeLessThan(1_000);
    expect(result.bytesComposed).toBe(result.output!.size);
  });
});
