/**
 * Selectors (src/meta/selectors.ts) and the statistics they read (src/meta/file-stats.ts): what each
 * chooses from a tablet's files, the errors of bad ones, and a user compaction's selection made with them
 * (src/queue/selection.ts): only the files chosen, with every input of a job that holds one, never grown,
 * coalesced only with requests of the same selectors, and done at once when nothing is chosen.
 */
import { describe, expect, it } from 'vitest';
import { addFigures, joinFamilies, shareFigures, type FileFigures } from '../../src/meta/file-stats.js';
import { chooseFiles, parseSelector, showSelector, type Selector } from '../../src/meta/selectors.js';
import { tableConfigSchema } from '../../src/meta/table-config.js';
import { parseTablet, type FileMeta, type Reservation, type TabletMeta } from '../../src/meta/tablet.js';
import { userStep } from '../../src/queue/selection.js';
import { planTablet } from '../../src/queue/tablet-plan.js';

const DAY = 86_400_000;
const NOW = 100 * DAY;

/** small: 1 KiB, new; big: 1 MiB, old; dels: 10 KiB, half deletes, old; legacy: no statistics. */
const FILES: [string, FileMeta][] = [
  ['small', { size: 1024, entries: 10, deletes: 0, oldestTs: NOW - DAY, newestTs: NOW - 1000 }],
  ['big', { size: 1 << 20, entries: 1000, deletes: 10, oldestTs: 0, newestTs: NOW - 30 * DAY }],
  ['dels', { size: 10 * 1024, entries: 100, deletes: 50, oldestTs: 0, newestTs: NOW - 8 * DAY }],
  ['legacy', { size: 2048, entries: 20 }],
];

const files = (entries = FILES) => new Map<string, FileFigures>(entries);
const choose = (...texts: string[]) => chooseFiles(files(), texts.map(parseSelector), NOW);

describe('selectors', () => {
  it('each chooses what it names, reading only the recorded figures', () => {
    expect(choose('all')).toEqual(['big', 'dels', 'legacy', 'small']);
    expect(choose('smaller-than:4K')).toEqual(['legacy', 'small']);
    expect(choose('smaller-than:1M')).toEqual(['dels', 'legacy', 'small']);
    // The newest entry decides; a file without statistics is never "old".
    expect(choose('older-than:7d')).toEqual(['big', 'dels']);
    expect(choose('older-than:10d')).toEqual(['big']);
    // 60 deletes in 1,130 entries: 0.053.
    expect(choose('deletes-above:0.05')).toEqual(['big', 'dels', 'legacy', 'small']);
    expect(choose('deletes-above:0.06')).toEqual([]);
  });

  it('several choose the files every one of them chooses', () => {
    expect(choose('smaller-than:1M', 'older-than:7d')).toEqual(['dels']);
    expect(choose('older-than:7d', 'deletes-above:0.06')).toEqual([]);
    expect(choose('all', 'smaller-than:4K')).toEqual(['legacy', 'small']);
  });

  it('the tablet share of deletes counts a file without statistics by its entries', () => {
    const only = files([['legacy', { size: 1, entries: 100 }], FILES[2]!]);
    // 50 deletes in 200 entries.
    expect(chooseFiles(only, [parseSelector('deletes-above:0.2')], NOW)).toEqual(['dels', 'legacy']);
    expect(chooseFiles(only, [parseSelector('deletes-above:0.3')], NOW)).toEqual([]);
    expect(chooseFiles(new Map(), [parseSelector('deletes-above:0.1')], NOW)).toEqual([]);
  });

  it('bad selectors are refused, naming what is wrong', () => {
    const refused = (text: string) => {
      try {
        parseSelector(text);
      } catch (err) {
        return (err as Error).message;
      }
      throw new Error(`${text} was accepted`);
    };
    expect(refused('largest')).toMatch(/unknown selector "largest": expected one of all, smaller-than/);
    expect(refused('smaller-than')).toMatch(/smaller-than needs size/);
    expect(refused('smaller-than:big')).toMatch(/not a size: "big"/);
    expect(refused('smaller-than:0')).toMatch(/selector "smaller-than:0"/);
    expect(refused('older-than:3 weeks')).toMatch(/not a duration/);
    expect(refused('deletes-above:1.5')).toMatch(/selector "deletes-above:1.5"/);
    expect(refused('deletes-above:lots')).toMatch(/not a ratio: "lots"/);
    expect(refused('all:files')).toMatch(/all takes no argument/);
  });

  it('read back as the CLI takes them', () => {
    for (const text of [
      'all',
      'smaller-than:64M',
      'smaller-than:1000',
      'older-than:7d',
      'older-than:90m',
      'deletes-above:0.25',
    ])
      expect(showSelector(parseSelector(text))).toBe(text);
  });
});

