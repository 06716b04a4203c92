/**
 * The blocks of an RFile as a scan meets them (reader.ts): the cursor that knows which block must come
 * next, the decode of a verified data block, and the footer's checks against the file's layout. Every
 * violation is CORRUPT_FILE naming the file and the block.
 */
import type { ExcError } from '../../errors.js';
import { compareKeys } from '../key.js';
import { decodeDataBlock, type BlockEntry } from './block-entry.js';
import {
  BLOCK_HEADER_SIZE,
  FormatError,
  KIND_DATA,
  KIND_INDEX,
  MIN_DATA_BLOCK,
  MIN_INDEX_RECORD,
  readBlockHeader,
  type BlockHeader,
  type Footer,
  type IndexRecord,
} from './codec.js';
import { decompressBlock, decompressBlockSync } from './compression.js';
import { corruptFile } from './corrupt.js';

export interface RootEntry extends IndexRecord {
  /** Number of the first data block this index block covers. */
  firstDataBlock: number;
}

export interface ScanStart {
  offset: number;
  dataBlock: number;
  indexBlock: number;
}

/**
 * Walks the blocks of a scan in file order, knowing which block must come next: data blocks
 * `firstDataBlock..+count-1` of index block j, then index block j itself, at the offset the root gives.
 */
export class BlockCursor {
  offset: number;
  private data: number;
  private index: number;

  constructor(
    private readonly file: string,
    private readonly root: RootEntry[],
    start: ScanStart,
  ) {
    this.offset = start.offset;
    this.data = start.dataBlock;
    this.index = start.indexBlock;
  }

  private get expectedKind(): number {
    const r = this.root[this.index]!;
    return this.data < r.firstDataBlock + r.count ? KIND_DATA : KIND_INDEX;
  }

  /** Describes the block expected here, for errors: `data block 3 at offset 196632`. */
  where(): string {
    const kind = this.expectedKind;
    return describe(kind, kind === KIND_DATA ? this.data : this.index, this.offset);
  }

  corrupt(detail: string, cause?: unknown): ExcError {
    return corruptFile(this.file, this.where(), detail, cause);
  }

  /** Decodes and checks the header of the block expected here. */
  header(bytes: Buffer): BlockHeader {
    let h: BlockHeader;
    try {
      h = readBlockHeader(bytes);
    } catch (err) {
      if (err instanceof FormatError) throw this.corrupt(err.message, err);
      throw err;
    }
    const kind = this.expectedKind;
    const number = kind === KIND_DATA ? this.data : this.index;
    if (h.kind !== kind || h.number !== number) {
      throw this.corrupt(`found ${describe(h.kind, h.number, this.offset)} instead`);
    }
    if (kind === KIND_INDEX) {
      const r = this.root[this.index]!;
      if (
        r.offset !== this.offset ||
        r.length !== BLOCK_HEADER_SIZE + h.storedLength ||
        r.count !== h.count
      ) {
        throw this.corrupt('position, length or count differs from the root');
      }
    }
    return h;
  }

  /** Moves past the block just read (`length` bytes). */
  next(length: number): void {
    if (this.expectedKind === KIND_DATA) this.data++;
    else this.index++;
    this.offset += length;
  }
}

export interface StoredBlock {
  header: BlockHeader;
  /** As stored (maybe deflated), checksum verified. */
  payload: Buffer;
  /** Where it starts in the file, for errors. */
  offset: number;
}

/** Decompresses (compression.ts) and decodes a verified data block; damage is CORRUPT_FILE naming it. */
export async function decodeBlock(file: string, block: StoredBlock): Promise<BlockEntry[]> {
  const { header } = block;
  const raw = await decompressStored(file, block);
  try {
    return decodeDataBlock(raw, header.count);
  } catch (err) {
    if (err instanceof FormatError) {
      throw corruptFile(file, describe(KIND_DATA, header.number, block.offset), err.message, err);
    }
    throw err;
  }
}

/** Decompresses a verified data block (compression.ts); damage is CORRUPT_FILE naming it. */
export async function decompressStored(file: string, block: StoredBlock): Promise<Buffer> {
  const { header, payload } = block;
  try {
    return await decompressBlock(header.codec, payload, header.rawLength);
  } catch (err) {
    throw blockError(file, block, err);
  }
}

/** {@link decompressStored} for a block in any codec but deflate, on this thread (see decompressBlockSync). */
export function decompressStoredSync(
  file: string,
  block: StoredBlock,
  alloc?: (size: number) => Buffer,
): Buffer {
  const { header, payload } = block;
  try {
    return decompressBlockSync(header.codec, payload, header.rawLength, alloc);
  } catch (err) {
    throw blockError(file, block, err);
  }
}

function blockError(file: string, block: StoredBlock, err: unknown): unknown {
  if (!(err instanceof FormatError)) return err;
  return corruptFile(file, describe(KIND_DATA, block.header.number, block.offset), err.message, err);
}

export function describe(kind: number, number: number, offset: number): string {
  const name =
    kind === KIND_DATA
      ? 'data block'
      : kind === KIND_INDEX
        ? 'index block'
        : `block of kind 0x${kind.toString(16)}`;
  return `${name} ${number} at offset ${offset}`;
}

/** Checks the footer against the file's layout and numbers the root's data blocks. */
export function checkFooter(file: string, f: Footer, footerStart: number): RootEntry[] {
  const fail = (detail: string): ExcError => corruptFile(file, 'footer', detail);
  if (f.entryCount === 0) {
    if (f.dataBlocks !== 0 || f.root.length !== 0 || footerStart !== 0) throw fail('no entries, yet blocks');
    return [];
  }
  if (f.root.length === 0 || f.dataBlocks === 0) throw fail(`${f.entryCount} entries, yet no blocks`);
  if (f.entryCount < f.dataBlocks) throw fail(`${f.entryCount} entries cannot fill ${f.dataBlocks} blocks`);
  const root: RootEntry[] = [];
  let blocks = 0;
  let end = 0;
  for (const [j, r] of f.root.entries()) {
    if (r.count < 1 || r.offset < end + r.count * MIN_DATA_BLOCK)
      throw fail(`index block ${j} covers no room for its blocks`);
    if (r.length < BLOCK_HEADER_SIZE + r.count * MIN_INDEX_RECORD)
      throw fail(`index block ${j} is too short for its records`);
    if (j > 0 && compareKeys(root[j - 1]!.lastKey, r.lastKey) > 0)
      throw fail(`index block ${j} is out of order`);
    root.push({ ...r, firstDataBlock: blocks });
    blocks += r.count;
    end = r.offset + r.length;
  }
  if (end !== footerStart)
    throw fail(`the last index block ends at ${end}, the footer starts at ${footerStart}`);
  if (blocks !== f.dataBlocks)
    throw fail(`the root covers ${blocks} data blocks, the footer says ${f.dataBlocks}`);
  if (compareKeys(f.lastKey!, root[root.length - 1]!.lastKey) !== 0)
    throw fail('the last key differs from the index');
  if (compareKeys(f.firstKey!, f.lastKey!) > 0) throw fail('the first key is after the last key');
  return root;
}
