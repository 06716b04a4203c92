/**
 * The table iterators a table configures (its `iterators` setting): their names, types and options, as
 * the metadata, the CLI and the reservations carry them. What each does, and in which order, is
 * src/storage/iterators/table-iterators.ts; this module is the schema alone, so that a command that only
 * shows or changes settings loads no storage code.
 */
import { z } from 'zod';
import { ExcError } from './errors.js';
import { LONE_SURROGATE, wellFormed } from './validate.js';

export const MAX_TABLE_ITERATORS = 16;

const text = z.string().min(1).max(1024).refine(wellFormed, LONE_SURROGATE);
const texts = z.array(text).min(1).max(256);
const column = z.strictObject({ family: text, qualifier: text.optional() });
const name = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/,
    'expected 1-64 letters, digits, ., _ or -, starting with a letter or digit',
  );
const ts = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const tableIteratorSchema = z.discriminatedUnion('type', [
  z.strictObject({ name, type: z.literal('sum'), columns: z.array(column).min(1).max(256) }),
  z.strictObject({ name, type: z.literal('min'), columns: z.array(column).min(1).max(256) }),
  z.strictObject({ name, type: z.literal('max'), columns: z.array(column).min(1).max(256) }),
  z.strictObject({ name, type: z.literal('latest'), columns: z.array(column).min(1).max(256) }),
  z.strictObject({ name, type: z.literal('dropFamily'), families: texts }),
  z.strictObject({ name, type: z.literal('dropQualifierPrefix'), prefixes: texts }),
  z.strictObject({ name, type: z.literal('dropValuePrefix'), prefixes: texts }),
  z
    .strictObject({ name, type: z.literal('keepTimestamps'), from: ts.optional(), to: ts.optional() })
    .refine((i) => i.from === undefined || i.to === undefined || i.from <= i.to, 'from is after to'),
  z.strictObject({ name, type: z.literal('ageOff'), families: texts, ttlMs: z.number().int().positive() }),
  z.strictObject({
    name,
    type: z.literal('versions'),
    families: texts,
    versions: z.number().int().min(1).max(1_000),
  }),
]);
export type TableIterator = z.infer<typeof tableIteratorSchema>;

export const TABLE_ITERATOR_TYPES = [
  'sum',
  'min',
  'max',
  'latest',
  'dropFamily',
  'dropQualifierPrefix',
  'dropValuePrefix',
  'keepTimestamps',
  'ageOff',
  'versions',
] as const;

export const tableIteratorsSchema = z
  .array(tableIteratorSchema)
  .max(MAX_TABLE_ITERATORS)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((it, i) => {
      if (seen.has(it.name))
        ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `two iterators are named ${it.name}` });
      seen.add(it.name);
    });
  });

/** BAD_REQUEST naming the iterator and what is wrong with it. */
export function validateTableIterators(value: unknown): TableIterator[] {
  const r = tableIteratorsSchema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const where = issue.path.length > 0 ? `iterators.${issue.path.join('.')}: ` : 'iterators: ';
  throw new ExcError('BAD_REQUEST', `${where}${issue.message}`);
}
