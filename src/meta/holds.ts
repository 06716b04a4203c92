/**
 * Holds (DESIGN.md, "Tablet splits and merges"): a tablet's share in a compaction reserved on another
 * tablet before the two were one.
 *
 *   hold:<ecid>   JSON {@link Hold}
 *
 * When a tablet splits, its reservations stay in the daughter that keeps its row (the one its compactors
 * follow), and every other daughter gets a hold on each: the same inputs — files the daughters share —
 * kept out of its own jobs while the compaction runs. The compaction reads every row it was reserved for,
 * so its output is good for every daughter whose rows it covers: when the reservation commits, each
 * holding daughter puts the output in place of the inputs as that commit did, and when it ends otherwise
 * the hold is let go and the inputs are the daughter's to compact again (hold-rules.ts).
 */
import { z } from 'zod';
import { hexRangeSchema } from './rows.js';

export const HOLD_PREFIX = 'hold:';
export const holdCol = (ecid: string): string => `${HOLD_PREFIX}${ecid}`;

export const holdSchema = z.object({
  /** The tablet row whose reservation `ecid` this is: the daughter that kept the split tablet's row. */
  tablet: z.string().min(1),
  inputs: z.array(z.string()).min(1),
  output: z.string().min(1),
  kind: z.enum(['system', 'user']),
  /** The user compactions the job satisfies (a user job). */
  userCompactionIds: z.array(z.string()).optional(),
  /** The rows the job was reserved for: its output covers them, and nothing else. */
  clip: hexRangeSchema,
  /** The job's reference time (`settings.nowMs`): the tablet's clock moves up to it with the output. */
  nowMs: z.number(),
  /**
   * This tablet's share of the inputs' bytes, as a fraction of what the job reads: the output's size here
   * is estimated with it.
   */
  share: z.number().positive().max(1),
  at: z.number(),
});
export type Hold = z.infer<typeof holdSchema>;
