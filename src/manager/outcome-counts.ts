/**
 * How many compactions ended, and how — by queue, kind (system or user), outcome (committed or cancelled)
 * and reason — counted from durable rows, so the figures exported as metrics survive any process's
 * restart and a manager failover:
 *
 *   ~stats:outcomes  counts → JSON { "<queueId>|<kind>|<outcome>|<reason>": n }
 *
 * The total for a key is that row's figure (outcome rows already trimmed, folded into it by the same
 * mutation that deleted them) plus the outcome rows (`~done:<ecid>`) still kept. The active manager reads
 * both when it takes over and then counts each outcome row as its mutation is applied (every write goes
 * through its group commit). An outcome row is written once (its mutation is conditional on its absence),
 * so each is counted once; the ecids counted are remembered until their rows are past retention, which
 * keeps one row seen both by the first read and by a batch settling just after it from counting twice.
 */
import { Counter, type Registry } from 'prom-client';
import { ulidTime } from '../ids.js';
import { COL_OUTCOME, DONE_PREFIX, parseOutcome, type Outcome } from '../meta/outcomes.js';
import { scanAll, type MetaBackend, type MetaReader } from '../meta/backend.js';
import type { Mutation } from '../meta/types.js';
import type { CommitQueue } from './commit-queue.js';

export const STATS_ROW = '~stats:outcomes';
export const COL_COUNTS = 'counts';

export interface OutcomeKey {
  queueId: string;
  kind: string;
  outcome: string;
  reason: string;
}

const keyOf = (o: Pick<Outcome, 'queueId' | 'kind' | 'outcome' | 'reason'>): string =>
  `${o.queueId}|${o.kind}|${o.outcome}|${o.outcome === 'committed' ? '' : (o.reason ?? 'unknown')}`;

export function parseKey(key: string): OutcomeKey {
  const [queueId = '', kind = '', outcome = '', reason = ''] = key.split('|');
  return { queueId, kind, outcome, reason };
}

async function readFolded(
  store: MetaReader,
): Promise<{ raw: string | undefined; counts: Record<string, number> }> {
  const raw = await store.get(STATS_ROW, COL_COUNTS);
  if (raw === undefined) return { raw, counts: {} };
  try {
    const parsed = JSON.parse(raw) as unknown;
    return { raw, counts: parsed && typeof parsed === 'object' ? (parsed as Record<string, number>) : {} };
  } catch {
    return { raw, counts: {} };
  }
}

export class OutcomeCounts {
  private readonly counts = new Map<string, number>();
  private readonly counted = new Set<string>();
  private unlisten: (() => void) | undefined;
  private prunedAt = Date.now();

  constructor(
    private readonly store: MetaBackend,
    private readonly commits: CommitQueue,
    private readonly retentionMs: number,
  ) {}

  /** Reads the durable figures and starts counting what is applied from now on. */
  async start(): Promise<void> {
    // Listening first: a row applied from here on is seen, by the read or by the listener (or both).
    this.unlisten = this.commits.onApplied(({ puts }) => {
      for (const p of puts)
        if (p.row.startsWith(DONE_PREFIX) && p.col === COL_OUTCOME) this.count(p.row, p.value);
    });
    for (const [key, n] of Object.entries((await readFolded(this.store)).counts)) this.add(key, n);
    for await (const cell of scanAll(this.store, { prefix: DONE_PREFIX })) this.count(cell.row, cell.value);
  }

  stop(): void {
    this.unlisten?.();
  }

  /** Totals by key (see {@link parseKey}). */
  totals(): Map<string, number> {
    this.prune();
    return new Map(this.counts);
  }

  /**
   * The mutation that trims `rows` (outcome rows past retention) and folds them into the durable totals
   * in one step, conditional on the totals being what was read (only the active manager's collector
   * writes them; a refused fold is simply tried again next cycle).
   */
  async foldMutation(rows: readonly string[]): Promise<Mutation> {
    const { raw, counts } = await readFolded(this.store);
    const next = { ...counts };
    for (const row of rows) {
      const o = parseOutcome((await this.store.get(row, COL_OUTCOME)) ?? '');
      if (o) next[keyOf(o)] = (next[keyOf(o)] ?? 0) + 1;
    }
    return {
      conditions: [
        raw === undefined
          ? { op: 'absent', row: STATS_ROW, col: COL_COUNTS }
          : { op: 'equals', row: STATS_ROW, col: COL_COUNTS, value: raw },
      ],
      puts: [{ row: STATS_ROW, col: COL_COUNTS, value: JSON.stringify(next) }],
      deleteRows: [...rows],
    };
  }

  private count(row: string, value: string): void {
    const ecid = row.slice(DONE_PREFIX.length);
    if (this.counted.has(ecid)) return;
    const o = parseOutcome(value);
    if (!o) return;
    this.counted.add(ecid);
    this.add(keyOf(o), 1);
  }

  private add(key: string, n: number): void {
    this.counts.set(key, (this.counts.get(key) ?? 0) + n);
  }

  /** Forgets ecids whose rows are past retention (trimmed, or about to be: never written again). */
  private prune(): void {
    const now = Date.now();
    if (now - this.prunedAt < 3_600_000) return;
    this.prunedAt = now;
    const cutoff = now - this.retentionMs - 3_600_000;
    for (const ecid of this.counted) if (ulidTime(ecid) < cutoff) this.counted.delete(ecid);
  }
}

/**
 * `excompact_compactions_ended_total{queue,kind,outcome,reason}`: the durable totals, on the active
 * manager (a standby exports none). A counter that resumes where it was after a restart or a failover:
 * its value is read from the store, never accumulated in the process. `names` (queue id → name, as the
 * queue metrics read it: see managerFigures) labels each queue by its name; the totals of a queue no longer
 * in it (deleted) are left out, so its series end with it, and nothing is exported before it was read.
 */
export function registerOutcomeMetrics(
  registry: Registry,
  read: () => OutcomeCounts | undefined,
  names: () => Promise<Map<string, string> | undefined>,
): void {
  new Counter({
    name: 'excompact_compactions_ended_total',
    help: 'Compactions ended, by queue, kind, outcome and reason (durable: survives restarts)',
    labelNames: ['queue', 'kind', 'outcome', 'reason'],
    registers: [registry],
    async collect() {
      const queueNames = await names().catch(() => undefined);
      this.reset();
      const counts = read();
      if (!counts || !queueNames) return;
      for (const [key, n] of counts.totals()) {
        const { queueId, kind, outcome, reason } = parseKey(key);
        const queue = queueNames.get(queueId);
        if (queue !== undefined) this.inc({ queue, kind, outcome, reason }, n);
      }
    },
  });
}
