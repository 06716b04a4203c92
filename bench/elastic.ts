/**
 * bench/elastic: what elastic tablets cost — with real processes.
 *
 *   npx tsx bench/elastic.ts [--splits 30] [--merges 15] [--seconds 60] [--json]
 *
 * A manager, three tablet servers, a table loaded with 100,000 entries, and from this process (two
 * throttled compactors, whose jobs last seconds, run for (d) only: (a)–(c) time the changes themselves):
 *
 * (a) split: `POST /v1/tables/:name/split` at a fresh row → a scan of the new daughter answered by its
 *     host, p50/p99, against a plain metadata write through the manager (one put) in the same run;
 * (b) merge: `POST /v1/tables/:name/merge` of two neighbours (on different servers when the balancer put
 *     them there) → a scan of the merged tablet answered, p50/p99, against the same write;
 * (c) join: a fourth tablet server registers → it holds its share of every table (each table's tablets
 *     within one of each other per server), against a table's creation → every tablet of it hosted (one
 *     assignment pass and its loads);
 * (d) discarded work: `--seconds` of ingest with compactions running, a split, a merge or a move (a drain
 *     of a server for 2 s) every 2 s, each aimed at a tablet with a compaction running when there is one:
 *     bytes of compaction output thrown away because of them (written by reservations a merge cancelled
 *     at the end of its wait; for splits and moves, by every other cancel of the run, since nothing else
 *     is done to it), against the bytes compacted in the run, and
 *     against what cancelling every compaction running on a tablet that split, merged or moved — as
 *     Accumulo does — would have thrown away at that moment (the bytes those had written so far: a lower
 *     bound). Target: 0 for moves, and below Accumulo's rule for splits and merges.
 *
 * `--json` prints one JSON object instead of the tables.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ExcClient } from '../src/client/client.js';
import { silentLogger } from '../src/log.js';
import { DONE_PREFIX, parseOutcome } from '../src/meta/outcomes.js';
import type { RunningCompaction, TabletView } from '../src/meta/views.js';
import { sleep } from '../src/retry.js';
import { fmt, percentile, printRows, startBenchCluster, type BenchCluster } from './lib.js';

const { values } = parseArgs({
  options: {
    splits: { type: 'string', default: '30' },
    merges: { type: 'string', default: '15' },
    seconds: { type: 'string', default: '60' },
    json: { type: 'boolean', default: false },
  },
});
const SPLITS = Number(values.splits);
const MERGES = Number(values.merges);
const SECONDS = Number(values.seconds);
const command = `npx tsx bench/elastic.ts --splits ${SPLITS} --merges ${MERGES} --seconds ${SECONDS}`;
const say = (text: string): void => void process.stderr.write(`${text}\n`);
const TABLE = 'bench';
const rowOf = (n: number): string => `r${String(n).padStart(6, '0')}`;

const cluster = await startBenchCluster({
  sessionTimeoutMs: 4_000,
  env: { EXC_MERGE_WAIT_MS: '5000', EXC_TSERVER_HANDOVER_MS: '10000' },
});
try {
  const result = await run(cluster);
  if (values.json) process.stdout.write(`${JSON.stringify(result)}\n`);
  else report(result);
} finally {
  await cluster.stop();
}

async function run(c: BenchCluster) {
  const logsDir = c.procs.logDir;
  await c.start('manager', ['manager'], 'manager active');
  for (const i of [1, 2, 3]) await c.start(`tserver-${i}`, ['tserver'], 'tablet server ready');
  const meta = c.meta;
  await meta.call('POST', '/v1/queues', { name: 'q', bins: 4 });
  await meta.call('POST', '/v1/tables', {
    name: TABLE,
    splits: [rowOf(50_000)],
    config: { queues: [{ queue: 'q' }], compression: 'none' },
  });
  const client = new ExcClient({ meta, secret: c.secret, logger: silentLogger(), moveTimeoutMs: 60_000 });
  while (!(await client.tablets(TABLE)).every((t) => t.loc)) await sleep(100);
  say('loading 100,000 entries');
  for (let b = 0; b < 20; b++) {
    await client.ingest(
      TABLE,
      Array.from({ length: 5_000 }, (_, i) => ({
        row: rowOf(((b * 5_000 + i) * 7_919) % 100_000),
        value: 'x'.repeat(60),
      })),
    );
  }

  const write = async (): Promise<number> => {
    const t0 = performance.now();
    await meta.mutate([{ puts: [{ row: '~bench:write', col: 'n', value: String(t0) }] }]);
    return performance.now() - t0;
  };
  /** A one-entry scan of `view`'s tablet, by its host, naming what the client expects of it. */
  const serves = async (view: TabletView): Promise<void> => {
    await c.client(`http://${view.loc!.server}`).post('/v1/scan', {
      tablet: view.tablet,
      prevEndRowHex: view.prevEndRowHex,
      limit: 1,
    });
  };

  // (a) Splits at fresh rows, each against a metadata write.
  say(`(a) ${SPLITS} splits`);
  const splitMs: number[] = [];
  const writeMs: number[] = [];
  for (let i = 0; i < SPLITS; i++) {
    const row = rowOf(Math.round(((i + 0.5) * 100_000) / SPLITS) + 1);
    writeMs.push(await write());
    const t0 = performance.now();
    await meta.call('POST', `/v1/tables/${TABLE}/split`, { rows: [row] });
    const daughter = (await client.tablets(TABLE)).find(
      (t) => t.endRowHex === Buffer.from(row).toString('hex'),
    )!;
    await serves(daughter);
    splitMs.push(performance.now() - t0);
  }
  await sleep(3_000); // the balancer spreads the daughters

  // (b) Merges of neighbours, each against a metadata write.
  say(`(b) ${MERGES} merges`);
  const mergeMs: number[] = [];
  /** Of it: gathering the two tablets on one server (a move when they were apart), and the merge there. */
  const gatherMs: number[] = [];
  const mergeOnlyMs: number[] = [];
  for (let i = 0; i < MERGES; i++) {
    const tablets = await client.tablets(TABLE);
    const at = (i * 7) % (tablets.length - 2);
    const [a, b] = [tablets[at]!, tablets[at + 1]!];
    writeMs.push(await write());
    const t0 = performance.now();
    const answer = await meta.call<{ gatherMs: number; mergeMs: number }>(
      'POST',
      `/v1/tables/${TABLE}/merge`,
      { startRowHex: a.endRowHex, endRowHex: b.endRowHex },
    );
    const merged = (await client.tablets(TABLE)).find((t) => t.tablet === b.tablet)!;
    await serves(merged);
    mergeMs.push(performance.now() - t0);
    gatherMs.push(answer.gatherMs);
    mergeOnlyMs.push(answer.mergeMs);
  }

  // (c) A server joins; its share against one assignment of a new table's tablets.
  say('(c) a fourth tablet server joins');
  const t0 = performance.now();
  await meta.call('POST', '/v1/tables', { name: 'other', splits: ['b', 'd', 'f', 'h', 'j', 'l'] });
  while (!(await client.tablets('other')).every((t) => t.loc)) await sleep(20);
  const assignMs = performance.now() - t0;
  await sleep(3_000);
  const joiner = await c.start('tserver-4', ['tserver'], 'tablet server ready');
  const joinedAt = performance.now();
  const name = (joiner.lines.find((l) => l.msg === 'tablet server ready')!.name as string) ?? '';
  for (;;) {
    const { tservers } = await meta.call<{ tservers: { server: string }[] }>('GET', '/v1/tservers');
    let even = true;
    for (const table of [TABLE, 'other']) {
      const counts = new Map(tservers.map((t) => [t.server, 0]));
      for (const v of await client.tablets(table))
        if (v.loc) counts.set(v.loc.server, (counts.get(v.loc.server) ?? 0) + 1);
      const n = [...counts.values()];
      const share = Math.floor(n.reduce((a, b) => a + b, 0) / n.length);
      if (Math.max(...n) - Math.min(...n) > 1 || (counts.get(name) ?? 0) < share) even = false;
    }
    if (even) break;
    await sleep(50);
  }
  const joinMs = performance.now() - joinedAt;

  // (d) Discarded work under splits, merges and moves.
  say(`(d) ${SECONDS} s of ingest and compactions with a split, a merge or a move every 2 s`);
  // Compactors only now: (a)–(c) measure the changes themselves, with no compaction to wait for.
  for (const i of [1, 2])
    await c.start(`compactor-${i}`, ['compactor', 'q', '--throughput', '1000000'], 'compactor ready');
  let stop = false;
  // Each batch in a tenth of the rows (a tablet or two), so jobs last seconds and are often running
  // when a change comes.
  const writer = (async () => {
    for (let n = 0; !stop; n++) {
      const base = (n * 37_000) % 100_000;
      await client
        .ingest(
          TABLE,
          Array.from({ length: 2_000 }, (_, i) => ({
            row: rowOf((base + i * 5) % 100_000),
            value: 'y'.repeat(60),
          })),
        )
        .catch(() => undefined);
    }
  })();
  const since = Date.now();
  const accumulo = { split: 0, merge: 0, move: 0 };
  const ops = { split: 0, merge: 0, move: 0, onRunning: 0 };
  const running = async (): Promise<RunningCompaction[]> =>
    (await meta.call<{ running: RunningCompaction[] }>('GET', '/v1/compactions?state=running')).running;
  // What cancelling every compaction running on the tablets changed would have thrown away, as Accumulo
  // does: each job's output, in the share of its time it had run by then (worked out once its outcome is
  // known, below), and at least what it had reported written.
  const affected: {
    kind: keyof typeof accumulo;
    ecid: string;
    reservedAt: number;
    at: number;
    written: number;
  }[] = [];
  const note = (kind: keyof typeof accumulo, now: RunningCompaction[], tablets: string[]): void => {
    for (const r of now.filter((x) => tablets.includes(x.tablet)))
      affected.push({
        kind,
        ecid: r.ecid,
        reservedAt: r.reservedAt,
        at: Date.now(),
        written: r.progress?.bytesWritten ?? 0,
      });
  };
  /** The row numbers a tablet holds, (lo, hi]; rows are rowOf(n). */
  const bounds = (t: TabletView): [number, number] => [
    t.prevEndRowHex === null ? -1 : Number(Buffer.from(t.prevEndRowHex, 'hex').toString().slice(1)),
    t.endRowHex === null ? 100_000 : Number(Buffer.from(t.endRowHex, 'hex').toString().slice(1)),
  ];
  for (let i = 0; Date.now() - since < SECONDS * 1000; i++) {
    const tablets = await client.tablets(TABLE);
    const now = await running();
    const busy = new Set(now.map((r) => r.tablet));
    const kind = (['split', 'merge', 'move'] as const)[i % 3]!;
    try {
      if (kind === 'split') {
        // A tablet with a compaction running, at a row in its middle.
        const holder =
          tablets.find((t) => busy.has(t.tablet) && bounds(t)[1] - bounds(t)[0] > 2) ??
          tablets[i % tablets.length]!;
        const [lo, hi] = bounds(holder);
        if (hi - lo <= 2) throw new Error(`tablet ${holder.tablet} is too small to split`);
        if (busy.has(holder.tablet)) ops.onRunning++;
        note('split', now, [holder.tablet]);
        await meta.call('POST', `/v1/tables/${TABLE}/split`, { rows: [rowOf(Math.floor((lo + hi) / 2))] });
      } else if (kind === 'merge' && tablets.length >= 3) {
        // Two neighbours, one of them with a compaction running.
        let at = tablets.findIndex((t, j) => j < tablets.length - 1 && busy.has(t.tablet));
        if (at === -1) at = i % (tablets.length - 1);
        const [a, b] = [tablets[at]!, tablets[at + 1]!];
        if (busy.has(a.tablet) || busy.has(b.tablet)) ops.onRunning++;
        note('merge', now, [a.tablet, b.tablet]);
        await meta.call('POST', `/v1/tables/${TABLE}/merge`, {
          startRowHex: a.endRowHex,
          ...(b.endRowHex ? { endRowHex: b.endRowHex } : {}),
        });
      } else if (kind === 'move') {
        // Drained for 2 s: the server hosting the most running compactions.
        const { tservers } = await meta.call<{ tservers: { server: string }[] }>('GET', '/v1/tservers');
        const on = (server: string) => tablets.filter((t) => t.loc?.server === server).map((t) => t.tablet);
        const server = tservers
          .map((t) => t.server)
          .sort(
            (x, y) => on(y).filter((t) => busy.has(t)).length - on(x).filter((t) => busy.has(t)).length,
          )[0]!;
        if (on(server).some((t) => busy.has(t))) ops.onRunning++;
        note('move', now, on(server));
        await meta.call('POST', `/v1/tservers/${encodeURIComponent(server)}/drain`, {});
        await sleep(2_000);
        await meta.call('POST', `/v1/tservers/${encodeURIComponent(server)}/drain`, { undo: true });
      }
      ops[kind]++;
    } catch (err) {
      say(`  ${kind} refused: ${String(err).slice(0, 200)}`);
    }
    await sleep(2_000);
  }
  stop = true;
  await writer;
  await sleep(5_000);

  // What was thrown away, from the tablet servers' logs; what was compacted, from the outcome rows.
  let discardedMerge = 0;
  let cancelledByMerge = 0;
  // Splits and moves cancel nothing by design; any other cancel of the run (nothing else is done to it)
  // is counted against them.
  let discardedOther = 0;
  let otherCancels = 0;
  for (const file of readdirSync(logsDir).filter((f) => f.includes('tserver') && f.endsWith('.log'))) {
    for (const raw of readFileSync(`${logsDir}/${file}`, 'utf8').split('\n')) {
      if (!raw.includes('"reservation cancelled"')) continue;
      const l = JSON.parse(raw) as { reason?: string; bytesWritten?: number; time?: string };
      if (Date.parse(l.time ?? '') < since) continue;
      if (l.reason === 'merge') {
        cancelledByMerge++;
        discardedMerge += l.bytesWritten ?? 0;
      } else {
        otherCancels++;
        discardedOther += l.bytesWritten ?? 0;
      }
    }
  }
  let compacted = 0;
  let commits = 0;
  const outcomes = new Map<string, { at: number; bytes: number }>();
  for await (const cell of meta.scanAll({ prefix: DONE_PREFIX })) {
    const o = parseOutcome(cell.value);
    if (o?.outcome === 'committed' && o.at >= since) {
      compacted += o.outputBytes ?? 0;
      commits++;
    }
    if (o?.outcome === 'committed')
      outcomes.set(cell.row.slice(DONE_PREFIX.length), { at: o.at, bytes: o.outputBytes ?? 0 });
  }
  for (const a of affected) {
    const o = outcomes.get(a.ecid);
    const done =
      o && o.at > a.reservedAt ? Math.min(1, Math.max(0, (a.at - a.reservedAt) / (o.at - a.reservedAt))) : 0;
    accumulo[a.kind] += Math.max(a.written, Math.round((o?.bytes ?? 0) * done));
  }
  return {
    command,
    split: { p50: percentile(splitMs, 50), p99: percentile(splitMs, 99), samples: splitMs.length },
    merge: {
      p50: percentile(mergeMs, 50),
      p99: percentile(mergeMs, 99),
      samples: mergeMs.length,
      gatherP50: percentile(gatherMs, 50),
      mergeP50: percentile(mergeOnlyMs, 50),
    },
    metadataWrite: { p50: percentile(writeMs, 50), p99: percentile(writeMs, 99) },
    join: { shareMs: joinMs, assignMs },
    discarded: {
      ops,
      bytesCompacted: compacted,
      commits,
      splitsAndMoves: discardedOther,
      merges: discardedMerge,
      cancelledByMerge,
      otherCancels,
      accumuloWouldDiscard: accumulo,
    },
  };
}

