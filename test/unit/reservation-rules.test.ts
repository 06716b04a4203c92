/**
 * The rules of a reservation's life (src/tserver/rules.ts), alone: a request and a tablet in, the
 * conditional change and the decision out. The protocol with real processes is test/tserver.
 */
import { describe, expect, it } from 'vitest';
import { ExcError } from '../../src/errors.js';
import { DONE_PREFIX, parseOutcome } from '../../src/meta/outcomes.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { parseTablet, type Reservation, type TabletMeta } from '../../src/meta/tablet.js';
import type { PlannedJob } from '../../src/queue/planner.js';
import { failureKey, isParked } from '../../src/meta/tablet.js';
import {
  cancelHappened,
  commitHappened,
  decideCancel,
  decideCommit,
  ownedReservation,
} from '../../src/tserver/rules.js';
import { decideReserve, reservedJob } from '../../src/tserver/reserve-rules.js';
import { progressMoved } from '../../src/tserver/progress-rules.js';

const ROW = '0001<';
const CONFIG = tableConfigSchema.parse({ versions: 2 });
const COMPACTOR = '/exc/compactors/q001/_c_x-c-0000000001';

function tablet(files: string[], extra: Partial<TabletMeta> = {}): TabletMeta {
  const meta = parseTablet(ROW, new Map([['prev', 'null']]));
  for (const f of files) meta.files.set(f, { size: 100, entries: 10 });
  return Object.assign(meta, extra);
}

const job = (files: string[], extra: Partial<PlannedJob> = {}): PlannedJob => ({
  kind: 'system',
  files,
  inputBytes: files.length * 100,
  queue: 'small',
  priority: 5,
  allFiles: false,
  ...extra,
});

const reserveCtx = (jobs: PlannedJob[]) => ({
  jobs,
  config: CONFIG,
  queueIdOf: (name: string) => (name === 'small' ? 'q001' : undefined),
  ecid: '01J0000000000000000000000A',
  output: 'tables/0001/Cout.rf',
  now: 5_000,
  mayDropDeletes: true,
});

function reservation(inputs: string[], extra: Partial<Reservation> = {}): Reservation {
  return {
    compactor: COMPACTOR,
    queueId: 'q001',
    inputs,
    output: 'tables/0001/Cout.rf',
    kind: 'system',
    attempt: 0,
    reservedAt: 1_000,
    allFiles: false,
    settings: { versions: 1, nowMs: 1_000, filters: [], dropDeletes: false },
    ...extra,
  };
}

