/**
 * A shutdown step that hangs or fails is logged and left behind: the steps after it still run, so one
 * stuck part (a call to a server that is gone) never keeps the process from exiting.
 */
import { describe, expect, it } from 'vitest';
import { runShutdownSteps } from '../../src/lifecycle.js';
import type { Logger } from '../../src/log.js';

function recordingLogger(): { log: Logger; warnings: { step: unknown; err: unknown }[] } {
  const warnings: { step: unknown; err: unknown }[] = [];
  const log = {
    warn: (fields: { step: unknown; err: unknown }) => warnings.push({ step: fields.step, err: fields.err }),
  } as unknown as Logger;
  return { log, warnings };
}

describe('runShutdownSteps', () => {
  it('goes on past a step that hangs, and past one that fails, naming each', async () => {
    const { log, warnings } = recordingLogger();
    const ran: string[] = [];
    const started = Date.now();
    await runShutdownSteps(
      log,
      [
        ['hangs', () => new Promise(() => ran.push('hangs'))],
        ['fails', () => Promise.reject(new Error('gone'))],
        [
          'throws',
          () => {
            throw new Error('at once');
          },
        ],
        ['works', () => void ran.push('works')],
      ],
      100,
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(ran).toEqual(['hangs', 'works']);
    expect(warnings.map((w) => w.step)).toEqual(['hangs', 'fails', 'throws']);
    expect(String(warnings[0]!.err)).toContain('did not finish within 100 ms');
  });
});
