/**
 * Checkpointed output: a compaction's file written as a sequence of finished parts, so that a compactor
 * that dies keeps what it wrote and the next one goes on from the last checkpoint (DESIGN.md, "Resume").
 *
 * A store that can append in place (the local store: `openAppendable`) keeps the output in one file,
 * `<output>.partial`, fsynced at each checkpoint and linked under the output's name at the end: the checkpoint names
 * that file and its length, and nothing is written twice ({@link writeAppendable}). Other stores (S3)
 * write parts: each an object of its own, written atomically by the store (a part exists complete or
 * not at all), named after the attempt's output: `<output>.part<NNNNN>`; the file is composed from them
 * at the end. Every output name is fresh (a ULID) for
 * each reservation, so an attempt only ever writes names no other attempt writes: a zombie (an attempt
 * whose job was resumed by someone else) can write parts nobody reads, never the new owner's.
 *
 * A part ends only at a checkpoint of the encoder (writer.ts: right after a data block that ends a cell),
 * and only once it holds `everyBytes` or has been open for `everyMs`: the metadata store sees one write
 * per checkpoint, whatever the block size. The checkpoint — the parts so far, the bytes in them and the
 * encoder's state — is handed to `onCheckpoint` once its last part is durable. The file is the parts
 * concatenated; {@link composeParts} writes it under its name when the compaction ends.
 */
import { ExcError } from '../errors.js';
import type { BatchSource } from './batches.js';
import type { ObjectStore } from './object-store.js';
import { encodeEncoderState } from './rfile/encoder-state.js';
import { WriteBatch } from './write-batch.js';
import type { BlockFeed, EncoderState, RFileEncoder } from './rfile/writer.js';

export interface PartRef {
  name: string;
  size: number;
}

/** A checkpoint of a compaction's output: what a resumed attempt starts from. */
export interface Checkpoint {
  /** The parts holding the file's first `bytes` bytes, in order. */
  parts: PartRef[];
  bytes: number;
  /** The encoder's state after those bytes (encoder-state.ts). */
  state: string;
}

export interface CheckpointOptions {
  /** End a part (and checkpoint) once it holds this many bytes. */
  everyBytes: number;
  /** … or once it has been open this long. */
  everyMs: number;
  /** Called with each checkpoint once its parts are durable. */
  onCheckpoint?: (cp: Checkpoint) => void;
}

/** 64 MB or 30 s, whichever comes first. */
export const DEFAULT_CHECKPOINT_BYTES = 64 * 1024 * 1024;
export const DEFAULT_CHECKPOINT_MS = 30_000;

export function partName(output: string, n: number): string {
  return `${output}.part${String(n).padStart(5, '0')}`;
}

export function partialName(output: string): string {
  return `${output}.partial`;
}

const PART_SUFFIX = /\.(?:part\d{5,}|partial)$/;

/** Whether `name` is a part of a checkpointed output (the collector treats it as any other leftover). */
export const isPartName = (name: string): boolean => PART_SUFFIX.test(name);

/**
 * The output `name` is a part of ({@link partName}, {@link partialName}), or undefined when it is no part:
 * the collector keeps the parts of an output a reservation is still writing, named in a checkpoint or not.
 */
export function partOwner(name: string): string | undefined {
  const m = PART_SUFFIX.exec(name);
  return m ? name.slice(0, m.index) : undefined;
}

/** Whether `name` is one of the outputs in `writing`, or a part of one. */
export function ofOutputBeingWritten(name: string, writing: { has(name: string): boolean }): boolean {
  if (writing.has(name)) return true;
  const owner = partOwner(name);
  return owner !== undefined && writing.has(owner);
}

/** Whether a run writing `store` with this checkpoint appends in place ({@link writeAppendable}). */
export function appendsInPlace(store: ObjectStore, resume: Checkpoint | undefined): boolean {
  if (!store.openAppendable) return false;
  return !resume || (resume.parts.length === 1 && resume.parts[0]!.name.endsWith('.partial'));
}

/**
 * Writes the encoder's output in place under `<output>.partial`, continuing `resume`'s file if any, and
 * links it under `output` at the end. Resolves the size and the files it leaves (the earlier attempt's,
 * its own): garbage once the output is committed. `onCopied` hears how far the copy of the resumed
 * file's checkpointed bytes is (AppendableOptions).
 */
