import type { z } from 'zod';
import { ExcError } from './errors.js';

/**
 * Validates `value` against `schema`; on failure throws BAD_REQUEST naming the offending field
 * (`body.entries.3.row: expected string, received number`).
 */
export function parseInput<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.slice(0, 5).map((issue) => {
    const field = [where, ...issue.path.map(String)].join('.');
    return { field, message: `${field}: ${issue.message}` };
  });
  throw new ExcError('BAD_REQUEST', `invalid request: ${issues.map((i) => i.message).join('; ')}`, {
    details: { field: issues[0]?.field ?? where },
  });
}
