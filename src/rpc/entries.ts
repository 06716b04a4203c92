/**
 * The wire format of entries in RPC bodies (all byte strings base64):
 *   { "row": "...", "cf": "...", "cq": "...", "ts": 1700000000000, "value": "...", "delete": false }
 * `cf`, `cq` and `value` default to empty, `ts` to the tablet server's clock, `delete` to false.
 */
import { z } from 'zod';
import type { Entry } from '../storage/index.js';

export const MAX_KEY_PART_BYTES = 64 * 1024;
export const MAX_VALUE_BYTES = 4 * 1024 * 1024;
export const MAX_BATCH_ENTRIES = 100_000;

const b64 = (max: number, what: string) =>
  z
    .base64(`${what} must be base64`)
    .refine((s) => s.length <= Math.ceil(max / 3) * 4, `${what} is longer than ${max} bytes`);

export const wireEntrySchema = z.object({
  row: b64(MAX_KEY_PART_BYTES, 'row').refine((s) => s.length > 0, 'row must not be empty'),
  cf: b64(MAX_KEY_PART_BYTES, 'cf').default(''),
  cq: b64(MAX_KEY_PART_BYTES, 'cq').default(''),
  ts: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  value: b64(MAX_VALUE_BYTES, 'value').default(''),
  delete: z.boolean().default(false),
});
export type WireEntry = z.input<typeof wireEntrySchema>;

export function toWire(e: Entry): WireEntry {
  return {
    row: e.key.row.toString('base64'),
    cf: e.key.family.toString('base64'),
    cq: e.key.qualifier.toString('base64'),
    ts: e.key.timestamp,
    value: e.value.toString('base64'),
    delete: e.key.deleted,
  };
}
