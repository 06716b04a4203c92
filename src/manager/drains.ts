/**
 * Drained tablet servers (DESIGN.md, "Moves and balancing"): servers the assigner moves every tablet off
 * and gives none, kept in the metadata store so that a manager failover keeps them.
 *
 *   ~tserver:<host:port>   drain → JSON {@link Drain}
 *
 * An admin's drain (`excompact admin tserver drain`) holds for the address until undone, whatever runs
 * there. A tablet server stopping (SIGTERM) drains itself for its own session only: the same address
 * registered again (a new session) is a new server and gets tablets.
 */
import { z } from 'zod';
import { scanRows, type MetaReader } from '../meta/backend.js';
import type { Cell } from '../meta/types.js';

export const TSERVER_PREFIX = '~tserver:';
export const COL_DRAIN = 'drain';
export const tserverRow = (server: string): string => `${TSERVER_PREFIX}${server}`;

export const drainSchema = z.object({
  at: z.number(),
  /** Only while this session is the server's (a server stopping); absent: until undone (an admin's). */
  session: z.string().optional(),
  reason: z.string().max(200).optional(),
});
export type Drain = z.infer<typeof drainSchema>;

export const drainCell = (server: string, drain: Drain): Cell => ({
  row: tserverRow(server),
  col: COL_DRAIN,
  value: JSON.stringify(drain),
});

/** Every drain recorded (an unreadable one counts as an admin's: a server is never filled by mistake). */
export async function readDrains(store: MetaReader): Promise<Map<string, Drain>> {
  const out = new Map<string, Drain>();
  for await (const { row, cols } of scanRows(store, { prefix: TSERVER_PREFIX })) {
    const value = cols.get(COL_DRAIN);
    if (value === undefined) continue;
    let drain: Drain = { at: 0 };
    try {
      const parsed = drainSchema.safeParse(JSON.parse(value));
      if (parsed.success) drain = parsed.data;
    } catch {
      // as above
    }
    out.set(row.slice(TSERVER_PREFIX.length), drain);
  }
  return out;
}

/** Whether `drain` applies to the server now registered with `session`. */
export function drains(drain: Drain | undefined, session: string | undefined): boolean {
  return drain !== undefined && (drain.session === undefined || drain.session === session);
}
