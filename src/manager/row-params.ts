/**
 * Rows in the manager's API requests: as UTF-8 text (`startRow`) or as bytes in hex (`startRowHex`, what
 * the CLI sends, for binary rows), never both.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';

/** A row given as bytes in hex: lower or upper case, whole bytes (empty: the row before all others). */
export const HEX_ROW = z
  .string()
  .regex(/^(?:[0-9a-fA-F]{2})*$/, "expected a row's bytes in hex (two digits per byte)");

/** A row given as UTF-8 text or as hex bytes (`field` and `field`Hex), not both; undefined for neither. */
export function rowOf(text: string | undefined, hex: string | undefined, field: string): Buffer | undefined {
  if (text !== undefined && hex !== undefined)
    throw new ExcError('BAD_REQUEST', `give ${field} or ${field}Hex, not both`, { details: { field } });
  if (hex !== undefined) return Buffer.from(hex, 'hex');
  return text === undefined ? undefined : Buffer.from(text, 'utf8');
}
