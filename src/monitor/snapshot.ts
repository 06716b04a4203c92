/**
 * What the monitor page shows, read from the cluster with signed calls: the manager's admin API for
 * queues, compactors, running and parked compactions, tablets and the last minute's outcomes, and each
 * compactor's own `/v1/status` for the live progress of its jobs (the metadata store's copy is persisted
 * only every few seconds). One {@link Snapshot} per poll; throughput comes from two successive ones.
 */
import { ExcError } from '../errors.js';
import { FAILURE_REASONS, type HistoryAnswer } from '../meta/outcomes.js';
import {
  shortCompactorName,
  type CompactorView,
  type ParkedCompaction,
  type RunningCompaction,
  type TabletView,
} from '../meta/views.js';

/** A signed call to the active manager (MetaClient.call). */
export type ManagerCall = <T>(method: string, path: string, body?: unknown) => Promise<T>;
/** A signed GET of a compactor's `/v1/status`, from the status URL in its node. */
export type CompactorStatus = (statusUrl: string) => Promise<CompactorStatusAnswer>;

export interface CompactorStatusAnswer {
  state: string;
  jobs: {
    ecid: string;
    tablet: string;
    startedAt: number;
    progress: { bytesRead: number; bytesWritten: number };
  }[];
}

export interface QueueRow {
  name: string;
  queued: number;
  queuedBytes: number;
  running: number;
  parked: number;
  compactors: number;
  committedPerMin: number;
  failedPerMin: number;
}

export interface CompactorRow {
  name: string;
  path: string;
  queue: string;
  host: string | null;
  upMs: number | null;
  state: string | null;
  /** Its first job; `mbps` is what all its jobs read together (it may run several at once). */
  job: { ecid: string; tablet: string; percent: number | null; mbps: number | null } | null;
}

export interface RunningRow {
  ecid: string;
  table: string;
  tablet: string;
  queue: string;
  compactor: string;
  ageMs: number;
  bytesRead: number;
  bytesWritten: number;
  inputBytes: number;
  percent: number | null;
}

export interface ParkedRow {
  id: string;
  table: string;
  tablet: string;
  queue: string;
  attempts: number;
  lastError: string;
  /** The user compactions whose job it is (empty: a system job, which can only be released). */
  userCompactionIds: string[];
}

export interface TabletRow {
  table: string;
  tablet: string;
  files: number;
  bytes: number;
  host: string | null;
}

export interface Snapshot {
  at: number;
  queues: QueueRow[];
  compactors: CompactorRow[];
  running: RunningRow[];
  parked: ParkedRow[];
  tablets: TabletRow[];
  /** Bytes read per second by every running job since the previous snapshot. */
  readBytesPerSec: number;
  /** A part that could not be read this time (shown on the page), or null. */
  error: string | null;
}

/** Tablets listed at most (a big cluster has many; the page is for a glance). */
const MAX_TABLETS = 200;

interface QueueAnswer {
  id: string;
  name: string;
  queued: number;
  queuedBytes?: number;
  running: number;
  parked?: number;
  compactors: number;
}

export class SnapshotReader {
  /** Bytes read per job at the previous snapshot, for MB/s. */
  private lastRead = new Map<string, { at: number; bytes: number }>();

  constructor(
    private readonly call: ManagerCall,
    private readonly compactorStatus: CompactorStatus,
  ) {}

