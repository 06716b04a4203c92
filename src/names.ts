/**
 * The one grammar of the names users give things: tables and queues.
 *
 *   name = letter { letter | digit | "_" | "." | "-" }     at most 64 characters
 *
 * Every entry point checks a name against it (the manager's API, the CLI, the compactor's queue
 * argument), so a name is refused the same way wherever it comes in. Names are looked up only in `Map`s
 * or by own property: a name such as `constructor` or `toString` is an ordinary name, never something an
 * object inherits.
 */
import { z } from 'zod';
import { ExcError } from './errors.js';

export const NAME_RE = /^[A-Za-z][A-Za-z0-9_.-]{0,63}$/;
export const NAME_RULE = 'letters, digits, _ . - (at most 64, starting with a letter)';

export type NameKind = 'table' | 'queue';

/** A zod schema for a table or queue name; its message names the kind, the name given and the rule. */
export function nameSchema(kind: NameKind): z.ZodString {
  return z.string().regex(NAME_RE, {
    error: (issue) => nameProblem(kind, typeof issue.input === 'string' ? issue.input : ''),
  });
}

/** Returns `name` if it follows the grammar; throws BAD_REQUEST naming the kind and the name otherwise. */
export function checkEntityName(kind: NameKind, name: string, field?: string): string {
  if (NAME_RE.test(name)) return name;
  throw new ExcError('BAD_REQUEST', nameProblem(kind, name), {
    details: { field: field ?? kind, [kind]: name.slice(0, 80) },
  });
}

function nameProblem(kind: NameKind, name: string): string {
  const shown = JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);
  return `invalid ${kind} name ${shown}: ${NAME_RULE}`;
}
