/**
 * Changes applied once, however often they are sent.
 *
 * A client sends every call that changes something with a request id — a ULID in the query string
 * (`?requestId=…`), so the signature covers it — and, when the answer is lost (the manager died, was
 * paused, or failed over with the call in flight), sends the same call again with the same id, to
 * whichever manager is active by then. The manager writes the answer into the metadata store in the same
 * transaction as the change itself:
 *
 *   ~req:<requestId>  answer → JSON of the answer given
 *                     intent → JSON: what a change made of several steps outside the store (a queue
 *                              deletion, in ZooKeeper) set out to do, so that a repeat can finish it
 *                     part:<key> → JSON: one item of a change made of many mutations, written by the
 *                              mutation that applied it (the answer then lists them)
 *
 * A repeat finds the answer and returns it, applying nothing. Writing the answer with the change is what
 * makes this exact: a change with no answer recorded was not applied (or, for a change in steps, is
 * finished by the repeat). Rows older than {@link REQUEST_RETENTION_MS} are trimmed by the garbage
 * collector: far longer than any client keeps retrying.
 */
import { z } from 'zod';
import { ulidTime } from '../ids.js';
import { scanRows, type MetaReader } from '../meta/backend.js';
import type { Cell, Condition } from '../meta/types.js';
import { parseInput } from '../validate.js';

export const REQUEST_PREFIX = '~req:';
export const REQUEST_RETENTION_MS = 3_600_000;
const COL_ANSWER = 'answer';
const COL_INTENT = 'intent';
const COL_PART = 'part:';

const requestRow = (id: string): string => `${REQUEST_PREFIX}${id}`;

/** The query parameter, for routes that validate their query with a schema. */
export const requestIdParam = z
  .string()
  .regex(/^[0-9A-HJKMNP-TV-Z]{26}$/, 'expected a request id (a ULID)')
  .optional();

/** The request id of a call, or undefined when the client sent none. BAD_REQUEST when malformed. */
export function requestIdOf(query: unknown): string | undefined {
  return parseInput(z.object({ requestId: requestIdParam }), query ?? {}, 'query').requestId;
}

/** The answer recorded for `id`, when a call with this id was applied already. */
export async function answerOf<T>(store: MetaReader, id: string | undefined): Promise<T | undefined> {
  if (id === undefined) return undefined;
  const text = await store.get(requestRow(id), COL_ANSWER);
  return text === undefined ? undefined : (JSON.parse(text) as T);
}

/** The condition that no answer was recorded for `id`: a change carrying it applies at most once. */
export function unanswered(id: string): Condition {
  return { op: 'absent', row: requestRow(id), col: COL_ANSWER };
}

/** The cell recording `answer` for `id`; put it in the mutation that makes the change. */
export function answerCell(id: string, answer: unknown): Cell {
  return { row: requestRow(id), col: COL_ANSWER, value: JSON.stringify(answer) };
}

/** What a change in several steps recorded it set out to do. */
export async function intentOf<T>(store: MetaReader, id: string): Promise<T | undefined> {
  const text = await store.get(requestRow(id), COL_INTENT);
  return text === undefined ? undefined : (JSON.parse(text) as T);
}

export function intentCell(id: string, intent: unknown): Cell {
  return { row: requestRow(id), col: COL_INTENT, value: JSON.stringify(intent) };
}

/**
 * One item of a change made of many conditional mutations (a release of several parked jobs): each
 * mutation that applies records its item, so the answer lists exactly those.
 */
export function partCell(id: string, key: string, item: unknown): Cell {
  return { row: requestRow(id), col: `${COL_PART}${key}`, value: JSON.stringify(item) };
}

/** The items recorded with {@link partCell}, in key order. */
export async function partsOf<T>(store: MetaReader, id: string): Promise<T[]> {
  const out: T[] = [];
  for (const [col, value] of await store.row(requestRow(id))) {
    if (col.startsWith(COL_PART)) out.push(JSON.parse(value) as T);
  }
  return out;
}

/** Request rows older than the retention, oldest first (their ids begin with their time). */
export async function expiredRequests(store: MetaReader, now: number): Promise<string[]> {
  const cutoff = now - REQUEST_RETENTION_MS;
  const old: string[] = [];
  for await (const row of scanRows(store, { prefix: REQUEST_PREFIX })) {
    if (ulidTime(row.row.slice(REQUEST_PREFIX.length)) >= cutoff) break;
    old.push(row.row);
  }
  return old;
}
