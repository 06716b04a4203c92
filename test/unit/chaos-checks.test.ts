import { describe, expect, it } from 'vitest';
import { judgeOutcomes, type LogFindings, type OutcomeRecord } from '../../chaos/checks.js';
import type { KillRecord, ZombieRecord } from '../../chaos/faults.js';
import type { NodeDeath } from '../../chaos/node-deaths.js';

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
