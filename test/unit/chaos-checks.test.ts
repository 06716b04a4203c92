import { describe, expect, it } from 'vitest';
import {
  judgeOutcomes,
  problemKey,
  StandingProblems,
  type LogFindings,
  type OutcomeRecord,
} from '../../chaos/checks.js';
import type { KillRecord, ZombieRecord } from '../../chaos/faults.js';
import type { NodeDeath } from '../../chaos/node-deaths.js';
import { checkCluster, type CheckInput } from '../../src/manager/check.js';
import { tabletRow } from '../../src/meta/keys.js';
import { parseTablet } from '../../src/meta/tablet.js';

/** The chaos run's judgement of commits from paused compactors (chaos/checks.ts). */
describe('chaos checks - zombie commits', () => {
  const node = '/chaos/compactors/q/_c_1-c-0000000003';
  const logs: LogFindings = {
    reserved: new Set(['E1']),
    ends: new Map([['E1', 1]]),
    compactorCommitted: new Set(['E1']),
    jobs: {
      checkpointsRecorded: 0,
      checkpointsKept: 0,
      resumed: 0,
      splitJobs: 0,
      userSplitJobs: 0,
      subJobsReserved: 0,
      subJobsCancelled: 0,
    },
    elastic: {
      splits: 0,
      thresholdSplits: 0,
      merges: 0,
      mergeCancelled: 0,
      offlineCancelled: 0,
      moves: 0,
      holdsInstalled: 0,
      holdsReleased: 0,
    },
    referenceIndex: { checks: 0, mismatches: 0 },
    activityIndex: { checks: 0, mismatches: 0 },
  };
  const committedAt = (at: number): Map<string, OutcomeRecord> =>
    new Map([['E1', { outcome: 'committed', reason: undefined, compactor: node, at, reservedAt: 0 }]]);
  const judge = (
    at: number,
    zombies: ZombieRecord[],
    deletedNodes: KillRecord[],
    deaths: NodeDeath[] = [],
  ): string[] =>
    judgeOutcomes(
      committedAt(at),
      logs,
      [],
      { zombies, deletedNodes, compactorKills: [] },
      { deaths, sessionTimeoutMs: 4_000 },
    ).zombieCommits;

  it('flags any commit after a compactor resumed from a pause its session expired in', () => {
    const zombie = { compactor: node, resumedAt: 10_000, sessionExpired: true };
    expect(judge(10_000, [zombie], [])).toEqual(['E1']);
    expect(judge(9_999, [zombie], [])).toEqual([]);
  });

  it('does not flag a commit from a compactor whose session outlived its pause', () => {
    // Seen in a chaos run: ZooKeeper elected a leader during a 6.4 s pause, which restarts every
    // session's timer, so the 4 s session was alive when the compactor resumed and sent its commit; the
    // compactor then closed the session itself, and the node went while the commit was being applied.
    const outlived = { compactor: node, resumedAt: 10_000, sessionExpired: false };
    expect(judge(10_100, [outlived], [], [{ compactor: node, at: 10_050 }])).toEqual([]);
    expect(judge(10_100, [{ ...outlived, sessionExpired: undefined }], [])).toEqual([]);
  });

  it('flags a commit accepted more than a session timeout after the node went, however it went', () => {
    const outlived = { compactor: node, resumedAt: 10_000, sessionExpired: false };
    // A tablet server trusts its watch while its session is connected: cut off from ZooKeeper, it may
    // learn of the deletion only when its watchdog finds the connection dead, within the session timeout.
    expect(judge(13_900, [outlived], [], [{ compactor: node, at: 10_050 }])).toEqual([]);
    expect(judge(14_100, [outlived], [], [{ compactor: node, at: 10_050 }])).toEqual(['E1']);
    expect(judge(14_100, [], [{ compactor: node, at: 10_050 }])).toEqual(['E1']);
    expect(judge(14_100, [], [], [{ compactor: 'another', at: 10_050 }])).toEqual([]);
  });
});