  async read(): Promise<Snapshot> {
    const now = Date.now();
    const [{ queues }, { compactors }, { running, parked }, { tables }] = await Promise.all([
      this.call<{ queues: QueueAnswer[] }>('GET', '/v1/queues'),
      this.call<{ compactors: CompactorView[] }>('GET', '/v1/compactors'),
      this.call<{ running: RunningCompaction[]; parked: ParkedCompaction[] }>('GET', '/v1/compactions'),
      this.call<{ tables: { name: string }[] }>('GET', '/v1/tables'),
    ]);
    const errors: string[] = [];
    const [rates, statuses, tablets] = await Promise.all([
      Promise.all(queues.map((q) => this.lastMinute(q.id))),
      Promise.all(
        compactors.map(async (c) =>
          c.status
            ? this.compactorStatus(c.status).catch((err: unknown) => {
                errors.push(`compactor ${shortCompactorName(c.path, c.queue, c.host)}: ${String(err)}`);
                return undefined;
              })
            : undefined,
        ),
      ),
      this.tablets(tables.map((t) => t.name)),
    ]);

    const live = new Map<string, { bytesRead: number; bytesWritten: number }>();
    for (const s of statuses) for (const j of s?.jobs ?? []) live.set(j.ecid, j.progress);
    const hostOf = new Map(compactors.map((c) => [c.path, c.host]));
    const nextRead = new Map<string, { at: number; bytes: number }>();
    let readPerSec = 0;
    const mbps = (ecid: string, bytes: number): number | null => {
      nextRead.set(ecid, { at: now, bytes });
      const before = this.lastRead.get(ecid);
      if (!before || now <= before.at) return null;
      const perSec = ((bytes - before.bytes) * 1000) / (now - before.at);
      readPerSec += Math.max(0, perSec);
      return Math.max(0, perSec) / 1e6;
    };
    const runningRows: RunningRow[] = running.map((r) => {
      const p = live.get(r.ecid) ?? r.progress;
      const bytesRead = p?.bytesRead ?? 0;
      return {
        ecid: r.ecid,
        table: r.table,
        tablet: r.tablet,
        queue: r.queue ?? r.queueId,
        compactor: shortCompactorName(r.compactor, r.queue, hostOf.get(r.compactor)),
        ageMs: now - r.reservedAt,
        bytesRead,
        bytesWritten: p?.bytesWritten ?? 0,
        inputBytes: r.inputBytes,
        percent: r.inputBytes > 0 ? Math.min(100, (bytesRead / r.inputBytes) * 100) : null,
      };
    });
    const byEcid = new Map(runningRows.map((r) => [r.ecid, r]));
    const compactorRows: CompactorRow[] = compactors.map((c, i) => {
      // A compactor may run several jobs at once (--concurrency): its row names the first, but its MB/s
      // (and the cluster's throughput) counts every one.
      const jobs = statuses[i]?.jobs ?? [];
      const job = jobs[0];
      const row = job ? byEcid.get(job.ecid) : undefined;
      let compactorMbps: number | null = null;
      for (const j of jobs) {
        const m = mbps(j.ecid, j.progress.bytesRead);
        if (m !== null) compactorMbps = (compactorMbps ?? 0) + m;
      }
      return {
        name: shortCompactorName(c.path, c.queue, c.host),
        path: c.path,
        queue: c.queue,
        host: c.host,
        upMs: c.started === null ? null : now - c.started,
        state: statuses[i]?.state ?? null,
        job: job
          ? {
              ecid: job.ecid,
              tablet: job.tablet,
              percent: row?.percent ?? null,
              mbps: compactorMbps,
            }
          : null,
      };
    });
    this.lastRead = nextRead;

    return {
      at: now,
      queues: queues.map((q, i) => ({
        name: q.name,
        queued: q.queued,
        queuedBytes: q.queuedBytes ?? 0,
        running: q.running,
        parked: q.parked ?? 0,
        compactors: q.compactors,
        committedPerMin: rates[i]?.committed ?? 0,
        failedPerMin: rates[i]?.failed ?? 0,
      })),
      compactors: compactorRows,
      running: runningRows,
      parked: parked.map((p) => ({
        id: p.id,
        table: p.table,
        tablet: p.tablet,
        queue: p.queue ?? p.queueId ?? '?',
        attempts: p.attempts,
        lastError: p.lastError,
        userCompactionIds: p.userCompactionIds ?? [],
      })),
      tablets,
      readBytesPerSec: readPerSec,
      error: errors.length > 0 ? errors.join('; ') : null,
    };
  }

  /** Commits and failures of a queue over the last minute, from the manager's outcome records. */
  private async lastMinute(queueId: string): Promise<{ committed: number; failed: number }> {
    const since = Date.now() - 60_000;
    const { counts } = await this.call<HistoryAnswer>(
      'GET',
      `/v1/compactions/history?since=${since}&queue=${encodeURIComponent(queueId)}&limit=1`,
    );
    let failed = 0;
    for (const [reason, n] of Object.entries(counts.cancelled)) if (FAILURE_REASONS.has(reason)) failed += n;
    return { committed: counts.committed, failed };
  }

  private async tablets(tables: string[]): Promise<TabletRow[]> {
    const rows: TabletRow[] = [];
    for (const name of tables) {
      if (rows.length >= MAX_TABLETS) break;
      // A table deleted since it was listed is simply not shown: one table going must not blank the page.
      const answer = await this.call<{ tablets: TabletView[] }>(
        'GET',
        `/v1/tables/${encodeURIComponent(name)}?limit=${MAX_TABLETS - rows.length}`,
      ).catch((err: unknown) => {
        if (err instanceof ExcError && err.code === 'UNKNOWN_TABLE') return undefined;
        throw err;
      });
      if (!answer) continue;
      const { tablets } = answer;
      for (const t of tablets.slice(0, MAX_TABLETS - rows.length)) {
        rows.push({
          table: name,
          tablet: t.tablet,
          files: t.files.length,
          bytes: t.files.reduce((sum, f) => sum + f.size, 0),
          host: t.loc?.server ?? null,
        });
      }
    }
    return rows;
  }
}
