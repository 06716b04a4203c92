/**
 * The chaos run's faults of elastic tablets (faults.ts carries out the schedule and hands these here).
 */
import { sleep } from '../src/retry.js';
import { allTablets } from '../test/support/meta-rows.js';
import type { ChaosCluster, Slot } from './cluster.js';
import type { ChaosLog } from './report.js';
import type { ScheduledFault } from './schedule.js';

/** What these faults need of the injector. */
export interface ElasticContext {
  cluster: ChaosCluster;
  log: ChaosLog;
  /** Counts the fault as carried out on `target` (and logs it). */
  count(target: string, detail?: Record<string, unknown>): void;
  /** Logs the fault as skipped, and why. */
  skip(why: string): void;
  /** Tablet servers a fault may take now. */
  tservers(): Slot[];
  hold(slot: Slot, ms: number): void;
  unhold(slot: Slot): void;
  /** Holds the workload's writes to a table until the function it resolves is called. */
  fence(table: string): Promise<() => void>;
  /** Imports a file of new rows into a workload table, run again until it succeeds; resolves its entries. */
  bulkImport(table: string, pick: number): Promise<number>;
  /** Jobs parked with failures on the sick compactor alone (each a violation). */
  sickParked: string[];
}

/**
 * The faults of elastic tablets: an admin split of a table at a row of the workload's, an admin merge of
 * two neighbouring tablets, a drain of a tablet server for a while, a tablet server that joins for a
 * while and leaves with SIGTERM (handing its tablets over), a table taken offline for a few seconds (behind
 * the workload's fence on it: no write of it is in flight, none starts until it is back), a scratch table
 * written to, compacting, and deleted a few seconds later, a bulk import of new rows into a workload table,
 * and a sick compactor whose object-store writes all fail (it must park no job). A refusal (a merge blocked by a user
 * compaction pending on part of its range, a split of a tablet being merged) is logged, not a fault.
 */
