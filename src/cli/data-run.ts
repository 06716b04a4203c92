/**
 * What `excompact ingest` and `excompact scan` do (data.ts defines the commands): NDJSON lines parsed and
 * checked against the tablet servers' own limits, written in batches the tablets apply once, read back.
 */
import { isUtf8 } from 'node:buffer';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import { ulid } from 'ulid';
import { z } from 'zod';
import { toWireEntry, type ClientEntry } from '../client/client.js';
import { ExcError } from '../errors.js';
import { INGEST_DEDUPE_MS } from '../meta/ingest-ids.js';
import { parseRow } from '../row-text.js';
import { wireEntrySchema } from '../rpc/entries.js';
import { utf8Bytes } from '../validate.js';
import { withCluster } from './connect.js';
import { progressBar as bar } from './format.js';
import { ndjsonLines } from './ndjson.js';

const lineSchema = z.strictObject({
  row: z.string().min(1),
  cf: z.string().optional(),
  cq: z.string().optional(),
  ts: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  value: z.string().optional(),
  delete: z.boolean().optional(),
  encoding: z.enum(['utf8', 'base64']).optional(),
});

function parseLine(text: string, n: number): ClientEntry | undefined {
  if (text.trim() === '') return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ExcError('BAD_REQUEST', `line ${n}: not JSON: ${(err as Error).message}`);
  }
  const parsed = lineSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ExcError('BAD_REQUEST', `line ${n}: ${issue.path.join('.') || 'entry'}: ${issue.message}`);
  }
  const l = parsed.data;
  const enc = l.encoding ?? 'utf8';
  const bytes = (s: string | undefined, field: string): Buffer | undefined => {
    if (s === undefined) return undefined;
    if (enc === 'utf8') return utf8Bytes(s, `line ${n}: ${field}`);
    // Only the one spelling of each byte string: Node's decoder skips what is not base64 and stops at
    // the first "=", so "ab!c" or "YQ==YQ==" would store other bytes than meant, with nothing said.
    const decoded = Buffer.from(s, 'base64');
    if (decoded.toString('base64') !== s)
      throw new ExcError('BAD_REQUEST', `line ${n}: ${field}: not base64 (with = padding)`);
    return decoded;
  };
  const row = bytes(l.row, 'row')!;
  if (row.length === 0) throw new ExcError('BAD_REQUEST', `line ${n}: row: must not be empty`);
  return {
    row,
    ...(l.cf === undefined ? {} : { cf: bytes(l.cf, 'cf') }),
    ...(l.cq === undefined ? {} : { cq: bytes(l.cq, 'cq') }),
    ...(l.ts === undefined ? {} : { ts: l.ts }),
    ...(l.value === undefined ? {} : { value: bytes(l.value, 'value') }),
    ...(l.delete ? { delete: true } : {}),
  };
}

/**
 * Refuses an entry that tablet servers would refuse (a field over its size limit), checked against their
 * own schema: found while writing, it would fail a batch after earlier ones were written.
 */
function checkLimits(e: ClientEntry, n: number): void {
  const parsed = wireEntrySchema.safeParse(toWireEntry(e));
  if (!parsed.success) throw new ExcError('BAD_REQUEST', `line ${n}: ${parsed.error.issues[0]!.message}`);
}

export async function* readEntries(path: string): AsyncGenerator<{ line: number; entry: ClientEntry }> {
  for await (const { line, text } of ndjsonLines(path)) {
    const entry = parseLine(text, line);
    if (entry) yield { line, entry };
  }
}

export interface IngestFlags {
  batchId?: string;
  skipBatches?: number;
}

/**
 * Validates the whole input, then writes it under one batch id. A failure part way says how much the
 * tablets acknowledged and how to finish: the same input with the same --batch-id, skipping the batches
 * acknowledged (--skip-batches: tablets remember a batch only 15 minutes after applying it, and a long
 * run's first batches may be older than that), the one in flight recognised if it was applied. Input
 * from stdin is kept for that.
 */
