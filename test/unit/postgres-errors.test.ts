import { describe, expect, it } from 'vitest';
import { storeError } from '../../src/meta/postgres-errors.js';
import { isNotAppliedCode } from '../../src/rpc/client.js';

/** What node-pg rejects with for an error the server sent (a DatabaseError). */
function serverError(code: string, severity = 'ERROR'): Error {
  return Object.assign(new Error(`server said ${code}`), { code, severity });
}

const lost = (): Error => new Error('Connection terminated unexpectedly');
const reset = (): Error => Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

describe('PostgreSQL store errors', () => {
  it('classify - an error with neither SQLSTATE nor a connection cause is a bug, never retried', () => {
    for (const err of [
      new RangeError('offset out of range'),
      new TypeError('x is undefined'),
      new Error('?'),
    ]) {
      const e = storeError(err, 'db');
      expect(e.code).toBe('INTERNAL');
      expect(e.retriable).toBe(false);
      expect(e.cause).toBe(err);
    }
  });

  it('classify - a connection lost before COMMIT was sent: not applied, worth another try', () => {
    for (const err of [lost(), reset()]) {
      const e = storeError(err, 'db');
      expect(e.code).toBe('UNAVAILABLE');
      expect(isNotAppliedCode(e.code)).toBe(true);
    }
  });

  it('classify - a connection lost once COMMIT was sent: the outcome is unknown', () => {
    for (const err of [lost(), reset(), serverError('57P01', 'FATAL'), serverError('25P03', 'FATAL')]) {
      const e = storeError(err, 'db', { commitSent: true });
      expect(e.code).toBe('OUTCOME_UNKNOWN');
      expect(isNotAppliedCode(e.code)).toBe(false);
    }
  });

  it('classify - an ERROR answering the COMMIT itself means it was rolled back', () => {
    expect(storeError(serverError('40001'), 'db', { commitSent: true }).code).toBe('UNAVAILABLE');
    expect(storeError(serverError('23505'), 'db', { commitSent: true }).code).toBe('INTERNAL');
  });

  it('classify - lock timeouts and idle-transaction timeouts are retried', () => {
    expect(storeError(serverError('55P03'), 'db').code).toBe('UNAVAILABLE');
    expect(storeError(serverError('25P03', 'FATAL'), 'db').code).toBe('UNAVAILABLE');
    expect(storeError(serverError('42P01'), 'db').code).toBe('INTERNAL');
  });
});
