import { describe, expect, it } from 'vitest';
import { checkCluster, MAX_ITEMS, type CheckInput } from '../../src/manager/check.js';
import { queueRow, tabletRow } from '../../src/meta/keys.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { parseTablet, type TabletMeta } from '../../src/meta/tablet.js';
import { failureKey } from '../../src/meta/tablet.js';
import type { PlannedJob } from '../../src/queue/planner.js';
import { userStep } from '../../src/queue/selection.js';
import { tabletDemand } from '../../src/queue/tablet-plan.js';
import { decideCancel, decideCommit } from '../../src/tserver/rules.js';
import { decideReserve } from '../../src/tserver/reserve-rules.js';

const NOW = 10_000_000;
const GRACE = 600_000;
const SMALL = { name: 'small', id: '00q1', bins: 1 };
const LARGE = { name: 'large', id: '00q2', bins: 1 };
const COMPACTOR = '/exc/compactors/00q1/c-0000000001';
const T1 = tabletRow('0001', Buffer.from('m'));
const T2 = tabletRow('0001', null);

interface TabletSpec {
  files?: Record<string, number>;
  hosted?: boolean;
  reservations?: Record<string, { compactor: string; inputs: string[]; output: string }>;
}

/** A tablet as its row would hold it, through the real row parser: T1 holds (-∞, m], T2 (m, +∞). */
function tablet(row: string, spec: TabletSpec): TabletMeta {
  const prev = row === T2 ? JSON.stringify(Buffer.from('m').toString('hex')) : 'null';
  const cols = new Map<string, string>([['prev', prev]]);
  for (const [name, size] of Object.entries(spec.files ?? {}))
    cols.set(`file:${name}`, JSON.stringify({ size, entries: 1 }));
  if (spec.hosted !== false)
    cols.set('loc', JSON.stringify({ server: '127.0.0.1:1', session: '0123456789abcdef' }));
  for (const [ecid, r] of Object.entries(spec.reservations ?? {})) {
    const settings = { versions: 1, nowMs: 0, filters: [], dropDeletes: false };
    const reservation = {
      ...r,
      queueId: SMALL.id,
      kind: 'system',
      attempt: 0,
      reservedAt: 5,
      allFiles: false,
    };
    cols.set(`ecomp:${ecid}`, JSON.stringify({ ...reservation, settings }));
  }
  return parseTablet(row, cols);
}

const entry = (row: string, queueId = SMALL.id) =>
  queueRow({ queueId, bin: 0, priority: 3, tableId: '0001', endRow: row === T2 ? null : Buffer.from('m') });

/** Objects as listed: every file written long ago unless given a time. */
const objects = (...names: (string | [string, number])[]) =>
  new Map(
    names.map((n) =>
      typeof n === 'string' ? [n, { size: 10, modifiedMs: 0 }] : [n[0], { size: 10, modifiedMs: n[1] }],
    ),
  );

/**
 * A consistent cluster: T1 has three equal files (work for `small`) and its entry, T2 one file (no work)
 * and a reservation of a live compactor over another file.
 */
function cleanInput(): CheckInput {
  return {
    now: NOW,
    graceMs: GRACE,
    tablets: [
      tablet(T1, { files: { a: 10, b: 10, c: 10 } }),
      tablet(T2, {
        files: { d: 10, e: 10 },
        reservations: { E1: { compactor: COMPACTOR, inputs: ['e'], output: 'out' } },
      }),
    ],
    queueEntries: [entry(T1)],
    deletions: new Map(),
    tableConfigs: new Map([['0001', tableConfigSchema.parse({ queues: [{ queue: 'small' }] })]]),
    queues: [LARGE, SMALL],
    liveCompactors: new Set([COMPACTOR]),
    objects: objects('a', 'b', 'c', 'd', 'e'),
    temporaries: [],
  };
}