export async function writeAppendable(
  store: ObjectStore,
  output: string,
  encoder: RFileEncoder,
  batches: BatchSource | BlockFeed,
  options: CheckpointOptions,
  resume: Checkpoint | undefined,
  signal?: AbortSignal,
  onCopied?: (bytes: number) => void,
): Promise<{ parts: PartRef[]; size: number }> {
  const name = partialName(output);
  const file = await store.openAppendable!(name, resume?.parts[0], onCopied ? { onCopied } : {});
  // The fsync of the last checkpoint, still running: the merge goes on meanwhile (it only appends past
  // the checkpoint), and the checkpoint is reported once the sync is done. One at a time: a checkpoint
  // reached while the previous one syncs waits for it.
  let syncing: Promise<void> | undefined;
  let syncFailed: { err: unknown } | undefined;
  try {
    encoder.checkpointEvery(options.everyBytes);
    // Copied as they come: the encoder reuses a chunk's memory once we ask for the next (WriteBatch).
    const pending = new WriteBatch(APPEND_BATCH, (bytes) => file.append([bytes]));
    let lastCut = Date.now();
    for await (const chunk of encoder.encodeMarked(batches, signal)) {
      if (syncFailed) throw syncFailed.err;
      if (Buffer.isBuffer(chunk)) {
        await pending.add(chunk);
        if (Date.now() - lastCut >= options.everyMs) encoder.requestCheckpoint();
        continue;
      }
      await pending.flush();
      await syncing;
      lastCut = Date.now();
      const state = encodeEncoderState(chunk);
      const { offset } = chunk;
      syncing = file.flush().then((length) => {
        if (length !== offset) {
          throw new ExcError(
            'INTERNAL',
            `checkpoint of ${output} at ${offset} bytes, ${name} holds ${length}`,
          );
        }
        options.onCheckpoint?.({ parts: [{ name, size: length }], bytes: length, state });
      });
      // A failed sync fails the run at the next chunk (never an unhandled rejection meanwhile).
      syncing.catch((err: unknown) => {
        syncFailed = { err };
      });
    }
    signal?.throwIfAborted();
    await pending.flush();
    await syncing;
    // A stop that came with the last checkpoint (its handler may abort) still stops the run.
    signal?.throwIfAborted();
    const size = await file.finish(output);
    return { parts: [...(resume?.parts ?? []), { name, size }], size };
  } finally {
    // Not closed under a sync still running (an error or an abort mid-run).
    await syncing?.catch(() => undefined);
    await file.close();
  }
}

/** Appends are gathered into writes of about this size. */
const APPEND_BATCH = 1 << 20;

/**
 * Writes the encoder's output as parts after those of `resume` (if any), checkpointing as it goes.
 * Resolves the parts of the whole file and its size.
 */
export async function writeParts(
  store: ObjectStore,
  output: string,
  encoder: RFileEncoder,
  batches: BatchSource | BlockFeed,
  options: CheckpointOptions,
  resume: Checkpoint | undefined,
  signal?: AbortSignal,
): Promise<{ parts: PartRef[]; size: number }> {
  const parts = [...(resume?.parts ?? [])];
  let written = resume?.bytes ?? 0;
  const chunks = encoder.encodeMarked(batches, signal)[Symbol.asyncIterator]();
  let finished = false;
  encoder.checkpointEvery(options.everyBytes);
  try {
    while (!finished) {
      const name = partName(output, parts.length);
      const opened = Date.now();
      let size = 0;
      let cut: EncoderState | undefined;
      const body = async function* (): AsyncGenerator<Buffer> {
        for (;;) {
          const r = await chunks.next();
          if (r.done) {
            finished = true;
            return;
          }
          if (!Buffer.isBuffer(r.value)) {
            cut = r.value;
            return;
          }
          size += r.value.length;
          yield r.value;
          if (size >= options.everyBytes || Date.now() - opened >= options.everyMs)
            encoder.requestCheckpoint();
        }
      };
      const stored = await store.write(name, body(), { signal });
      if (stored.size !== size) {
        throw new ExcError('INTERNAL', `part ${name}: the store wrote ${stored.size} bytes of ${size}`);
      }
      parts.push({ name, size });
      written += size;
      if (cut) {
        if (cut.offset !== written) {
          throw new ExcError(
            'INTERNAL',
            `checkpoint of ${output} at ${cut.offset} bytes, parts hold ${written}`,
          );
        }
        options.onCheckpoint?.({ parts: [...parts], bytes: written, state: encodeEncoderState(cut) });
      }
    }
  } finally {
    await chunks.return?.(undefined);
  }
  return { parts, size: written };
}

/**
 * Writes `output` as the concatenation of `parts` (atomic, like every write); `onBytes` is told of each
 * chunk passed on.
 */
export async function composeParts(
  store: ObjectStore,
  output: string,
  parts: readonly PartRef[],
  signal?: AbortSignal,
  onBytes?: (n: number) => void,
): Promise<number> {
  const body = async function* (): AsyncGenerator<Buffer> {
    for (const part of parts) {
      let got = 0;
      for await (const chunk of store.readStream(part.name, { signal })) {
        got += chunk.length;
        onBytes?.(chunk.length);
        yield chunk;
      }
      if (got !== part.size) {
        throw new ExcError('CORRUPT_FILE', `part ${part.name} is ${got} bytes, not ${part.size}`, {
          details: { file: part.name },
        });
      }
    }
  };
  return (await store.write(output, body(), { signal })).size;
}
