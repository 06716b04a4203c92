/**
 * The tablet's clock (meta/tablet.ts, tabletTime; DESIGN.md, "Metadata store"): the timestamps a tablet
 * server gives ingested entries, and the `nowMs` of compactions, never go back when the tablet moves to a
 * server whose clock is behind, and a batch ingested after another (a delete, an overwrite) always wins.
 */
import { describe, expect, it } from 'vitest';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { COL_TIME, parseTablet, type TabletMeta } from '../../src/meta/tablet.js';
import type { PlannedJob } from '../../src/queue/planner.js';
import { HostedTablet } from '../../src/tserver/hosted-tablet.js';
import { decideReserve } from '../../src/tserver/reserve-rules.js';
import { decideCommit } from '../../src/tserver/rules.js';

const ROW = '0001<';
const ME = { server: 'ts:1', session: '0123456789abcdef' };
const COMPACTOR = '/exc/compactors/q001/_c_x-c-0000000001';
const CONFIG = tableConfigSchema.parse({ versions: 1, ttlMs: 60_000 });

function tablet(time?: number): TabletMeta {
  const cols = new Map([['prev', 'null']]);
  if (time !== undefined) cols.set(COL_TIME, String(time));
  const meta = parseTablet(ROW, cols);
  for (const f of ['a', 'b']) meta.files.set(f, { size: 100, entries: 10 });
  return meta;
}

describe('tablet time', () => {
  it('ingest - every batch is stamped after the one before, even within a millisecond or with the clock behind', () => {
    const t = new HostedTablet(tablet(), ME);
    expect(t.nextTimestamp(1_000)).toBe(1_000);
    // Same millisecond, or a clock that stepped back: after the batch before, never at it (a delete
    // there would hide this one; a put there would tie with it and might win).
    expect(t.nextTimestamp(1_000)).toBe(1_001);
    expect(t.nextTimestamp(990)).toBe(1_002);
    // The wall clock ahead again: it is followed.
    expect(t.nextTimestamp(1_500)).toBe(1_500);
  });

  it("ingest - a tablet's new host, its clock behind, stamps after everything the last host gave", () => {
    // The last host stamped up to 5,000 and wrote it as the tablet's time.
    const t = new HostedTablet(tablet(5_000), ME);
    expect(t.nextTimestamp(4_000)).toBe(5_001);
    expect(t.nextTimestamp(4_000)).toBe(5_002);
    expect(t.nextTimestamp(6_000)).toBe(6_000);
  });

  it("compaction - runs at the tablet's time when the server's clock is behind, and its commit moves the time up", () => {
    const meta = tablet(9_000);
    const job: PlannedJob = {
      kind: 'system',
      files: ['a', 'b'],
      inputBytes: 200,
      queue: 'small',
      priority: 5,
      allFiles: true,
    };
    const d = decideReserve(
      meta,
      { tablet: ROW, queueId: 'q001', compactor: COMPACTOR },
      {
        jobs: [job],
        config: CONFIG,
        queueIdOf: () => 'q001',
        ecid: 'E1',
        output: 'tables/0001/CE1.rf',
        now: 8_000,
        mayDropDeletes: true,
      },
    );
    if (d.kind !== 'reserve') throw new Error(d.kind);
    expect(d.reservation.settings.nowMs).toBe(9_000);
    d.change.apply(meta);

    // A compaction reserved where the clock was ahead (12,000) commits: a later scan or compaction must
    // not age off less, on any server.
    const r = { ...meta.reservations.get('E1')!, settings: { ...d.reservation.settings, nowMs: 12_000 } };
    meta.reservations.set('E1', r);
    const change = decideCommit(
      meta,
      r,
      { tablet: ROW, ecid: 'E1', compactor: COMPACTOR, output: { size: 10, entries: 1 } },
      { now: 8_500, server: 'ts:1' },
    );
    expect(change.puts).toContainEqual({ row: ROW, col: COL_TIME, value: '12000' });
    change.apply(meta);
    expect(meta.time).toBe(12_000);
    expect(new HostedTablet(meta, ME).nextTimestamp(8_600)).toBe(12_001);
  });
});
