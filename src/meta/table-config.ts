/**
 * A table's settings, kept in its `~table:<id>` row: how its compactions are selected, routed to queues,
 * and what the iterator stack keeps.
 */
import { z } from 'zod';
import { ExcError } from '../errors.js';
import { nameSchema } from '../names.js';
import { tableIteratorsSchema } from '../table-iterators.js';
import { COMPRESSIONS, DEFAULT_COMPRESSION, isCompression } from '../compressions.js';

export const queueRouteSchema = z.strictObject({
  queue: nameSchema('queue'),
  /** Jobs whose inputs total at most this many bytes go to this queue; the last route may omit it. */
  maxInputBytes: z.number().int().positive().optional(),
});
export type QueueRoute = z.infer<typeof queueRouteSchema>;

export const tableConfigSchema = z
  .object({
    /** Routes by total input size, smallest first; a job goes to the first route it fits. */
    queues: z.array(queueRouteSchema).max(16).default([]),
    /** A set of files is worth compacting when its total size is at least ratio × its largest file. */
    ratio: z.number().min(1).max(100).default(3),
    /** At most this many files per job. */
    maxFiles: z.number().int().min(2).max(1_000).default(10),
    /** A tablet with more files than this compacts its smallest files regardless of the ratio. */
    fileLimit: z.number().int().min(2).max(10_000).default(30),
    /** Versions of a cell to keep. */
    versions: z.number().int().min(1).max(1_000).default(1),
    /** Age-off: drop entries older than this. */
    ttlMs: z.number().int().positive().optional(),
    /** Failed attempts after which a job is parked instead of requeued. */
    maxAttempts: z.number().int().min(1).max(100).default(3),
    /**
     * Block codec of the files written for this table from now on (flushes and compactions); files
     * already written keep theirs, as each block records its codec.
     */
    compression: z.enum(COMPRESSIONS).default(DEFAULT_COMPRESSION),
    /** Uncompressed size of a data block in the files written for this table from now on. */
    blockSize: z
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(64 * 1024),
    /**
     * A system job with more input than this is split by row range into sub-jobs that different
     * compactors run in parallel: ceil(input / splitAbove) of them, at most `maxSplits`.
     */
    splitAbove: z
      .number()
      .int()
      .min(1024)
      .default(1024 ** 3),
    /** At most this many sub-jobs per split job (1: never split). */
    maxSplits: z.number().int().min(1).max(64).default(8),
    /**
     * A tablet whose files hold more than this many bytes of its rows splits in two, near the middle of
     * its data (DESIGN.md, "Tablet splits and merges").
     */
    splitThreshold: z
      .number()
      .int()
      .min(1024)
      .default(1024 ** 3),
    /**
     * Neighbouring tablets that together hold fewer bytes than this merge into one (absent: never by
     * themselves; `admin table merge` still merges on request). Must be well below `splitThreshold`.
     */
    mergeBelow: z.number().int().min(1).optional(),
    /** Table iterators (src/table-iterators.ts): combiners and filters at every scan and compaction. */
    iterators: tableIteratorsSchema.default([]),
  })
  .strict()
  .superRefine((config, ctx) => {
    const routes = config.queues;
    routes.forEach((route, i) => {
      if (i < routes.length - 1 && route.maxInputBytes === undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['queues', i, 'maxInputBytes'],
          message: 'only the last queue route may be unbounded',
        });
      }
      const prev = routes[i - 1]?.maxInputBytes;
      if (i > 0 && prev !== undefined && route.maxInputBytes !== undefined && route.maxInputBytes <= prev) {
        ctx.addIssue({
          code: 'custom',
          path: ['queues', i, 'maxInputBytes'],
          message: 'queue routes must be ordered by increasing maxInputBytes',
        });
      }
    });
    if (config.mergeBelow !== undefined && config.mergeBelow * 2 > config.splitThreshold) {
      ctx.addIssue({
        code: 'custom',
        path: ['mergeBelow'],
        message:
          'mergeBelow must be at most half of splitThreshold (a merged tablet would split again at once)',
      });
    }
    const names = routes.map((r) => r.queue);
    if (new Set(names).size !== names.length) {
      ctx.addIssue({ code: 'custom', path: ['queues'], message: 'a queue may appear only once' });
    }
  });

