/**
 * What `excompact write-rfile` and `excompact import` do (bulk.ts defines the commands).
 *
 * Import: every file is read whole first (storage/rfile/verify.ts), so a bad one stops the import before
 * anything is uploaded; the files are then uploaded under the table's prefix with new names (a name is
 * never used twice: the collector relies on it) and sent to the tablets (client/bulk-import.ts). The
 * import's id is made of the files' contents unless given, so running the same command again after a
 * failure adds only what the tablets lack; the uploads of an attempt no tablet took are collected.
 */
import { createHash } from 'node:crypto';
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { importFiles, type ImportFile } from '../client/bulk-import.js';
import type { Compression } from '../compressions.js';
import { ExcError } from '../errors.js';
import { newFileName } from '../meta/paths.js';
import { sameEntryCell, type Entry, type FileStats } from '../storage/index.js';
import { tableOfflineError } from '../meta/views.js';
import { batchFile } from '../tserver/ingest-batch.js';
import { withCluster } from './connect.js';
import { readEntries } from './data-run.js';

export interface WriteRFileFlags {
  compression?: string;
  blockSize?: number;
}

export interface ImportFlags {
  id?: string;
  stamp?: boolean;
  waitMs?: number;
}

export async function runWriteRFile(
  output: string,
  input: string | undefined,
  flags: WriteRFileFlags,
): Promise<void> {
  const { LocalObjectStore, writeRFile } = await import('../storage/index.js');
  const now = Date.now();
  const batch = [];
  for await (const { entry: e } of readEntries(input ?? '/dev/stdin')) {
    const bytes = (v: Buffer | string | undefined) =>
      v === undefined ? Buffer.alloc(0) : Buffer.isBuffer(v) ? v : Buffer.from(v);
    batch.push({
      entry: {
        key: {
          row: bytes(e.row),
          family: bytes(e.cf),
          qualifier: bytes(e.cq),
          timestamp: e.ts ?? now,
          deleted: e.delete === true,
        },
        value: e.delete ? Buffer.alloc(0) : bytes(e.value),
      },
      stamped: e.ts === undefined,
    });
  }
  if (batch.length === 0) throw new ExcError('BAD_REQUEST', 'no entries in the input');
  // Sorted; an entry without a timestamp comes after the ones before it (as an ingest batch's do).
  const sorted = batchFile(batch);
  const path = resolve(output);
  const store = new LocalObjectStore(dirname(path));
  try {
    const summary = await writeRFile(store, basename(path), sorted, {
      ...(flags.compression ? { compression: flags.compression as Compression } : {}),
      ...(flags.blockSize ? { blockSize: flags.blockSize } : {}),
    });
    process.stdout.write(`wrote ${summary.entries} entries to ${output} (${summary.size} bytes)\n`);
  } finally {
    await store.close();
  }
}

/** A local file to import, verified. */
interface Checked {
  path: string;
  facts: Omit<ImportFile, 'name'>;
  sha256: string;
}

/** The files named: a directory stands for its *.rf files, in name order. */
function filesOf(paths: readonly string[]): string[] {
  const out: string[] = [];
  for (const p of paths) {
    const info = statSync(p, { throwIfNoEntry: false });
    if (!info) throw new ExcError('BAD_REQUEST', `${p}: no such file or directory`);
    if (!info.isDirectory()) {
      out.push(p);
      continue;
    }
    const inside = readdirSync(p)
      .filter((n) => n.endsWith('.rf'))
      .sort();
    if (inside.length === 0) throw new ExcError('BAD_REQUEST', `${p}: no .rf files in it`);
    out.push(...inside.map((n) => join(p, n)));
  }
  return out;
}