/** The chaos run's reclaim figure: the slowest kill, with what else was going on (chaos/checks.ts). */
describe('chaos checks - reclaim after kill -9', () => {
  const node = '/chaos/compactors/q/_c_1-c-0000000007';
  const cancelled = (ecid: string, at: number): [string, OutcomeRecord] => [
    ecid,
    { outcome: 'cancelled', reason: 'compactor-gone', compactor: node, at, reservedAt: 0 },
  ];
  const logs: LogFindings = {
    reserved: new Set(['E1', 'E2']),
    ends: new Map([
      ['E1', 1],
      ['E2', 1],
    ]),
    compactorCommitted: new Set(),
    jobs: {
      checkpointsRecorded: 0,
      checkpointsKept: 0,
      resumed: 0,
      splitJobs: 0,
      userSplitJobs: 0,
      subJobsReserved: 0,
      subJobsCancelled: 0,
    },
    elastic: {
      splits: 0,
      thresholdSplits: 0,
      merges: 0,
      mergeCancelled: 0,
      offlineCancelled: 0,
      moves: 0,
      holdsInstalled: 0,
      holdsReleased: 0,
    },
    referenceIndex: { checks: 0, mismatches: 0 },
    activityIndex: { checks: 0, mismatches: 0 },
  };

  it("takes the last of a kill's jobs back, and names the faults that overlapped the wait", () => {
    const timeline = [
      { fault: 's3-slow', target: 'object store', at: 1_000, forMs: 8_000 }, // ended before the kill
      { fault: 'tserver-zombie', target: 'tserver-2', at: 9_200, forMs: 3_000 }, // frozen through it
      { fault: 'compactor-kill', target: 'compactor-small-1', at: 10_000, forMs: 2_000 },
      // Counted a millisecond before the kill it overlaps: not "-0.0 s".
      { fault: 'zk-follower-kill', target: 'zk-2', at: 9_999, forMs: 1_500 },
      { fault: 'manager-kill', target: 'manager-1', at: 14_000, forMs: 1_000 }, // after the work was back
      // Killed and restarted at once, 1.7 s before: its session (4 s) outlived it through the wait.
      { fault: 'tserver-kill', target: 'tserver-1', at: 8_300, forMs: 0 },
      // Its session had ended before the compactor's kill.
      { fault: 'tserver-kill', target: 'tserver-3', at: 5_000, forMs: 0 },
    ];
    const judged = judgeOutcomes(
      new Map([cancelled('E1', 10_250), cancelled('E2', 13_600)]),
      logs,
      [],
      { zombies: [], deletedNodes: [], compactorKills: [{ compactor: node, at: 10_000 }], timeline },
      { deaths: [], sessionTimeoutMs: 4_000 },
    );
    expect(judged.reclaimMs).toEqual([3_600]);
    expect(judged.slowestReclaim).toEqual({
      compactor: node,
      ecid: 'E2',
      ms: 3_600,
      during: [
        'tserver-kill → tserver-1, from -1.7 s for 0.0 s (its session up to 4.0 s)',
        'tserver-zombie → tserver-2, from -0.8 s for 3.0 s',
        'zk-follower-kill → zk-2, from +0.0 s for 1.5 s',
        'compactor-kill → compactor-small-1, from +0.0 s for 2.0 s (its session up to 4.0 s)',
      ],
    });
  });
});

/** The chaos run's judgement of `admin check` reports at its quiescent points (chaos/checks.ts). */
describe('chaos checks - standing problems', () => {
  const GRACE = 20_000;
  const T0 = 10_000_000;
  const tablet = tabletRow('0001', null);
  /** A cluster whose one tablet has file `a`, with an object nothing references (written at 0). */
  const input = (now: number, over: Partial<CheckInput> = {}): CheckInput => ({
    now,
    graceMs: GRACE,
    tablets: [parseTablet(tablet, new Map([['file:a', '{"size":1,"entries":1}']]))],
    queueEntries: [],
    deletions: new Map(),
    tableConfigs: new Map(),
    queues: [],
    liveCompactors: new Set(),
    objects: new Map([
      ['a', { size: 1, modifiedMs: 0 }],
      ['orphan', { size: 1, modifiedMs: 0 }],
    ]),
    temporaries: [{ target: 'tables/0001/C1.rf', id: 'u1', modifiedMs: 0 }],
    ...over,
  });

  it('an orphan or a stale temporary seen in every check for the grace stands, though it grew older', () => {
    const judge = new StandingProblems(10_000);
    const first = judge.observe(checkCluster(input(T0)), T0);
    expect(first).toEqual({ seen: 2, standing: {} });
    expect(judge.observe(checkCluster(input(T0 + 5_000)), T0 + 5_000).standing).toEqual({});
    const later = checkCluster(input(T0 + 10_000));
    expect(later.problems.orphanFiles.items).toEqual([
      { file: 'orphan', size: 1, modifiedMs: 0, ageMs: T0 + 10_000 },
    ]);
    expect(judge.observe(later, T0 + 10_000).standing).toEqual({
      orphanFiles: later.problems.orphanFiles.items,
      staleTemporaries: later.problems.staleTemporaries.items,
    });
  });

  it('a problem that went away is new when it comes back; informational lists are never judged', () => {
    const judge = new StandingProblems(10_000);
    judge.observe(checkCluster(input(T0)), T0);
    const mended = input(T0 + 5_000, {
      objects: new Map([['a', { size: 1, modifiedMs: 0 }]]),
      temporaries: [],
    });
    expect(judge.observe(checkCluster(mended), T0 + 5_000)).toEqual({ seen: 0, standing: {} });
    expect(judge.observe(checkCluster(input(T0 + 12_000)), T0 + 12_000).standing).toEqual({});
    // Young files and temporaries are writes in flight (info): however long they are seen, nothing stands.
    const young = input(T0 + 20_000, {
      objects: new Map([
        ['a', { size: 1, modifiedMs: 0 }],
        ['young', { size: 1, modifiedMs: T0 + 15_000 }],
      ]),
      temporaries: [{ target: 'tables/0001/C2.rf', id: 'u2', modifiedMs: T0 + 15_000 }],
    });
    const report = checkCluster(young);
    expect(report.problems.unreferencedYoung.count).toBe(1);
    expect(judge.observe(report, T0 + 20_000)).toEqual({ seen: 0, standing: {} });
  });

  it('problem keys - every field but the age: another file or size is another problem', () => {
    const item = { file: 'f', size: 1, modifiedMs: 0, ageMs: 5 };
    expect(problemKey('orphanFiles', item)).toBe(problemKey('orphanFiles', { ...item, ageMs: 9 }));
    expect(problemKey('orphanFiles', item)).toBe(
      problemKey('orphanFiles', { ageMs: 9, modifiedMs: 0, size: 1, file: 'f' }),
    );
    expect(problemKey('orphanFiles', item)).not.toBe(problemKey('orphanFiles', { ...item, file: 'g' }));
    expect(problemKey('orphanFiles', item)).not.toBe(problemKey('orphanFiles', { ...item, size: 2 }));
    expect(problemKey('orphanFiles', item)).not.toBe(problemKey('staleTemporaries', item));
  });
});