function report(r: Awaited<ReturnType<typeof run>>): void {
  const ms = (n: number) => `${fmt(n, 1)} ms`;
  printRows(`Elastic tablets (${r.command})`, [
    {
      figure: 'split → daughter serving, p50',
      value: ms(r.split.p50),
      baseline: `metadata write ${ms(r.metadataWrite.p50)}`,
      ratio: `${fmt(r.split.p50 / r.metadataWrite.p50, 1)}×`,
    },
    {
      figure: 'split → daughter serving, p99',
      value: ms(r.split.p99),
      baseline: `metadata write ${ms(r.metadataWrite.p99)}`,
    },
    {
      figure: 'merge → merged serving, p50',
      value: ms(r.merge.p50),
      baseline: `metadata write ${ms(r.metadataWrite.p50)}`,
      ratio: `${fmt(r.merge.p50 / r.metadataWrite.p50, 1)}×`,
    },
    {
      figure: 'merge → merged serving, p99',
      value: ms(r.merge.p99),
      baseline: `metadata write ${ms(r.metadataWrite.p99)}`,
    },
    {
      figure: 'joining server holds its share',
      value: ms(r.join.shareMs),
      baseline: `a new table hosted ${ms(r.join.assignMs)}`,
      ratio: `${fmt(r.join.shareMs / r.join.assignMs, 1)}×`,
    },
    {
      figure: `output discarded by splits and moves (${r.discarded.otherCancels} cancels)`,
      value: `${fmt(r.discarded.splitsAndMoves)} B`,
      baseline: `Accumulo's rule ${fmt(r.discarded.accumuloWouldDiscard.split + r.discarded.accumuloWouldDiscard.move)} B`,
      target: '0',
    },
    {
      figure: 'output discarded by merges',
      value: `${fmt(r.discarded.merges)} B`,
      baseline: `Accumulo's rule ${fmt(r.discarded.accumuloWouldDiscard.merge)} B`,
      target: 'below it',
    },
    {
      figure: 'bytes compacted meanwhile',
      value: `${fmt(r.discarded.bytesCompacted)} B (${r.discarded.commits} commits)`,
      baseline: `${r.discarded.ops.split} splits, ${r.discarded.ops.merge} merges, ${r.discarded.ops.move} moves; ${r.discarded.ops.onRunning} with a compaction running`,
    },
  ]);
}