describe('consistency check', () => {
  it('clean - a consistent snapshot is ok, every list empty, the figures counted', () => {
    const report = checkCluster(cleanInput());
    expect(report.ok).toBe(true);
    for (const [name, list] of Object.entries(report.problems)) expect([name, list.count]).toEqual([name, 0]);
    expect(report.figures).toMatchObject({
      tablets: 2,
      hostedTablets: 2,
      reservations: 1,
      queueEntries: 1,
      files: 6, // a..e and the reservation's output
      objects: 5,
      objectBytes: 50,
      temporaries: 0,
      liveCompactors: 1,
    });
    expect(report.note).toMatch(/second run/);
  });

  it('reservations - one naming a compactor whose node is gone is listed, and the check fails', () => {
    const report = checkCluster({ ...cleanInput(), liveCompactors: new Set() });
    expect(report.ok).toBe(false);
    expect(report.problems.deadCompactorReservations).toMatchObject({
      severity: 'error',
      count: 1,
      items: [{ tablet: T2, ecid: 'E1', compactor: COMPACTOR, queueId: SMALL.id }],
    });
  });

  it('reservations - a file in two jobs, or an input the tablet does not have, is critical (invariant 3)', () => {
    const input = cleanInput();
    expect(checkCluster(input).problems.sharedInputs.count).toBe(0);
    const report = checkCluster({
      ...input,
      tablets: [
        input.tablets[0]!,
        tablet(T2, {
          files: { d: 10, e: 10 },
          reservations: {
            E1: { compactor: COMPACTOR, inputs: ['e'], output: 'out' },
            E2: { compactor: COMPACTOR, inputs: ['d', 'e'], output: 'out2' },
            E3: { compactor: COMPACTOR, inputs: ['gone'], output: 'out3' },
          },
        }),
      ],
    });
    expect(report.ok).toBe(false);
    expect(report.problems.sharedInputs).toMatchObject({ severity: 'critical', count: 2 });
    expect(report.problems.sharedInputs.items).toEqual(
      expect.arrayContaining([
        { tablet: T2, file: 'e', jobs: ['E1', 'E2'], problem: 'in two jobs' },
        { tablet: T2, file: 'gone', job: 'E3', problem: 'not a file of the tablet' },
      ]),
    );
  });

  it('queue entries - one of a hosted tablet without work, one naming no tablet, one unparsable; an unhosted tablet is not judged', () => {
    const input = cleanInput();
    const ghost = queueRow({ queueId: SMALL.id, bin: 0, priority: 1, tableId: '0009', endRow: null });
    const report = checkCluster({ ...input, queueEntries: [entry(T1), entry(T2), ghost, '~cq:junk'] });
    expect(report.problems.queueEntriesWithoutWork.items).toEqual([
      { entry: entry(T2), tablet: T2, queueId: SMALL.id, reason: 'the tablet has no work for this queue' },
      { entry: ghost, tablet: '0009<', queueId: SMALL.id, reason: 'no such tablet' },
      { entry: '~cq:junk', tablet: null, queueId: null, reason: 'not a queue entry row' },
    ]);
    const unhosted = [input.tablets[0]!, tablet(T2, { files: { d: 10 }, hosted: false })];
    const quiet = checkCluster({ ...input, tablets: unhosted, queueEntries: [entry(T1), entry(T2)] });
    expect(quiet.problems.queueEntriesWithoutWork.count).toBe(0);
  });

  it('queue entries - work for a queue that no longer exists needs no entry; an entry in it has no work', () => {
    const report = checkCluster({ ...cleanInput(), queues: [LARGE] });
    expect(report.problems.workMissingFromQueue.count).toBe(0);
    expect(report.problems.queueEntriesWithoutWork.items).toMatchObject([{ tablet: T1, queueId: SMALL.id }]);
  });

  it('work missing - a hosted tablet with work and no entry is listed with its queue; an unhosted one is not', () => {
    const report = checkCluster({ ...cleanInput(), queueEntries: [] });
    expect(report.ok).toBe(false);
    expect(report.problems.workMissingFromQueue.items).toEqual([
      { tablet: T1, queueId: SMALL.id, queue: 'small', priority: 3 },
    ]);
    const input = cleanInput();
    const unhosted = [tablet(T1, { files: { a: 10, b: 10, c: 10 }, hosted: false }), input.tablets[1]!];
    expect(checkCluster({ ...input, tablets: unhosted, queueEntries: [] }).ok).toBe(true);
  });

  it('files - a referenced file (or reservation input) missing is critical; an output not yet written is not', () => {
    const report = checkCluster({ ...cleanInput(), objects: objects('a', 'b', 'd') });
    expect(report.ok).toBe(false);
    expect(report.problems.missingFiles).toMatchObject({
      severity: 'critical',
      count: 2,
      items: [
        { file: 'c', tablet: T1 },
        { file: 'e', tablet: T2 },
      ],
    });
  });

  it('files - unreferenced: marked for deletion is pending GC, young may be in flight (both fine), old and unmarked is an orphan', () => {
    const input = cleanInput();
    const listed = objects('a', 'b', 'c', 'd', 'e', 'out', 'marked', ['young', NOW - 1_000], 'old');
    const report = checkCluster({ ...input, objects: listed, deletions: new Map([['marked', 77]]) });
    expect(report.problems.unreferencedPendingGc.items).toEqual([{ file: 'marked', size: 10, markedAt: 77 }]);
    expect(report.problems.unreferencedYoung.items).toEqual([
      { file: 'young', size: 10, modifiedMs: NOW - 1_000, ageMs: 1_000 },
    ]);
    expect(report.problems.orphanFiles.items).toEqual([{ file: 'old', size: 10, modifiedMs: 0, ageMs: NOW }]);
    expect(report.ok).toBe(false);
    const onlyBenign = listed;
    onlyBenign.delete('old');
    expect(checkCluster({ ...input, objects: onlyBenign, deletions: new Map([['marked', 77]]) }).ok).toBe(
      true,
    );
  });

  it('temporaries - older than the grace is a problem, younger a write in progress', () => {
    const temporaries = [
      { target: 'tables/0001/C1.rf', id: 'u1', modifiedMs: NOW - GRACE - 1, size: 5 },
      { target: 'tables/0001/C2.rf', id: 'u2', modifiedMs: NOW - 10 },
    ];
    const report = checkCluster({ ...cleanInput(), temporaries });
    expect(report.problems.staleTemporaries.items).toEqual([
      { target: 'tables/0001/C1.rf', id: 'u1', modifiedMs: NOW - GRACE - 1, ageMs: GRACE + 1, size: 5 },
    ]);
    expect(report.problems.youngTemporaries.items).toMatchObject([
      { target: 'tables/0001/C2.rf', ageMs: 10 },
    ]);
    expect(report.ok).toBe(false);
  });

  it('files and temporaries of an output a reservation is writing are no leftovers, however old', () => {
    // The clean input's reservation E1 writes `out`: its parts before any checkpoint names them, and the
    // temporary of its plain write, are kept by the collector (gc.ts) and so not reported.
    const listed = objects('a', 'b', 'c', 'd', 'e', 'out.partial', 'out.part00001', 'gone.partial');
    const temporaries = [
      { target: 'out', id: 'u1', modifiedMs: 0 },
      { target: 'gone', id: 'u2', modifiedMs: 0 },
    ];
    const report = checkCluster({ ...cleanInput(), objects: listed, temporaries });
    expect(report.problems.orphanFiles.items).toEqual([
      { file: 'gone.partial', size: 10, modifiedMs: 0, ageMs: NOW },
    ]);
    expect(report.problems.staleTemporaries.items).toMatchObject([{ target: 'gone' }]);
    expect(report.problems.youngTemporaries.items).toMatchObject([{ target: 'out' }]);
  });

  it('not checkable - said with its reason and a null count, never a zero', () => {
    const why = { notCheckable: 'ListMultipartUploads is not implemented' };
    const report = checkCluster({ ...cleanInput(), objects: { notCheckable: 'no store' }, temporaries: why });
    for (const name of ['missingFiles', 'orphanFiles', 'unreferencedPendingGc', 'unreferencedYoung'] as const)
      expect(report.problems[name]).toMatchObject({ count: null, items: [], notCheckable: 'no store' });
    expect(report.problems.staleTemporaries).toMatchObject({ count: null, notCheckable: why.notCheckable });
    expect(report.figures).toMatchObject({ objects: null, objectBytes: null, temporaries: null });
    expect(report.ok).toBe(true);
  });

  it('malformed rows - listed, and the check fails', () => {
    const report = checkCluster({ ...cleanInput(), malformed: new Map([['0001;zz', 'not a tablet row']]) });
    expect(report.problems.malformedRows.items).toEqual([{ row: '0001;zz', error: 'not a tablet row' }]);
    expect(report.ok).toBe(false);
  });

  it('items - at most MAX_ITEMS kept, the count is all of them', () => {
    const many = Array.from({ length: MAX_ITEMS + 5 }, (_, i) => `orphan${String(i).padStart(3, '0')}`);
    const report = checkCluster({ ...cleanInput(), objects: objects('a', 'b', 'c', 'd', 'e', ...many) });
    expect(report.problems.orphanFiles.count).toBe(MAX_ITEMS + 5);
    expect(report.problems.orphanFiles.items).toHaveLength(MAX_ITEMS);
    expect(report.problems.orphanFiles.items[0]).toMatchObject({ file: 'orphan000' });
  });
});

