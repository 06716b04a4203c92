import { ExcError } from '../../errors.js';

/**
 * The error for a file that is not what it should be: CORRUPT_FILE, naming the file and, when the damage
 * is in a block, the block (`data block 3 at offset 196632`).
 */
export function corruptFile(file: string, where: string | null, detail: string, cause?: unknown): ExcError {
  return new ExcError('CORRUPT_FILE', `corrupt RFile ${file}${where ? `, ${where}` : ''}: ${detail}`, {
    cause,
    details: { file, block: where },
  });
}
