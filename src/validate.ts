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

/**
 * A string's UTF-8 bytes, refusing one that UTF-8 cannot hold exactly: a lone UTF-16 surrogate (JSON's
 * `"\ud800"`, a string cut inside an emoji) would be stored as U+FFFD, another character than was given,
 * with nothing said. BAD_REQUEST naming `what` and where the surrogate is.
 */
export function utf8Bytes(s: string, what: string): Buffer {
  if (!s.isWellFormed()) {
    const at = [...s].findIndex((c) => c.length === 1 && c >= '\ud800' && c <= '\udfff');
    throw new ExcError(
      'BAD_REQUEST',
      `${what} holds a lone UTF-16 surrogate (character ${at + 1}), which UTF-8 cannot store; give binary as base64 or a Buffer`,
      { details: { field: what } },
    );
  }
  return Buffer.from(s, 'utf8');
}

/** For schemas of strings stored as UTF-8: `z.string().refine(wellFormed, LONE_SURROGATE)` (see utf8Bytes). */
export const wellFormed = (s: string): boolean => s.isWellFormed();
export const LONE_SURROGATE = 'holds a lone UTF-16 surrogate, which UTF-8 cannot store';