describe('tablet demand', () => {
  const config = tableConfigSchema.parse({
    queues: [{ queue: 'small', maxInputBytes: 100 }, { queue: 'large' }],
  });

  it('routes by size to queue ids; a route to a queue that does not exist is dropped', () => {
    expect(tabletDemand(tablet(T1, { files: { a: 10, b: 10, c: 10 } }), config, [SMALL, LARGE])).toEqual(
      new Map([[SMALL.id, 3]]),
    );
    expect(tabletDemand(tablet(T1, { files: { a: 100, b: 100, c: 100 } }), config, [SMALL, LARGE])).toEqual(
      new Map([[LARGE.id, 3]]),
    );
    expect(tabletDemand(tablet(T1, { files: { a: 100, b: 100, c: 100 } }), config, [SMALL])).toEqual(
      new Map(),
    );
  });

  it('a parked user compaction is not planned again; system work goes on without its files', () => {
    const t = tablet(T1, { files: { a: 10, b: 10, c: 10 } });
    t.userCompactions.set('U1', { requestedAt: 1, filters: [] });
    const user = tabletDemand(t, config, [SMALL, LARGE]);
    expect(user.get(SMALL.id)).toBeGreaterThan(1 << 30); // user priority
    t.failures.set(failureKey(['a', 'b', 'c']), {
      inputs: ['a', 'b', 'c'],
      attempts: 3,
      lastError: 'x',
      at: 1,
      parked: true,
    });
    expect(tabletDemand(t, config, [SMALL, LARGE])).toEqual(new Map());
  });
});

