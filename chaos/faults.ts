/**
 * The chaos run's fault injector: it carries out the seed's schedule (schedule.ts).
 *
 * When a fault's time comes the injector resolves its target to the slot's current process. It skips a
 * fault that would take more of a role down than the cluster is meant to survive at once (at most two
 * compactors per queue, one tablet server, one manager — and only with its standby up), logging the
 * skip: the schedule stays the seed's, what ran is in the log.
 */
import { describeError } from '../src/errors.js';
import type { RunningCompaction } from '../src/meta/views.js';
import { sleep } from '../src/retry.js';
import type { ChaosCluster, Slot } from './cluster.js';
import { elasticFault } from './elastic-faults.js';
import type { ChaosLog } from './report.js';
import type { Rng } from './rng.js';
import { STORE_FAULTS, type FaultSpan, type ScheduledFault } from './schedule.js';

/**
 * The queues whose compactors compactor faults take (chaos/main.ts creates them): half of them the bulk
 * queue's, whose jobs are long enough to be killed after a checkpoint or in a split.
 */
const COMPACTOR_QUEUES = ['small', 'large', 'bulk', 'bulk'];

/** What a compactor was running when a fault took it: nothing, a checkpointed job, a sub-job, another. */
export type JobShape = 'idle' | 'plain' | 'checkpointed' | 'sub-job';

/** A process (slot) held by a fault. */
interface Held {
  slot: string;
  role: string;
  queue?: string;
  until: number;
}

export interface KillRecord {
  /** The compactor's node path when it was killed. */
  compactor: string;
  at: number;
}

export interface ZombieRecord {
  /** The compactor's node path when it was paused, and when it was resumed. */
  compactor: string;
  resumedAt: number;
  /**
   * Whether ZooKeeper expired its session during the pause (its node was gone before it resumed). A pause
   * past the timeout usually does, but not always: a leader election restarts every session's timer.
   * Undefined when ZooKeeper could not say.
   */
  sessionExpired: boolean | undefined;
}