export type TableConfig = z.output<typeof tableConfigSchema>;
export type TableConfigInput = z.input<typeof tableConfigSchema>;

export const DEFAULT_TABLE_CONFIG: TableConfig = tableConfigSchema.parse({});

/**
 * Parses `key=value` settings as typed on the command line into a partial config:
 *   queues=small:64M,large   ratio=3   maxFiles=10   fileLimit=30   versions=3   ttl=7d   maxAttempts=5
 *   compression=zstd (none, deflate, lz4, zstd)   blockSize=64K   splitAbove=1G   maxSplits=8
 *   splitThreshold=1G   mergeBelow=64M (mergeBelow= turns it off)
 */
export function parseConfigAssignments(assignments: string[]): TableConfigInput {
  const out: TableConfigInput & Record<string, unknown> = {};
  for (const assignment of assignments) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new ExcError('BAD_REQUEST', `expected key=value, got ${JSON.stringify(assignment)}`);
    const key = assignment.slice(0, eq);
    const value = assignment.slice(eq + 1);
    switch (key) {
      case 'queues':
        out.queues = value === '' ? [] : value.split(',').map((part) => parseRoute(part));
        break;
      case 'ratio':
        out.ratio = parseNumber(key, value);
        break;
      case 'maxFiles':
      case 'fileLimit':
      case 'versions':
      case 'maxAttempts':
      case 'maxSplits':
        out[key] = parseNumber(key, value);
        break;
      case 'ttl':
      case 'ttlMs':
        out.ttlMs = key === 'ttl' ? parseDuration(value) : parseNumber(key, value);
        break;
      case 'splitAbove':
      case 'blockSize':
      case 'splitThreshold':
        out[key] = parseSize(value);
        break;
      case 'mergeBelow':
        out.mergeBelow = value === '' ? undefined : parseSize(value);
        break;
      case 'compression':
        if (!isCompression(value)) {
          throw new ExcError(
            'BAD_REQUEST',
            `compression: ${JSON.stringify(value)} is not one of ${COMPRESSIONS.join(', ')}`,
          );
        }
        out.compression = value;
        break;
      default:
        throw new ExcError(
          'BAD_REQUEST',
          `unknown table setting ${JSON.stringify(key)} (known: queues, ratio, maxFiles, fileLimit, versions, ttl, maxAttempts, compression, blockSize, splitAbove, maxSplits, splitThreshold, mergeBelow)`,
        );
    }
  }
  return out;
}

function parseRoute(part: string): QueueRoute {
  const [queue, max] = part.split(':');
  if (!queue) throw new ExcError('BAD_REQUEST', `queues: empty queue name in ${JSON.stringify(part)}`);
  return max === undefined ? { queue } : { queue, maxInputBytes: parseSize(max) };
}

function parseNumber(key: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n))
    throw new ExcError('BAD_REQUEST', `${key}: not a number: ${JSON.stringify(value)}`);
  return n;
}

const SIZE_UNITS: Record<string, number> = {
  '': 1,
  B: 1,
  K: 1 << 10,
  KB: 1 << 10,
  M: 1 << 20,
  MB: 1 << 20,
  G: 1 << 30,
  GB: 1 << 30,
};
/** `256M`, `64K`, `1G`, `1048576` → bytes. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([KMG]?B?)$/i.exec(text.trim());
  const unit = m ? SIZE_UNITS[m[2]!.toUpperCase()] : undefined;
  if (!m || unit === undefined)
    throw new ExcError('BAD_REQUEST', `not a size: ${JSON.stringify(text)} (e.g. 64M, 1G, 4096)`);
  return Math.round(Number(m[1]) * unit);
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** `7d`, `12h`, `30m`, `10s`, `500ms` → milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim());
  if (!m)
    throw new ExcError('BAD_REQUEST', `not a duration: ${JSON.stringify(text)} (e.g. 7d, 12h, 30m, 10s)`);
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]!]!);
}