/**
 * Invariant 7 in the check: a user compaction's selection against the tablet's jobs. The violations are
 * rows as the store would hold them (through the real row parser); the legal states are those the
 * tablet server's own rules leave, step by step.
 */
describe('consistency check - user compaction selections (invariant 7)', () => {
  const DROP_X = [{ name: 'dropRowPrefix', options: { prefixes: ['x'] } }];
  const settings = (filters: unknown[] = []) => ({ versions: 1, nowMs: 0, filters, dropDeletes: false });
  const job = (inputs: string[], extra: Record<string, unknown> = {}) => ({
    compactor: COMPACTOR,
    queueId: SMALL.id,
    inputs,
    output: `out-${inputs.join('')}`,
    kind: 'system',
    attempt: 0,
    reservedAt: 5,
    allFiles: false,
    settings: settings(),
    ...extra,
  });
  /** T2 with files a..f, request U1 (dropping rows x…) and the given columns. */
  const row = (cols: Record<string, unknown>): TabletMeta =>
    parseTablet(
      T2,
      new Map([
        ['prev', 'null'],
        ...['a', 'b', 'c', 'd', 'e', 'f'].map((f) => [`file:${f}`, '{"size":10,"entries":1}'] as const),
        ['compact:U1', JSON.stringify({ requestedAt: 1, filters: DROP_X })],
        ...Object.entries(cols).map(([col, value]) => [col, JSON.stringify(value)] as const),
      ]),
    );
  const selected = (files: string[], filters = DROP_X) => ({ ids: ['U1'], files, filters });
  const conflicts = (...tablets: TabletMeta[]) =>
    checkCluster({ ...cleanInput(), tablets, objects: { notCheckable: 'not listed' } }).problems
      .selectionConflicts;

  it('a system job over selected and unselected files, or with filters, is critical', () => {
    expect(conflicts(row({ selected: selected(['a', 'b', 'c']) }))).toMatchObject({ count: 0 });
    const report = conflicts(
      row({
        selected: selected(['a', 'b', 'c']),
        // Reserved before the selection (all its inputs in it), after it (none): both fine.
        'ecomp:E1': job(['a', 'b']),
        'ecomp:E2': job(['d']),
        // Neither: the selection took every file, so this one took a selected file after it.
        'ecomp:E3': job(['c', 'e']),
        'ecomp:E4': job(['f'], { settings: settings(DROP_X) }),
      }),
    );
    expect(report).toMatchObject({ severity: 'critical', count: 2 });
    expect(report.items).toEqual([
      { tablet: T2, job: 'E3', files: ['c'], problem: 'system job over selected and unselected files' },
      { tablet: T2, job: 'E4', problem: "system job with a user compaction's filters" },
    ]);
  });

  it('a split system job is judged by its inputs, not by its sub-jobs', () => {
    const split = (inputs: string[]) => ({
      inputs,
      kind: 'system',
      allFiles: false,
      settings: settings(),
      bounds: ['6d'],
      done: [null, null],
      createdAt: 5,
    });
    const sub = (id: string, inputs: string[]) =>
      job(inputs, { split: { id, index: 1, of: 2, start: '6d' }, output: `out-${id}` });
    const report = conflicts(
      row({
        selected: selected(['a', 'b', 'c']),
        'split:S1': split(['a', 'b']),
        'ecomp:E1': sub('S1', ['a', 'b']),
        'split:S2': split(['c', 'd']),
        'ecomp:E2': sub('S2', ['c', 'd']),
      }),
    );
    expect(report.items).toEqual([
      { tablet: T2, job: 'split:S2', files: ['c'], problem: 'system job over selected and unselected files' },
    ]);
  });

  it('a user job over other files or filters than its selection, or without one, is critical', () => {
    const user = (inputs: string[], filters = DROP_X) =>
      job(inputs, { kind: 'user', userCompactionIds: ['U1'], settings: settings(filters) });
    expect(conflicts(row({ selected: selected(['a', 'b']), 'ecomp:E1': user(['a', 'b']) })).count).toBe(0);
    expect(conflicts(row({ selected: selected(['a', 'b']), 'ecomp:E1': user(['b', 'c']) })).items).toEqual([
      { tablet: T2, job: 'E1', files: ['a', 'c'], problem: 'user job over files other than its selection' },
    ]);
    expect(
      conflicts(row({ selected: selected(['a', 'b']), 'ecomp:E1': user(['a', 'b'], []) })).items,
    ).toEqual([{ tablet: T2, job: 'E1', problem: "user job with filters other than its selection's" }]);
    expect(conflicts(row({ 'ecomp:E1': user(['a', 'b']) })).items).toEqual([
      { tablet: T2, job: 'E1', problem: 'user job without a selection' },
    ]);
    // Its requests all cancelled: its tablet server is cancelling it, and the selection may be gone.
    const abandoned = job(['a'], { kind: 'user', userCompactionIds: ['U9'], settings: settings(DROP_X) });
    expect(conflicts(row({ 'ecomp:E1': abandoned })).count).toBe(0);
  });

  it('a selected file the tablet does not have is critical', () => {
    expect(conflicts(row({ selected: selected(['a', 'gone']) })).items).toEqual([
      { tablet: T2, file: 'gone', problem: 'selected, not a file of the tablet' },
    ]);
  });

  it("a user compaction's life through the tablet server's rules is never reported", () => {
    const meta = parseTablet(T2, new Map([['prev', 'null']]));
    const states: string[] = [];
    const judge = (what: string): void => {
      const found = conflicts(meta);
      if (found.count) states.push(`${what}: ${JSON.stringify(found.items)}`);
    };
    const ingest = (f: string) => meta.files.set(f, { size: 100, entries: 10 });
    let n = 0;
    const reserve = (files: string[], extra: Partial<PlannedJob> = {}): string => {
      const ecid = `E${++n}`;
      const decision = decideReserve(
        meta,
        { tablet: T2, queueId: SMALL.id, compactor: COMPACTOR },
        {
          jobs: [
            {
              kind: 'system',
              files,
              inputBytes: 100,
              queue: 'small',
              priority: 5,
              allFiles: false,
              ...extra,
            },
          ],
          config: tableConfigSchema.parse({}),
          queueIdOf: () => SMALL.id,
          ecid,
          output: `C${n}`,
          now: 5_000,
          mayDropDeletes: true,
        },
      );
      if (decision.kind !== 'reserve') throw new Error(decision.kind);
      decision.change.apply(meta);
      return ecid;
    };
    const commit = (ecid: string): void => {
      const r = meta.reservations.get(ecid)!;
      const req = { tablet: T2, ecid, compactor: COMPACTOR, output: { size: 100, entries: 10 } };
      decideCommit(meta, r, req, { now: 9_000, server: 'ts:1' }).apply(meta);
    };
    const step = (): void => userStep(meta, 0)?.apply(meta);

    for (const f of ['a', 'b', 'c', 'd']) ingest(f);
    const before = reserve(['a', 'b']);
    judge('a system job');
    meta.userCompactions.set('U1', { requestedAt: 1, filters: DROP_X });
    judge('a request not yet selected');
    step();
    expect(meta.selection?.files).toEqual(['a', 'b', 'c', 'd']);
    judge('selected, with a system job reserved before');
    ingest('e');
    const after = reserve(['e']);
    judge('a system job over a file ingested after the selection');
    commit(before);
    expect(meta.selection?.files).toEqual(['C1', 'c', 'd']);
    judge("the earlier system job's output in the selection");
    const user = reserve(meta.selection!.files, { kind: 'user', userCompactionIds: ['U1'], filters: DROP_X });
    judge('the user job reserved');
    meta.userCompactions.set('U2', { requestedAt: 2, filters: [] });
    step();
    judge('a request with other filters waits');
    commit(after);
    judge('the later system job committed');
    commit(user);
    expect(meta.selection).toBeUndefined();
    judge('the user job committed');
    step();
    expect(meta.selection?.ids).toEqual(['U2']);
    const second = reserve(meta.selection!.files, { kind: 'user', userCompactionIds: ['U2'] });
    // An admin cancels U2: the manager deletes its request; the tablet's next change drops the selection;
    // its tablet server then cancels the job, in a mutation of its own.
    meta.userCompactions.delete('U2');
    judge('the request cancelled');
    step();
    expect(meta.selection).toBeUndefined();
    judge('the selection dropped, the job still running');
    const cancel = decideCancel(meta, second, 'admin', {
      now: 9_000,
      server: 'ts:1',
      maxAttempts: 3,
      queueExists: true,
    });
    if (cancel.kind !== 'cancel') throw new Error(cancel.kind);
    cancel.change.apply(meta);
    judge('the job cancelled');
    expect(states).toEqual([]);
  });
});
