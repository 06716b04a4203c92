/**
 * What the monitor reads from the cluster, with the manager and the compactors as stand-ins: the figures
 * the page shows are computed from every job, and a cluster that changes under a read does not blank it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExcError } from '../../src/errors.js';
import type { CompactorView, RunningCompaction, TabletView } from '../../src/meta/views.js';
import { SnapshotReader, type CompactorStatusAnswer, type ManagerCall } from '../../src/monitor/snapshot.js';

const COMPACTOR = '/excompact/compactors/q1/_c_0123-c-0000000001';

function running(ecid: string, tablet: string): RunningCompaction {
  return {
    ecid,
    tablet,
    table: 'events',
    queueId: 'q1',
    queue: 'small',
    compactor: COMPACTOR,
    kind: 'system',
    attempt: 1,
    inputs: 2,
    inputBytes: 10e6,
    reservedAt: Date.now(),
    ageMs: 0,
    progress: {
      entriesRead: 0,
      entriesWritten: 0,
      bytesRead: 0,
      bytesWritten: 0,
    },
  } as RunningCompaction;
}

const compactor: CompactorView = {
  queue: 'small',
  queueId: 'q1',
  path: COMPACTOR,
  host: 'h1',
  pid: 1,
  version: '0.1.0',
  started: Date.now(),
  status: 'http://h1:1/',
};

/** A stand-in manager: `tables` are listed, and `lookup` answers each table's own route. */
function manager(
  tables: string[],
  lookup: (name: string) => TabletView[],
  compactions: RunningCompaction[] = [],
): ManagerCall {
  return (async (method: string, path: string) => {
    if (path === '/v1/queues') return { queues: [] };
    if (path === '/v1/compactors') return { compactors: compactions.length > 0 ? [compactor] : [] };
    if (path === '/v1/compactions') return { running: compactions, parked: [] };
    if (path === '/v1/tables') return { tables: tables.map((name) => ({ name })) };
    const table = /^\/v1\/tables\/([^/?]+)(?:\?limit=\d+)?$/.exec(path)?.[1];
    if (method === 'GET' && table) return { tablets: lookup(decodeURIComponent(table)) };
    throw new Error(`unexpected call ${method} ${path}`);
  }) as ManagerCall;
}

const tablet = (name: string): TabletView =>
  ({
    tablet: `${name}<`,
    files: [{ size: 100 }, { size: 50 }],
    loc: { server: 'ts:1' },
  }) as TabletView;

describe('monitor snapshot', () => {
  afterEach(() => vi.useRealTimers());

  it('snapshot - throughput counts every job of a compactor that runs two at once', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    let bytesRead = 0;
    const status = async (): Promise<CompactorStatusAnswer> => ({
      state: 'running',
      jobs: ['01ARZ3NDEKTSV4RRFFQ69G5FA1', '01ARZ3NDEKTSV4RRFFQ69G5FA2'].map((ecid, i) => ({
        ecid,
        tablet: `t${i}`,
        startedAt: 0,
        progress: { bytesRead, bytesWritten: 0 },
      })),
    });
    const reader = new SnapshotReader(
      manager([], () => [], [
        running('01ARZ3NDEKTSV4RRFFQ69G5FA1', 't0'),
        running('01ARZ3NDEKTSV4RRFFQ69G5FA2', 't1'),
      ]),
      status,
    );
    await reader.read();
    vi.setSystemTime(1_001_000);
    bytesRead = 3e6; // each job: 3 MB in the second between the two reads
    const s = await reader.read();
    expect(s.readBytesPerSec).toBe(6e6);
    expect(s.compactors).toHaveLength(1);
    expect(s.compactors[0]!.job?.mbps).toBe(6);
  });

  it('snapshot - a table deleted between its listing and its lookup is left out, not the whole snapshot', async () => {
    const reader = new SnapshotReader(
      manager(['a', 'gone', 'b'], (name) => {
        if (name === 'gone') throw new ExcError('UNKNOWN_TABLE', 'no table named "gone"');
        return [tablet(name)];
      }),
      async () => ({ state: 'idle', jobs: [] }),
    );
    const s = await reader.read();
    expect(s.tablets.map((t) => [t.table, t.files, t.bytes])).toEqual([
      ['a', 2, 150],
      ['b', 2, 150],
    ]);
    // Any other failure of a lookup still fails the read: the page shows the cluster as unreachable.
    const broken = new SnapshotReader(
      manager(['a'], () => {
        throw new ExcError('UNAVAILABLE', 'manager away');
      }),
      async () => ({ state: 'idle', jobs: [] }),
    );
    await expect(broken.read()).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });
});