describe('reservation rules', () => {
  it('reserve - the first job for the compactor queue, conditional on its inputs, late-bound settings', () => {
    const meta = tablet(['a', 'b', 'c']);
    meta.failures.set(failureKey(['a', 'b']), {
      inputs: ['a', 'b'],
      attempts: 2,
      lastError: 'x',
      at: 1,
      parked: false,
    });
    const d = decideReserve(
      meta,
      { tablet: ROW, queueId: 'q001', compactor: COMPACTOR },
      reserveCtx([job(['z'], { queue: 'large' }), job(['a', 'b'])]),
    );
    expect(d.kind).toBe('reserve');
    if (d.kind !== 'reserve') return;
    expect(d.reservation).toMatchObject({
      inputs: ['a', 'b'],
      attempt: 2,
      reservedAt: 5_000,
      allFiles: false,
    });
    expect(d.reservation.settings).toMatchObject({ versions: 2, nowMs: 5_000, dropDeletes: false });
    // The table's codec, fixed with the settings and handed to the compactor with the job.
    expect(d.reservation.compression).toBe('zstd');
    expect(reservedJob(meta, d.ecid, d.reservation).compression).toBe('zstd');
    const lz4 = decideReserve(
      meta,
      { tablet: ROW, queueId: 'q001', compactor: COMPACTOR },
      { ...reserveCtx([job(['a', 'b'])]), config: tableConfigSchema.parse({ compression: 'lz4' }) },
    );
    expect(lz4.kind === 'reserve' && reservedJob(meta, lz4.ecid, lz4.reservation).compression).toBe('lz4');
    expect(d.change.conditions).toEqual([
      { op: 'present', row: ROW, col: 'file:a' },
      { op: 'present', row: ROW, col: 'file:b' },
    ]);
    d.change.apply(meta);
    expect(meta.reservations.get(d.ecid)).toBe(d.reservation);
  });

  it('reserve - a job of all the files keeps its deletes while a batch stamped before one may be in flight', () => {
    const meta = tablet(['a', 'b']);
    const all = [job(['a', 'b'], { allFiles: true })];
    const req = { tablet: ROW, queueId: 'q001', compactor: COMPACTOR };
    const drops = decideReserve(meta, req, reserveCtx(all));
    expect(drops.kind === 'reserve' && drops.reservation.settings.dropDeletes).toBe(true);
    const keeps = decideReserve(meta, req, { ...reserveCtx(all), mayDropDeletes: false });
    if (keeps.kind !== 'reserve') throw new Error(keeps.kind);
    // Still a job of all the files (resume matching says so), whose markers are kept.
    expect(keeps.reservation).toMatchObject({ allFiles: true, settings: { dropDeletes: false } });
    expect(reservedJob(meta, keeps.ecid, keeps.reservation).keepDeletes).toBe(true);
  });

  it('reserve - a repeated request gets the reservation it made; no job for the queue is no work', () => {
    const meta = tablet(['a', 'b']);
    meta.reservations.set('E1', reservation(['a'], { requestId: 'R1' }));
    const req = { tablet: ROW, queueId: 'q001', compactor: COMPACTOR, requestId: 'R1' };
    expect(decideReserve(meta, req, reserveCtx([job(['b'])]))).toMatchObject({ kind: 'repeat', ecid: 'E1' });
    // The same request id from another compactor is not a repeat.
    expect(decideReserve(meta, { ...req, compactor: `${COMPACTOR}9` }, reserveCtx([job(['b'])])).kind).toBe(
      'reserve',
    );
    expect(
      decideReserve(meta, { ...req, requestId: 'R2' }, reserveCtx([job(['b'], { queue: 'large' })])),
    ).toEqual({
      kind: 'no-work',
    });
  });

  it('commit - replaces the inputs by the output, ends the reservation once, drops moot failures', () => {
    const meta = tablet(['a', 'b', 'c']);
    const r = reservation(['a', 'b'], { kind: 'user', userCompactionIds: ['U1', 'U2'] });
    meta.reservations.set('E1', r);
    meta.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    meta.userCompactions.set('U2', { requestedAt: 2, filters: [] });
    meta.selection = { ids: ['U1', 'U2'], files: ['a', 'b'], filters: [] };
    meta.failures.set('K', { inputs: ['b'], attempts: 1, lastError: 'x', at: 1, parked: false });
    const req = { tablet: ROW, ecid: 'E1', compactor: COMPACTOR, output: { size: 150, entries: 15 } };
    const change = decideCommit(meta, r, req, { now: 9_000, server: 'ts:1' });
    expect(change.conditions).toEqual([
      { op: 'present', row: ROW, col: 'ecomp:E1' },
      { op: 'absent', row: `${DONE_PREFIX}E1`, col: 'outcome' },
      { op: 'present', row: ROW, col: 'file:a' },
      { op: 'present', row: ROW, col: 'file:b' },
      // The user compactions it satisfies: a cancel the tablet server has not heard of fails the commit.
      { op: 'present', row: ROW, col: 'compact:U1' },
      { op: 'present', row: ROW, col: 'compact:U2' },
    ]);
    const outcome = change.puts.find((p) => p.row === `${DONE_PREFIX}E1`)!;
    expect(parseOutcome(outcome.value)).toMatchObject({
      outcome: 'committed',
      entries: 15,
      inputBytes: 200,
      outputBytes: 150,
      userCompactionIds: ['U1', 'U2'],
      at: 9_000,
      server: 'ts:1',
    });
    expect(change.puts.filter((p) => p.row.startsWith('~del:')).map((p) => p.row)).toEqual([
      '~del:a',
      '~del:b',
    ]);
    expect(commitHappened(meta, r, 'E1', req.output)).toBe(false);
    change.apply(meta);
    expect([...meta.files.keys()].sort()).toEqual(['c', 'tables/0001/Cout.rf']);
    expect(meta.reservations.size).toBe(0);
    expect(meta.failures.size).toBe(0);
    expect(meta.userCompactions.size).toBe(0);
    expect(meta.selection).toBeUndefined();
    expect(commitHappened(meta, r, 'E1', req.output)).toBe(true);
  });

  it('commit - a system job started before a user selection leaves its output in the selection; others leave it alone', () => {
    const meta = tablet(['a', 'b', 'c', 'd']);
    meta.selection = { ids: ['U1'], files: ['a', 'b', 'c'], filters: [] };
    const before = reservation(['a', 'b']);
    const req = { tablet: ROW, ecid: 'E1', compactor: COMPACTOR, output: { size: 150, entries: 15 } };
    const change = decideCommit(meta, before, req, { now: 9_000, server: 'ts:1' });
    expect(change.puts).toContainEqual({
      row: ROW,
      col: 'selected',
      value: JSON.stringify({ ids: ['U1'], files: ['c', 'tables/0001/Cout.rf'], filters: [] }),
    });
    const outside = decideCommit(
      meta,
      reservation(['d']),
      { ...req, output: null },
      { now: 1, server: 'ts:1' },
    );
    expect([...outside.puts, ...outside.deletes].some((c) => c.col === 'selected')).toBe(false);
  });

  it('reserve - a user job writes the selection it runs, with its requests and filters', () => {
    const meta = tablet(['a', 'b']);
    const filters = [{ name: 'dropRowPrefix', options: { prefixes: ['x'] } }];
    const decision = decideReserve(
      meta,
      { tablet: ROW, queueId: 'q001', compactor: COMPACTOR },
      reserveCtx([
        job(['b', 'a'], { kind: 'user', userCompactionIds: ['U1', 'U2'], filters, allFiles: true }),
      ]),
    );
    if (decision.kind !== 'reserve') throw new Error(decision.kind);
    expect(decision.reservation).toMatchObject({ kind: 'user', userCompactionIds: ['U1', 'U2'] });
    expect(decision.reservation.settings).toMatchObject({ filters, dropDeletes: true });
    expect(decision.change.puts).toContainEqual({
      row: ROW,
      col: 'selected',
      value: JSON.stringify({ ids: ['U1', 'U2'], files: ['a', 'b'], filters }),
    });
  });

  it('commit - only the compactor holding a reservation may act on it', () => {
    const meta = tablet(['a']);
    meta.reservations.set('E1', reservation(['a']));
    expect(ownedReservation(meta, 'E1', COMPACTOR).inputs).toEqual(['a']);
    for (const [ecid, who] of [
      ['E1', `${COMPACTOR}9`],
      ['E2', COMPACTOR],
    ] as const) {
      const err = (() => {
        try {
          ownedReservation(meta, ecid, who);
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(ExcError);
      expect((err as ExcError).code).toBe('RESERVATION_GONE');
    }
  });

  it('cancel - failures on one compactor of several never park a job; a second compactor, or a lone one, does', () => {
    const sick = COMPACTOR;
    const healthy = `${COMPACTOR}9`;
    const ctx = { now: 7_000, server: 'ts:1', maxAttempts: 3, queueExists: true, queueCompactors: 2 };
    const failOn = (meta: TabletMeta, compactor: string, count = ctx.queueCompactors) => {
      const attempt = meta.failures.get(failureKey(['a', 'b']))?.attempts ?? 0;
      meta.reservations.set('E1', reservation(['a', 'b'], { compactor, attempt }));
      const d = decideCancel(meta, 'E1', 'failed', { ...ctx, queueCompactors: count });
      if (d.kind !== 'cancel') throw new Error('not cancelled');
      d.change.apply(meta);
      return d.failure!;
    };
    // Five failures, all on the sick one of two compactors: past maxAttempts, not parked.
    const meta = tablet(['a', 'b']);
    for (let i = 0; i < 5; i++) failOn(meta, sick);
    const f = meta.failures.get(failureKey(['a', 'b']))!;
    expect(f).toMatchObject({ attempts: 5, parked: false, failedOn: [sick], lone: false });
    expect(isParked(f, 3)).toBe(false);
    // A failure on the other one too: the job is at fault.
    expect(failOn(meta, healthy)).toMatchObject({ attempts: 6, parked: true, failedOn: [sick, healthy] });
    // With one compactor in the queue the attempts alone decide.
    const alone = tablet(['a', 'b']);
    for (let i = 0; i < 2; i++) expect(failOn(alone, sick, 1).parked).toBe(false);
    expect(failOn(alone, sick, 1)).toMatchObject({ attempts: 3, parked: true, lone: true });
    // A record that does not name its compactors (written before they were) parks by attempts.
    expect(isParked({ inputs: ['a'], attempts: 3, lastError: 'x', at: 1, parked: false }, 3)).toBe(true);
  });

  it('cancel - a failure is counted against the inputs and parks the job at maxAttempts; a release is not', () => {
    const meta = tablet(['a', 'b']);
    meta.reservations.set('E1', reservation(['a', 'b'], { attempt: 2 }));
    const ctx = { now: 7_000, server: 'ts:1', maxAttempts: 3, queueExists: true, error: 'disk on fire' };
    const failed = decideCancel(meta, 'E1', 'failed', ctx);
    expect(failed.kind).toBe('cancel');
    if (failed.kind !== 'cancel') return;
    expect(failed.failure).toMatchObject({
      attempts: 3,
      parked: true,
      lastError: 'disk on fire',
      lastEcid: 'E1',
    });
    expect(failed.change.conditions).toEqual([
      { op: 'present', row: ROW, col: 'ecomp:E1' },
      { op: 'absent', row: `${DONE_PREFIX}E1`, col: 'outcome' },
    ]);
    const outcome = parseOutcome(failed.change.puts.find((p) => p.row === `${DONE_PREFIX}E1`)!.value);
    expect(outcome).toMatchObject({ outcome: 'cancelled', reason: 'failed', error: 'disk on fire' });
    expect(failed.change.puts.some((p) => p.row === '~del:tables/0001/Cout.rf')).toBe(true);

    const released = decideCancel(meta, 'E1', 'released', ctx);
    expect(released.kind === 'cancel' && released.failure).toBeUndefined();
    expect(cancelHappened(meta, 'E1')).toBe(false);
    failed.change.apply(meta);
    expect(cancelHappened(meta, 'E1')).toBe(true);
    expect(meta.failures.get(failureKey(['a', 'b']))?.attempts).toBe(3);
    expect(decideCancel(meta, 'E1', 'admin', ctx)).toEqual({ kind: 'none' });
  });

  it('cancel - a compactor that vanished with its deleted queue did not fail', () => {
    const meta = tablet(['a']);
    meta.reservations.set('E1', reservation(['a']));
    const ctx = { now: 7_000, server: 'ts:1', maxAttempts: 3 };
    const gone = decideCancel(meta, 'E1', 'compactor-gone', { ...ctx, queueExists: true });
    expect(gone.kind === 'cancel' && gone.failure?.attempts).toBe(1);
    const deleted = decideCancel(meta, 'E1', 'compactor-gone', { ...ctx, queueExists: false });
    expect(deleted).toMatchObject({ kind: 'cancel', reason: 'queue-deleted' });
    expect(deleted.kind === 'cancel' && deleted.failure).toBeUndefined();
  });

  it('progress - only figures that moved count; written figures count too', () => {
    const at = { entriesRead: 10, bytesRead: 100, entriesWritten: 5, bytesWritten: 50 };
    expect(progressMoved(undefined, at)).toBe(true);
    expect(progressMoved(at, { ...at })).toBe(false);
    expect(progressMoved(at, { ...at, bytesWritten: 51 })).toBe(true);
    // Composing the output from its parts after the merge moves too.
    expect(progressMoved({ ...at, bytesComposed: 5 }, { ...at, bytesComposed: 6 })).toBe(true);
    expect(progressMoved({ ...at, bytesComposed: 5 }, { ...at, bytesComposed: 5 })).toBe(false);
    expect(progressMoved(at, { ...at, entriesRead: 11 })).toBe(true);
  });
});