describe('file statistics', () => {
  const f: FileFigures = {
    size: 1000,
    entries: 100,
    deletes: 40,
    oldestTs: 5,
    newestTs: 9,
    keyBytes: 800,
    valueBytes: 2000,
    families: [
      ['61', 60],
      ['62', 40],
    ],
    otherFamilies: 0,
  };

  it('a share scales every count, keeps the timestamps, and is marked estimated', () => {
    expect(shareFigures(f, 0.25)).toEqual({
      size: 250,
      entries: 25,
      deletes: 10,
      oldestTs: 5,
      newestTs: 9,
      keyBytes: 200,
      valueBytes: 500,
      families: [
        ['61', 15],
        ['62', 10],
      ],
      otherFamilies: 0,
      estimated: true,
    });
    expect(shareFigures(f, 0)).toMatchObject({ size: 1, entries: 0, deletes: 0, oldestTs: 5 });
    expect(shareFigures(f, 0, true)).toMatchObject({ entries: 1, deletes: 0 });
    expect(shareFigures({ size: 10, entries: 4 }, 0.5)).toEqual({ size: 5, entries: 2, estimated: true });
    // The whole file is no estimate.
    expect(shareFigures(f, 1)).toEqual(f);
  });

  it('two shares of a file add up; each statistic only when both have it', () => {
    const other: FileFigures = {
      size: 10,
      entries: 5,
      deletes: 1,
      oldestTs: 2,
      newestTs: 7,
      keyBytes: 1,
      valueBytes: 2,
      families: [['63', 5]],
      otherFamilies: 0,
    };
    expect(addFigures(f, other)).toEqual({
      size: 1010,
      entries: 105,
      deletes: 41,
      oldestTs: 2,
      newestTs: 9,
      keyBytes: 801,
      valueBytes: 2002,
      families: [
        ['61', 60],
        ['62', 40],
        ['63', 5],
      ],
      otherFamilies: 0,
    });
    expect(addFigures(f, { size: 10, entries: 5 })).toEqual({ size: 1010, entries: 105 });
  });

  it('families beyond the limit are counted together', () => {
    const many = Array.from({ length: 20 }, (_, i) => ({
      families: [[i.toString(16).padStart(2, '0'), i + 1]] as [string, number][],
      otherFamilies: 1,
    }));
    const joined = joinFamilies(many, 16);
    expect(joined.families).toHaveLength(16);
    expect(joined.families[0]).toEqual(['00', 1]);
    // Families 16..19 hold 17 + 18 + 19 + 20 entries, and every record one more.
    expect(joined.otherFamilies).toBe(17 + 18 + 19 + 20 + 20);
    expect(joinFamilies(many, Infinity).families).toHaveLength(20);
  });
});

describe('a user compaction with selectors', () => {
  const ROW = '0001<';
  const tablet = (): TabletMeta => {
    const meta = parseTablet(ROW, new Map([['prev', 'null']]));
    for (const [name, f] of FILES) meta.files.set(name, { ...f });
    return meta;
  };
  const ask = (meta: TabletMeta, id: string, at: number, select?: Selector[]) =>
    meta.userCompactions.set(id, { requestedAt: at, filters: [], ...(select ? { select } : {}) });
  const small = [parseSelector('smaller-than:4K')];
  const config = tableConfigSchema.parse({ queues: [{ queue: 'q' }] });

  it('selects only the chosen files; its job keeps delete markers; it never grows', () => {
    const meta = tablet();
    ask(meta, 'U1', NOW, small);
    userStep(meta, 0)!.apply(meta);
    expect(meta.selection).toEqual({ ids: ['U1'], files: ['legacy', 'small'], filters: [], select: small });
    const job = planTablet(meta, config).find((j) => j.kind === 'user')!;
    expect([...job.files].sort()).toEqual(['legacy', 'small']);
    expect(job.allFiles).toBe(false);
    // A later request without selectors does not join it: it waits for the next rewrite.
    ask(meta, 'U2', NOW + 1);
    expect(userStep(meta, 0)).toBeUndefined();
  });

  it('takes every input of a running job holding a chosen file', () => {
    const meta = tablet();
    const running: Reservation = {
      compactor: '/c',
      queueId: 'q001',
      inputs: ['small', 'big'],
      output: 'out',
      kind: 'system',
      attempt: 0,
      reservedAt: 1,
      allFiles: false,
      settings: { versions: 1, nowMs: 1, filters: [], dropDeletes: false },
    };
    meta.reservations.set('E1', running);
    ask(meta, 'U1', NOW, small);
    userStep(meta, 0)!.apply(meta);
    expect(meta.selection?.files).toEqual(['big', 'legacy', 'small']);
  });

  it('coalesces only with requests of the same selectors', () => {
    const meta = tablet();
    ask(meta, 'U1', NOW, small);
    ask(meta, 'U2', NOW + 1, [parseSelector('smaller-than:4096')]);
    ask(meta, 'U3', NOW + 2);
    userStep(meta, 0)!.apply(meta);
    expect(meta.selection).toMatchObject({ ids: ['U1', 'U2'], files: ['legacy', 'small'] });
  });

  it('a choice of no file completes at once; deletes-above takes all and drops the markers', () => {
    const meta = tablet();
    ask(meta, 'U1', NOW, [parseSelector('older-than:365d')]);
    const done = userStep(meta, 0)!;
    expect(done.finished).toEqual(['U1']);
    done.apply(meta);
    expect(meta.selection).toBeUndefined();
    ask(meta, 'U2', NOW, [parseSelector('deletes-above:0.05')]);
    userStep(meta, 0)!.apply(meta);
    expect(planTablet(meta, config).find((j) => j.kind === 'user')).toMatchObject({ allFiles: true });
  });
});