export class FaultInjector {
  readonly counts: Record<string, number> = {};
  /** Holds the workload's writes to a table (and its scans) until the function it resolves is called. */
  fence: (table: string) => Promise<() => void> = () => Promise.resolve(() => undefined);
  /** Imports a file of new rows into a workload table (Workload.bulkImport); resolves its entries. */
  bulkImport: (table: string, pick: number) => Promise<number> = () => Promise.resolve(0);
  /** Jobs parked with failures on the sick compactor alone. */
  readonly sickParked: string[] = [];
  readonly skipped: Record<string, number> = {};
  readonly compactorKills: KillRecord[] = [];
  /** Compactor faults by what the compactor was running when it was hit. */
  readonly jobsHit: Record<JobShape, number> = { checkpointed: 0, 'sub-job': 0, plain: 0, idle: 0 };
  readonly zombies: ZombieRecord[] = [];
  /** Compactor nodes deleted from outside, and when. */
  readonly deletedNodes: KillRecord[] = [];
  /** Every fault carried out, in order (to say what else was going on around a slow reclaim). */
  readonly timeline: FaultSpan[] = [];
  private readonly held = new Map<string, Held>();
  private s3Until = 0;
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly cluster: ChaosCluster,
    private readonly log: ChaosLog,
    private readonly rng: Rng,
    private readonly sessionTimeoutMs: number,
    private readonly queueBins: Record<string, number>,
  ) {}

  /** Faults whose effects are still running out (pauses, object-store windows, restarts). */
  get busy(): boolean {
    return this.pending.size > 0 || this.held.size > 0 || Date.now() < this.s3Until;
  }

  /** Waits until every fault has run its course. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /** Carries out one fault (its effects run on in the background). */
  inject(f: ScheduledFault): void {
    const run = this.run(f)
      .catch((err: unknown) => this.log.event('fault-error', { kind: f.kind, err: describeError(err) }))
      .finally(() => this.pending.delete(run));
    this.pending.add(run);
  }

  private count(f: ScheduledFault, target: string, detail: Record<string, unknown> = {}): void {
    this.counts[f.kind] = (this.counts[f.kind] ?? 0) + 1;
    const down = f.kind.endsWith('-kill') || f.kind === 'compactor-term' ? f.restartAfterMs : 0;
    const forMs = Number(detail.pauseMs ?? detail.forMs ?? detail.downForMs ?? down);
    this.timeline.push({ fault: f.kind, target, at: Date.now(), forMs });
    this.log.event('fault', { fault: f.kind, target, ...detail }, `fault ${f.kind} → ${target}`);
  }

  private skip(f: ScheduledFault, why: string): void {
    this.skipped[f.kind] = (this.skipped[f.kind] ?? 0) + 1;
    this.log.event('fault-skipped', { fault: f.kind, why });
  }

  /** Up slots of a role whose taking down keeps the role within what the cluster must survive. */
  private candidates(role: 'compactor' | 'tserver' | 'manager', queue?: string): Slot[] {
    const now = Date.now();
    for (const [name, h] of this.held)
      if (h.until < now && !this.cluster.slots.find((s) => s.name === name)?.held) this.held.delete(name);
    // An optional slot held down (the tablet server that joins for a while) is not one of the role's down.
    const all = this.cluster.byRole(role, queue).filter((s) => !(s.optional && s.held && !s.proc));
    const down = all.filter((s) => !s.proc?.running || this.held.has(s.name)).length;
    const limit = role === 'compactor' ? 2 : 1;
    if (down >= limit) return [];
    if (role === 'manager' && all.some((s) => !s.proc?.running)) return [];
    return all.filter((s) => s.proc?.running && !this.held.has(s.name) && s.readyAt !== undefined);
  }

  /** Compactors with a job, and what their job is: one with a checkpoint, a sub-job, or a plain one. */
  private async busyCompactors(): Promise<Map<string, JobShape>> {
    const { running } = await this.cluster.meta.call<{ running: RunningCompaction[] }>(
      'GET',
      '/v1/compactions?state=running',
      undefined,
      { timeoutMs: 2_000 },
    );
    return new Map(
      running.map((r) => [r.compactor, r.split ? 'sub-job' : r.checkpointBytes ? 'checkpointed' : 'plain']),
    );
  }

  private hold(slot: Slot, ms: number): void {
    this.held.set(slot.name, { slot: slot.name, role: slot.role, until: Date.now() + ms });
  }

  private async run(f: ScheduledFault): Promise<void> {
    const session = this.sessionTimeoutMs;
    switch (f.kind) {
      case 'compactor-kill':
      case 'compactor-zombie':
      case 'compactor-term':
      case 'compactor-pause': {
        const queue = COMPACTOR_QUEUES[f.target % COMPACTOR_QUEUES.length]!;
        const slots = this.candidates('compactor', queue);
        if (slots.length === 0) return this.skip(f, `too many ${queue} compactors down`);
        // A compactor in the middle of a job when there is one: that is the fault that matters, and the
        // one whose reclaim latency is measured.
        const busy = await this.busyCompactors().catch(() => new Map<string, JobShape>());
        // Another fault may have taken one of them (or the last one the queue may lose) while we asked:
        // choose again among those still free. Two faults on one process at once made the first one's exit
        // look unexpected (found by the soak: a kill -9 logged as an unexpected exit of a SIGTERMed slot).
        const still = new Set(this.candidates('compactor', queue).map((s) => s.name));
        const free = slots.filter((s) => still.has(s.name));
        if (free.length === 0) return this.skip(f, `its ${queue} compactors were taken by another fault`);
        // Better still, one in a checkpointed job or a sub-job of a split: what resuming and splitting
        // must survive.
        const shape = (s: Slot): JobShape => (s.identity && busy.get(s.identity)) || 'idle';
        const working = free.filter((s) => shape(s) !== 'idle');
        const large = working.filter((s) => shape(s) === 'checkpointed' || shape(s) === 'sub-job');
        const pool = large.length > 0 ? large : working.length > 0 ? working : free;
        // The target's low digits chose the queue: the rest chooses the compactor.
        const slot = pool[Math.floor(f.target / COMPACTOR_QUEUES.length) % pool.length]!;
        const proc = slot.proc!;
        const node = slot.identity ?? '';
        const job = shape(slot);
        this.jobsHit[job]++;
        if (f.kind === 'compactor-kill') {
          this.count(f, slot.name, { node, job });
          this.hold(slot, f.restartAfterMs + 5_000);
          slot.expect = { codes: [], signals: ['SIGKILL'], until: Infinity, why: 'kill -9' };
          slot.restartAfterMs = f.restartAfterMs;
          this.compactorKills.push({ compactor: node, at: Date.now() });
          proc.kill();
        } else if (f.kind === 'compactor-term') {
          this.count(f, slot.name, { node, job });
          this.hold(slot, f.restartAfterMs + 35_000);
          slot.expect = { codes: [0], signals: [], until: Infinity, why: 'SIGTERM' };
          slot.restartAfterMs = f.restartAfterMs;
          proc.signal('SIGTERM');
        } else {
          this.count(f, slot.name, { node, job, pauseMs: f.durationMs });
          this.hold(slot, f.durationMs + 2_000);
          proc.pause();
          await sleep(f.durationMs);
          // Whether ZooKeeper expired the session while the process was stopped, asked before it runs
          // again (then it may close the session itself). A pause past the timeout usually expires it,
          // but not always: a leader election restarts every session's timer.
          const expired = f.kind === 'compactor-zombie' ? await this.nodeGone(node) : false;
          proc.resume();
          if (f.kind === 'compactor-zombie') {
            this.zombies.push({ compactor: node, resumedAt: Date.now(), sessionExpired: expired });
            // Then its commits are judged by when its node goes, as every compactor's are.
            if (expired !== true)
              this.log.event('zombie-outlived', { target: slot.name, node, known: expired !== undefined });
          }
        }
        return;
      }
      case 'tserver-kill':
      case 'tserver-zombie':
      case 'tserver-pause': {
        const slots = this.candidates('tserver');
        if (slots.length === 0) return this.skip(f, 'a tablet server is already down');
        const slot = slots[f.target % slots.length]!;
        await this.stopOrPause(f, slot, session);
        return;
      }
      case 'manager-kill':
      case 'manager-zombie': {
        const active = await this.cluster.activeManager();
        if (!active || !this.candidates('manager').includes(active))
          return this.skip(f, 'no active manager with a standby');
        await this.stopOrPause(f, active, session);
        return;
      }
      case 's3-errors':
      case 's3-slow':
      case 's3-resets':
      case 's3-half-put': {
        if (Date.now() < this.s3Until) return this.skip(f, 'an object-store fault is running');
        const spec = STORE_FAULTS[f.kind]!;
        this.count(f, 'object store', { forMs: f.durationMs, probability: spec.p });
        this.s3Until = Date.now() + f.durationMs;
        const rng = this.rng.fork(`s3-${f.at}`);
        this.cluster.proxy.setRandom({
          probability: spec.p,
          faults: spec.faults,
          ...(spec.method ? { method: spec.method } : {}),
          random: () => rng.next(),
        });
        await sleep(f.durationMs);
        this.cluster.proxy.setRandom(null);
        return;
      }
      case 'zk-node-delete': {
        const slots = this.candidates('compactor').filter((s) => s.identity);
        if (slots.length === 0) return this.skip(f, 'no compactor node to delete');
        const slot = slots[f.target % slots.length]!;
        this.count(f, slot.name, { node: slot.identity });
        await this.cluster.session.delete(slot.identity!).then(
          () => this.deletedNodes.push({ compactor: slot.identity!, at: Date.now() }),
          (err: unknown) => this.log.event('fault-error', { kind: f.kind, err: describeError(err) }),
        );
        return;
      }
      case 'admin-cancel': {
        const { running } = await this.cluster.meta.call<{ running: { ecid: string }[] }>(
          'GET',
          '/v1/compactions?state=running',
        );
        if (running.length === 0) return this.skip(f, 'nothing running');
        const { ecid } = running[f.pick % running.length]!;
        this.count(f, ecid);
        // A job that ends meanwhile is not running any more: the cancel then fails, which is fine.
        await this.cluster
          .cli(['admin', 'compactions', 'cancel', ecid])
          .catch((err: unknown) => this.log.event('cancel-failed', { ecid, err: String(err).slice(0, 300) }));
        return;
      }
      case 'queue-recreate': {
        const queue = 'small';
        const slots = this.cluster.byRole('compactor', queue);
        if (slots.some((s) => !s.proc?.running || this.held.has(s.name)))
          return this.skip(f, `a ${queue} compactor is down`);
        this.count(f, queue, { downForMs: f.durationMs });
        for (const s of slots) {
          this.hold(s, f.durationMs + 60_000);
          s.held = true;
          s.expect = { codes: [4], signals: [], until: Infinity, why: 'queue deleted' };
        }
        try {
          await this.cluster.cli(['admin', 'queue', 'delete', queue, '--force']);
          await sleep(f.durationMs);
        } finally {
          await this.recreateQueue(queue);
          for (const s of slots) {
            this.held.delete(s.name);
            this.cluster.release(s, 500);
          }
        }
        return;
      }
      case 'peer-cut': {
        // A process its peers cannot reach (calls to it hang, then time out), while it still reaches
        // ZooKeeper and the others: the answers it owes are lost, which callers must ride through.
        const all = [
          ...this.candidates('compactor'),
          ...this.candidates('tserver'),
          ...this.candidates('manager'),
        ];
        const slot = all[f.target % Math.max(1, all.length)];
        if (!slot?.peer) return this.skip(f, 'no process to cut off');
        this.count(f, slot.name, { forMs: f.durationMs });
        this.hold(slot, f.durationMs + 5_000);
        slot.peer.proxy.blackhole();
        await sleep(f.durationMs);
        slot.peer.proxy.restore();
        slot.peer.proxy.dropConnections();
        return;
      }
      case 'zk-cut':
      case 'zk-partition': {
        // A process cut off from every ZooKeeper server: briefly (it must ride through, cancelling nothing)
        // or past its session timeout (its session expires: it rejoins with a new one, never exits).
        const all = [
          ...this.candidates('compactor'),
          ...this.candidates('tserver'),
          ...this.candidates('manager'),
        ];
        const slot = all[f.target % Math.max(1, all.length)];
        if (!slot?.zkProxies) return this.skip(f, 'no process to cut off');
        this.count(f, slot.name, { forMs: f.durationMs });
        this.hold(slot, f.durationMs + 2 * session + 10_000);
        for (const p of slot.zkProxies) p.blackhole();
        await sleep(f.durationMs);
        for (const p of slot.zkProxies) {
          p.restore();
          p.dropConnections(); // what was swallowed meanwhile left the streams broken: start them afresh
        }
        return;
      }
      case 'table-split':
      case 'table-merge':
      case 'tserver-drain':
      case 'tserver-join':
      case 'table-offline':
      case 'table-delete':
      case 'bulk-import':
      case 'compactor-sick':
        return elasticFault(
          {
            cluster: this.cluster,
            log: this.log,
            count: (target, detail) => this.count(f, target, detail),
            skip: (why) => this.skip(f, why),
            tservers: () => this.candidates('tserver'),
            hold: (slot, ms) => this.hold(slot, ms),
            unhold: (slot) => this.held.delete(slot.name),
            fence: (table) => this.fence(table),
            bulkImport: (table, pick) => this.bulkImport(table, pick),
            sickParked: this.sickParked,
          },
          f,
        );
      case 'zk-leader-kill':
      case 'zk-follower-kill': {
        const ensemble = this.cluster.ensemble;
        const leader = await ensemble.leader();
        const others = ensemble.members.map((m) => m.id).filter((id) => id !== leader);
        const id = f.kind === 'zk-leader-kill' ? leader : others[f.target % others.length]!;
        this.count(f, `zookeeper-${id}`, { downForMs: f.durationMs });
        await ensemble.kill(id);
        await sleep(f.durationMs);
        await ensemble.restart(id);
        return;
      }
    }
  }

  /**
   * Whether the compactor node is gone; undefined when ZooKeeper could not say within half a second (the
   * process stays stopped meanwhile: no longer, or the pause would outlast its hold).
   */
  private async nodeGone(node: string): Promise<boolean | undefined> {
    const answer = this.cluster.session.exists(node).then(
      (stat) => stat === null,
      () => undefined,
    );
    return Promise.race([answer, sleep(500).then(() => undefined)]);
  }

  /** kill -9 (restarted later), or a pause: a zombie past the session timeout, or a short one. */
  private async stopOrPause(f: ScheduledFault, slot: Slot, session: number): Promise<void> {
    const proc = slot.proc!;
    if (f.kind.endsWith('-kill')) {
      this.count(f, slot.name);
      this.hold(slot, f.restartAfterMs + 5_000);
      slot.expect = { codes: [], signals: ['SIGKILL'], until: Infinity, why: 'kill -9' };
      slot.restartAfterMs = f.restartAfterMs;
      proc.kill();
      return;
    }
    // A zombie's session expires while it is paused: it drops what it did under it and joins again with a
    // new session, without exiting (an exit would be unexpected).
    this.count(f, slot.name, { pauseMs: f.durationMs });
    this.hold(slot, f.durationMs + 2 * session + 10_000);
    proc.pause();
    await sleep(f.durationMs);
    proc.resume();
  }

  private async recreateQueue(queue: string): Promise<void> {
    for (;;) {
      try {
        await this.cluster.cli([
          'admin',
          'queue',
          'create',
          queue,
          '--bins',
          String(this.queueBins[queue] ?? 4),
          '--if-not-exists',
        ]);
        return;
      } catch (err) {
        this.log.event('queue-create-retry', { queue, err: String(err).slice(0, 300) });
        await sleep(1_000);
      }
    }
  }
}