export async function elasticFault(ctx: ElasticContext, f: ScheduledFault): Promise<void> {
  const tables = ['events', 'versioned', 'bulky', 'aged', 'counters'];
  const table = tables[f.target % tables.length]!;
  const refused = (what: string) => (err: unknown) =>
    ctx.log.event('elastic-refused', { fault: f.kind, what, err: String(err).slice(0, 300) });
  switch (f.kind) {
    case 'table-split': {
      // A row as the workload writes them: a letter and three digits.
      const row = `${String.fromCharCode(97 + (f.pick % 26))}${String(f.pick % 1000).padStart(3, '0')}`;
      ctx.count(table, { row });
      await ctx.cluster.cli(['admin', 'table', 'split', table, row]).catch(refused(`${table} at ${row}`));
      return;
    }
    case 'table-merge': {
      const tablets = await ctx.cluster.client.tablets(table);
      if (tablets.length < 3) return ctx.skip(`${table} has ${tablets.length} tablets`);
      const i = f.pick % (tablets.length - 1);
      const [a, b] = [tablets[i]!, tablets[i + 1]!];
      ctx.count(table, { from: a.tablet, to: b.tablet });
      const args = ['admin', 'table', 'merge', table, '--start', `0x${a.endRowHex!}`];
      if (b.endRowHex !== null) args.push('--end', `0x${b.endRowHex}`);
      await ctx.cluster.cli(args).catch(refused(`${table} from ${a.tablet} to ${b.tablet}`));
      return;
    }
    case 'tserver-drain': {
      const slots = ctx.tservers().filter((s) => s.identity && !s.optional);
      if (slots.length === 0) return ctx.skip('no tablet server to drain');
      const slot = slots[f.target % slots.length]!;
      ctx.count(slot.name, { forMs: f.durationMs });
      await ctx.cluster.cli(['admin', 'tserver', 'drain', slot.identity!]).catch(refused(slot.name));
      await sleep(f.durationMs);
      // Undone whatever happened meanwhile (a drain holds for the address, across restarts).
      for (;;) {
        const done = await ctx.cluster.cli(['admin', 'tserver', 'undrain', slot.identity!]).then(
          () => true,
          () => false,
        );
        if (done) return;
        await sleep(1_000);
      }
    }
    case 'table-offline': {
      const open = await ctx.fence(table);
      try {
        const forMs = Math.min(f.durationMs, 5_000);
        ctx.count(table, { forMs });
        await ctx.cluster.cli(['admin', 'table', 'offline', table]).catch(refused(`${table} offline`));
        await sleep(forMs);
        // Back whatever happened meanwhile (a manager failover: the request is repeated until answered).
        for (;;) {
          const done = await ctx.cluster.cli(['admin', 'table', 'online', table]).then(
            () => true,
            () => false,
          );
          if (done) return;
          await sleep(1_000);
        }
      } finally {
        open();
      }
    }
    case 'table-delete': {
      const name = `scratch${f.pick % 100_000}`;
      const made = await ctx.cluster
        .cli([
          'admin',
          'table',
          'create',
          name,
          '--splits',
          'm',
          '--config',
          'queues=small:16384,large',
          '--config',
          'ratio=1.5',
        ])
        .then(
          () => true,
          (err: unknown) => (refused(`create ${name}`)(err), false),
        );
      if (!made) return ctx.skip(`${name} could not be created`);
      ctx.count(name, { forMs: Math.min(f.durationMs, 3_000) });
      // Files in both tablets, enough for compactions to be queued and running when it goes.
      for (let ts = 1; ts <= 4; ts++) {
        const entries = Array.from({ length: 200 }, (_, i) => ({
          row: `${String.fromCharCode(97 + (i % 26))}${String(i).padStart(4, '0')}`,
          ts,
          value: `v${ts}-${i}`,
        }));
        await ctx.cluster.client.ingest(name, entries).catch(refused(`ingest into ${name}`));
      }
      await sleep(Math.min(f.durationMs, 3_000));
      // Deleted whatever happens meanwhile (a failover: the request is repeated until it is answered).
      for (;;) {
        const r = await ctx.cluster.cli(['admin', 'table', 'delete', name]).then(
          () => 'deleted',
          (err: unknown) => (/no table named/.test(String(err)) ? 'gone' : 'again'),
        );
        if (r !== 'again') return;
        await sleep(1_000);
      }
    }
    case 'bulk-import': {
      ctx.count(table, { pick: f.pick });
      const entries = await ctx.bulkImport(table, f.pick);
      ctx.log.event('bulk-imported', { table, pick: f.pick, entries });
      return;
    }
    case 'compactor-sick': {
      const slot = ctx.cluster.slots.find((s) => s.sick);
      if (!slot || !slot.held || slot.proc) return ctx.skip('the sick compactor is up already');
      const forMs = Math.max(f.durationMs, 15_000);
      ctx.count(slot.name, { forMs });
      ctx.hold(slot, forMs + 60_000);
      // It fails every job it takes, exits 5 after ten in a row and is started again, as an orchestrator
      // would; the identities it had are what the failure records name.
      ctx.cluster.release(slot);
      const identities = new Set<string>();
      for (const until = Date.now() + forMs; Date.now() < until; await sleep(200))
        if (slot.identity) identities.add(slot.identity);
      slot.held = true;
      // (Read through a function: the slot's process changes under this fault.)
      const proc = ((s: Slot) => s.proc)(slot);
      if (proc) {
        slot.expect = { codes: [0], signals: [], until: Infinity, why: 'SIGTERM: the sick compactor leaves' };
        await proc.terminate(30_000).catch(() => proc.kill());
      }
      ctx.unhold(slot);
      // Its failures never park a job: a job is parked only after failing on two compactors.
      for (const t of await allTablets(ctx.cluster.meta))
        for (const [key, failure] of t.failures)
          if (failure.parked && (failure.failedOn ?? []).every((c) => identities.has(c))) {
            ctx.sickParked.push(`${t.row} ${key}`);
            ctx.log.event(
              'sick-parked',
              { tablet: t.row, key, failure },
              `VIOLATION: ${t.row} parked by the sick compactor alone`,
            );
          }
      return;
    }
    case 'tserver-join': {
      const slot = ctx.cluster.slots.find((s) => s.optional && s.role === 'tserver');
      if (!slot || !slot.held || slot.proc) return ctx.skip('the extra tablet server is up already');
      ctx.count(slot.name, { forMs: f.durationMs });
      ctx.hold(slot, f.durationMs + 60_000);
      ctx.cluster.release(slot);
      // (Read through a function: the slot's process changes under this fault.)
      const procOf = (s: Slot) => s.proc;
      const until = Date.now() + 60_000;
      while (!procOf(slot)?.running && Date.now() < until) await sleep(200);
      await sleep(f.durationMs);
      // It leaves in order: it hands its tablets over, then exits 0.
      slot.held = true;
      const proc = procOf(slot);
      if (proc) {
        slot.expect = { codes: [0], signals: [], until: Infinity, why: 'SIGTERM: leaving the cluster' };
        await proc.terminate(60_000).catch(() => proc.kill());
      }
      ctx.unhold(slot);
      return;
    }
  }
}