async function check(path: string): Promise<Checked> {
  const { LocalObjectStore, verifyRFile } = await import('../storage/index.js');
  const store = new LocalObjectStore(dirname(resolve(path)));
  try {
    const facts = await verifyRFile(store, basename(path)).catch((err: unknown) => {
      const message = err instanceof Error ? err.message : String(err);
      throw new ExcError('CORRUPT_FILE', `${path}: ${message}; nothing was imported`, { cause: err });
    });
    if (facts.entries === 0 || !facts.firstRow || !facts.lastRow)
      throw new ExcError('BAD_REQUEST', `${path}: holds no entries; nothing was imported`);
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) hash.update(chunk);
    return {
      path,
      sha256: hash.digest('hex'),
      facts: {
        firstRow: facts.firstRow,
        lastRow: facts.lastRow,
        entries: facts.entries,
        deletes: facts.deletes,
        ...summaryFigures(facts.stats),
        oldestTs: facts.oldestTs,
        newestTs: facts.newestTs,
      },
    };
  } finally {
    await store.close();
  }
}

export async function runImport(
  table: string,
  paths: string[],
  flags: ImportFlags,
  cmd: Command,
): Promise<void> {
  // Everything is read and checked before the cluster is asked anything.
  const checked: Checked[] = [];
  for (const p of filesOf(paths)) checked.push(await check(p));
  const importId =
    flags.id ??
    `h${createHash('sha256')
      .update([table, flags.stamp ? 'stamp' : 'keep', ...checked.map((c) => c.sha256)].join('\n'))
      .digest('hex')
      .slice(0, 40)}`;
  await withCluster(cmd, async (c) => {
    const info = await c.client.table(table);
    if (info.state === 'offline') throw tableOfflineError(table);
    const { LocalObjectStore, RFileReader, openObjectStore, writeRFile } =
      await import('../storage/index.js');
    const store = openObjectStore(c.config);
    const stamp = Date.now();
    const files: ImportFile[] = [];
    try {
      for (const f of checked) {
        const name = newFileName(info.id, 'import');
        if (!flags.stamp) {
          await store.write(name, createReadStream(f.path) as AsyncIterable<Buffer>);
          files.push({ name, ...f.facts });
          continue;
        }
        // Each cell's newest entry (the first of it in the file), at the import's time.
        const local = new LocalObjectStore(dirname(resolve(f.path)));
        try {
          const reader = await RFileReader.open(local, basename(f.path));
          const summary = await writeRFile(store, name, newestAt(reader.scan(), stamp));
          const deletes = summary.stats?.deletes ?? 0;
          files.push({
            name,
            ...f.facts,
            entries: summary.entries,
            deletes,
            ...summaryFigures(summary.stats ?? null),
            oldestTs: stamp,
            newestTs: stamp,
          });
        } finally {
          await local.close();
        }
      }
    } finally {
      await store.close();
    }
    const outcome = await importFiles(c.client, table, importId, files, {
      ...(flags.waitMs === undefined ? {} : { waitMs: flags.waitMs }),
    });
    const entries = files.reduce((n, f) => n + f.entries, 0);
    const repeated = outcome.repeated > 0 ? `; ${outcome.repeated} had it already` : '';
    process.stdout.write(
      `imported ${files.length} files (${entries} entries) into ${table}: ${outcome.tablets} tablets took them${repeated} (import id ${importId})\n`,
    );
  });
}

/** The first entry of each cell (its newest), with timestamp `ts`. */
async function* newestAt(entries: AsyncIterable<Entry>, ts: number): AsyncGenerator<Entry> {
  let last: Entry | undefined;
  for await (const e of entries) {
    if (last && sameEntryCell(last, e)) continue;
    last = e;
    yield { key: { ...e.key, timestamp: ts }, value: e.value };
  }
}

/** What a file's summary adds to an import request: key and value bytes, entries per family. */
function summaryFigures(stats: FileStats | null): Partial<ImportFile> {
  if (!stats) return {};
  const { keyBytes, valueBytes, families, otherFamilies } = stats;
  return { keyBytes, valueBytes, families, otherFamilies };
}
