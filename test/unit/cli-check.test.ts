import { describe, expect, it } from 'vitest';
import { formatCheckReport } from '../../src/cli/admin-check.js';
import { checkCluster, type CheckInput } from '../../src/manager/check.js';
import { tabletRow } from '../../src/meta/keys.js';
import { parseTablet } from '../../src/meta/tablet.js';

const NOW = Date.UTC(2030, 0, 2, 3, 4, 5);
const input = (over: Partial<CheckInput> = {}): CheckInput => ({
  now: NOW,
  graceMs: 600_000,
  tablets: [],
  queueEntries: [],
  deletions: new Map(),
  tableConfigs: new Map(),
  queues: [],
  liveCompactors: new Set(),
  objects: new Map(),
  temporaries: [],
  ...over,
});

describe('admin check output', () => {
  it('consistent - one line per check, the figures and the note', () => {
    const text = formatCheckReport(checkCluster(input()));
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toBe('consistent (checked 2030-01-02T03:04:05.000Z)');
    expect(lines.slice(1, 17)).toHaveLength(16);
    for (const line of lines.slice(1, 17)) expect(line).toMatch(/^ {2}ok {7}0 {2}\S/);
    expect(lines[17]).toMatch(/^figures: 0 tablets \(0 hosted\), .*0 objects \(0 B\), .*GC grace 10m0s$/);
    expect(lines[18]).toMatch(/second run/);
  });

  it('problems - counts, severities, a few examples and how many more; not checkable says why', () => {
    const row = tabletRow('0001', null);
    const cols = new Map([
      ['prev', 'null'],
      ...['a', 'b', 'c', 'd', 'e'].map(
        (f) => [`file:tables/0001/${f}.rf`, '{"size":1,"entries":1}'] as const,
      ),
    ]);
    const report = checkCluster(
      input({
        tablets: [parseTablet(row, cols)],
        objects: new Map([['tables/0001/old.rf', { size: 3, modifiedMs: NOW - 3_600_000 }]]),
        temporaries: { notCheckable: 'the server does not implement ListMultipartUploads' },
      }),
    );
    const text = formatCheckReport(report);
    expect(text).toMatch(/^INCONSISTENT: 2 of 11 checks found problems \(checked /);
    expect(text).toContain(
      `  CRITICAL 5  referenced files missing from the object store: tables/0001/a.rf (tablet ${row}); ` +
        `tables/0001/b.rf (tablet ${row}); tables/0001/c.rf (tablet ${row}) (+2 more)\n`,
    );
    expect(text).toContain(
      '  PROBLEM  1  unreferenced files older than the GC grace, not marked for deletion: tables/0001/old.rf (1h0m old)\n',
    );
    expect(text).toContain(
      '  n/a      -  temporaries of unfinished writes older than the GC grace: not checkable (the server does not implement ListMultipartUploads)\n',
    );
  });

  it('a problem this CLI does not know (a newer manager) is shown with its items as JSON', () => {
    const report = checkCluster(input());
    const problems = {
      ...report.problems,
      splitBrain: {
        title: 'tablets hosted twice',
        severity: 'error' as const,
        count: 1,
        items: [{ t: 'x' }],
      },
    };
    expect(formatCheckReport({ ...report, ok: false, problems })).toContain(
      '  PROBLEM  1  tablets hosted twice: {"t":"x"}\n',
    );
  });

  it('deletion marks - those the collector skips (a problem), and those naming a file a tablet still references (shared: not one)', () => {
    const row = tabletRow('0001', null);
    const cols = new Map([
      ['prev', 'null'],
      ['file:tables/0001/a.rf', '{"size":1,"entries":1}'],
    ]);
    const report = checkCluster(
      input({
        tablets: [parseTablet(row, cols)],
        objects: new Map([['tables/0001/a.rf', { size: 1, modifiedMs: NOW }]]),
        deletions: new Map([['tables/0001/a.rf', NOW - 1_000]]),
        badMarks: new Map([['tables/../x', 'not a valid object name']]),
      }),
    );
    expect(report.ok).toBe(false);
    expect(report.problems.referencedDeletionMarks.items).toEqual([
      { file: 'tables/0001/a.rf', tablets: [row] },
    ]);
    const text = formatCheckReport(report);
    expect(text).toContain(
      '  PROBLEM  1  deletion marks the garbage collector cannot act on (skipped): ~del:tables/../x: not a valid object name\n',
    );
    expect(text).toContain(
      `  info     1  deletion marks naming a file a tablet still references (shared: kept until none does): tables/0001/a.rf (tablet ${row})\n`,
    );
  });

  it('selections - a system job over selected and unselected files, a selected file the tablet lacks', () => {
    const row = tabletRow('0001', null);
    const reservation = {
      compactor: '/c',
      queueId: 'q',
      inputs: ['b', 'c'],
      output: 'out',
      kind: 'system',
      attempt: 0,
      reservedAt: 1,
      allFiles: false,
      settings: { versions: 1, nowMs: 0, filters: [], dropDeletes: false },
    };
    const cols = new Map([
      ['prev', 'null'],
      ...['a', 'b', 'c'].map((f) => [`file:${f}`, '{"size":1,"entries":1}'] as const),
      ['compact:U1', '{"requestedAt":1}'],
      ['selected', JSON.stringify({ ids: ['U1'], files: ['a', 'b', 'gone'], filters: [] })],
      ['ecomp:E1', JSON.stringify(reservation)],
    ]);
    const text = formatCheckReport(checkCluster(input({ tablets: [parseTablet(row, cols)] })));
    expect(text).toContain(
      "  CRITICAL 2  user compactions' selections shared with system jobs, or unlike their user jobs: " +
        `gone on ${row}: selected, not a file of the tablet; E1 on ${row}: system job over selected and unselected files (b)\n`,
    );
  });
});