export async function runIngest(
  table: string,
  file: string | undefined,
  flags: IngestFlags,
  cmd: Command,
): Promise<void> {
  let spool: string | undefined;
  let path = file;
  if (!path || path === '-') {
    spool = mkdtempSync(join(tmpdir(), 'excompact-ingest-'));
    path = join(spool, 'stdin.ndjson');
    await pipeline(process.stdin, createWriteStream(path));
  }
  const input = path;
  let keepSpool = false;
  try {
    // Pass 1: validate everything, write nothing.
    let total = 0;
    for await (const { line, entry } of readEntries(input)) {
      checkLimits(entry, line);
      total++;
    }
    if (total === 0) throw new ExcError('BAD_REQUEST', 'no entries in the input');
    // Pass 2: write.
    if (flags.skipBatches !== undefined && flags.batchId === undefined)
      throw new ExcError('BAD_REQUEST', '--skip-batches finishes an earlier ingest: give its --batch-id too');
    const batchId = flags.batchId ?? ulid();
    const skipped = flags.skipBatches ?? 0;
    const acked = { batches: 0, entries: 0, repeated: 0 };
    try {
      await withCluster(cmd, async (c) => {
        const progress = progressBar(total);
        let done = 0;
        const counted = (async function* () {
          for await (const { entry } of readEntries(input)) {
            done++;
            progress(done);
            yield entry;
          }
        })();
        const written = await c.client.ingest(table, counted, {
          requestId: batchId,
          skipBatches: skipped,
          onBatch: (b) => {
            acked.batches++;
            acked.entries += b.entries;
            if (b.duplicate) acked.repeated += b.entries;
          },
        });
        progress(done, true);
        const notSent =
          skipped > 0 ? `; ${total - written} in the first ${skipped} batches were not sent again` : '';
        const repeated =
          acked.repeated > 0 ? `; ${acked.repeated} were already written by an earlier attempt` : '';
        process.stdout.write(
          `ingested ${written} entries into ${table} (batch id ${batchId}${notSent}${repeated})\n`,
        );
      });
    } catch (err) {
      keepSpool = spool !== undefined;
      const minutes = Math.round(INGEST_DEDUPE_MS / 60_000);
      process.stderr.write(
        `excompact: ingest stopped: ${acked.entries} of ${total} entries acknowledged (${acked.batches} batches).\n` +
          `  To write the rest exactly once, run within ${minutes} minutes:\n` +
          `    excompact ingest ${table} ${input} --batch-id ${batchId} --skip-batches ${skipped + acked.batches}\n` +
          `  (the batches acknowledged are not sent again; one applied but not acknowledged is recognised)\n`,
      );
      throw err;
    }
  } finally {
    if (spool && !keepSpool) rmSync(spool, { recursive: true, force: true });
  }
}

export async function runScan(
  table: string,
  opts: { start?: string; end?: string; limit?: number },
  cmd: Command,
): Promise<void> {
  // Typed as text or 0x-hex; checked before anything is asked of the cluster.
  const start = opts.start === undefined ? undefined : parseRow(opts.start, '--start');
  const end = opts.end === undefined ? undefined : parseRow(opts.end, '--end');
  await withCluster(cmd, async (c) => {
    for await (const e of c.client.scan(table, { start, end, limit: opts.limit })) {
      const text = [e.row, e.cf, e.cq, e.value].every(isUtf8);
      const enc = text ? 'utf8' : 'base64';
      const line = JSON.stringify({
        row: e.row.toString(enc),
        cf: e.cf.toString(enc),
        cq: e.cq.toString(enc),
        ts: e.ts,
        value: e.value.toString(enc),
        ...(text ? {} : { encoding: 'base64' }),
      });
      if (!process.stdout.write(`${line}\n`)) await new Promise((r) => process.stdout.once('drain', r));
    }
  });
}

/** A progress line on a terminal (stderr), silent otherwise. */
function progressBar(total: number): (done: number, final?: boolean) => void {
  if (!process.stderr.isTTY) return () => undefined;
  const start = Date.now();
  let last = 0;
  return (done, final = false) => {
    const now = Date.now();
    if (!final && now - last < 200) return;
    last = now;
    const rate = Math.round(done / Math.max(0.001, (now - start) / 1000));
    process.stderr.write(`\r${bar(done / total)} ${done}/${total} entries, ${rate}/s`);
    if (final) process.stderr.write('\n');
  };
}
